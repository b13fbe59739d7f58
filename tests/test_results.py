"""Every stored result is complete, valid and measured from the snippet as it stands now."""

import pytest
from conftest import ROOT

from coursekit import results as store

SNIPPETS = store.snippet_files()
RESULT_FILES = [p for hw in store.hardware_sets() for p in store.result_files(hw)]


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_result_validates_with_full_provenance(path):
    doc = store.load(path)  # raises, naming the file, on bad JSON, schema or provenance
    assert doc["hardware"] == path.relative_to(ROOT / "build_results").parts[0]
    assert doc["key"] == "/".join(path.relative_to(ROOT / "build_results").with_suffix("").parts[1:])
    prov = doc["provenance"]
    assert prov["repetitions"] == doc["data"]["repetitions"]
    assert len(prov["commit"].split("+")[0]) == 40, f"{path}: provenance.commit is not a git commit"
    if not store.is_cpu_set(doc["hardware"]):
        assert prov["gpu"] != "none (CPU run)" and prov["driver"] != "none", (
            f"{path}: GPU result measured without a GPU"
        )


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_result_is_not_stale(path):
    doc = store.load(path)
    snippet = ROOT / doc["snippet"]
    assert snippet.exists(), f"{path}: its snippet {doc['snippet']} no longer exists; delete the result"
    assert doc["snippet_hash"] == store.snippet_hash(snippet), (
        f"{doc['snippet']} changed since {path.relative_to(ROOT)} was measured: re-measure it on the GPU with "
        f"`python scripts/build_results.py --only {doc['key']}`"
    )


PENDING = dict(
    line.split(None, 1)
    for line in (ROOT / "build_results" / "pending.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=store.snippet_key)
def test_every_snippet_has_a_reference_result(snippet):
    key = store.snippet_key(snippet)
    path = store.result_path(key, store.REFERENCE_HARDWARE)
    if key in PENDING:
        assert not path.exists(), f"{key} has been measured: delete its line in build_results/pending.txt"
        pytest.skip(f"{key} is pending measurement: {PENDING[key].strip()}")
    assert path.exists(), (
        f"{snippet.relative_to(ROOT)} has no result for {store.REFERENCE_HARDWARE}: "
        f"run `python scripts/build_results.py --only {store.snippet_key(snippet)}` on the GPU"
    )


def test_validation_rejects_what_it_should():
    good = store.load(ROOT / "build_results" / store.REFERENCE_HARDWARE / "methodology" / "ceilings.json")
    for breaks in (
        lambda d: d["data"].update(repetitions=0),
        lambda d: d["data"]["copy"]["time_us"].update(median=float("inf")),
        lambda d: d["data"]["copy"]["time_us"].update(p10=1e9),
        lambda d: d["provenance"].pop("commit"),
        lambda d: d.update(schema_version=0),
    ):
        doc = __import__("copy").deepcopy(good)
        breaks(doc)
        with pytest.raises(store.ResultError):
            store.validate(doc)


@pytest.mark.parametrize("reps, said", [(None, "no repetitions"), (0, "repetitions is 0"), ("3", "repetitions is '3'")])
def test_data_without_a_repetitions_count_is_named_as_what_measure_returned(reps, said):
    """The build job copies data.repetitions into the provenance: a measure() that returned none is
    the snippet's fault, and the message says so (not 'provenance lacks repetitions')."""
    good = store.load(ROOT / "build_results" / store.REFERENCE_HARDWARE / "methodology" / "ceilings.json")
    doc = __import__("copy").deepcopy(good)
    doc["data"].pop("repetitions")
    if reps is not None:
        doc["data"]["repetitions"] = reps
    doc["provenance"]["repetitions"] = doc["data"].get("repetitions")  # as coursekit/build.py fills it
    with pytest.raises(store.ResultError) as err:
        store.validate(doc, "x.json")
    message = str(err.value)
    assert message.startswith("x.json: data") and said in message, message
    assert "measure() returned" in message and "provenance" not in message, message


@pytest.mark.parametrize("depth", [900, 100_000])
def test_a_result_nested_too_deep_is_refused_naming_the_file(depth, tmp_path):
    """Not a RecursionError from deep inside the checks: a ResultError that names the file."""
    import json

    good = store.load(ROOT / "build_results" / store.REFERENCE_HARDWARE / "methodology" / "ceilings.json")
    text = json.dumps(good)
    nested = "[" * depth + "1" + "]" * depth
    path = tmp_path / "nvidia-h200" / "methodology" / "ceilings.json"
    path.parent.mkdir(parents=True)
    assert text.count('"data": {') == 1
    path.write_text(text.replace('"data": {', f'"data": {{"deep": {nested}, '))
    with pytest.raises(store.ResultError, match="nested") as err:
        store.load(path)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------- hardware sets and their set.json


def test_every_set_has_a_descriptor_its_results_agree_with():
    """build_results/<set>/set.json names the set (asv's machine.json is the model): label, kind,
    GPU, whether it is the reference, a one-line description; each result's GPU is the set's."""
    sets = store.hardware_sets()
    assert {store.REFERENCE_HARDWARE, "nvidia-h200-rerun", "cpu-small"} <= set(sets)
    assert [hw for hw in sets if store.set_info(hw)["reference"]] == [store.REFERENCE_HARDWARE]
    for hw in sets:
        info = store.set_info(hw)
        assert info["kind"] == ("cpu" if store.is_cpu_set(hw) else "gpu")
        for path in store.result_files(hw):
            assert store.load(path)["provenance"]["gpu"] == info["gpu"], f"{path}: not measured on {info['gpu']}"


SET = {"label": "Test GPU", "kind": "gpu", "gpu": "NVIDIA Test GPU", "reference": False, "description": "A test set."}


def _set(results, name, info=SET):
    import json

    (results / name).mkdir(parents=True)
    if info is not None:
        (results / name / "set.json").write_text(json.dumps(info))


def test_a_folder_with_a_valid_descriptor_is_a_set(tmp_path):
    _set(tmp_path, "nvidia-test")
    (tmp_path / ".cache").mkdir()  # dot-folders and loose files are no sets
    (tmp_path / "pending.txt").write_text("")
    assert store.hardware_sets(tmp_path) == ["nvidia-test"]
    assert store.set_label("nvidia-test", tmp_path) == "Test GPU"
    assert store.result_files("nvidia-test", tmp_path) == []  # set.json is not a result


@pytest.mark.parametrize(
    "name, info, message",
    [
        ("empty", None, r"has no set\.json"),
        ("wrong-kind", dict(SET, kind="cpu"), r"kind is 'cpu'.*cpu-<name>"),
        ("cpu-x", SET, r"kind is 'gpu'"),
        ("no-label", {k: v for k, v in SET.items() if k != "label"}, r"lacks label"),
        ("claims-reference", dict(SET, reference=True), r"reference"),
        ("two-lines", dict(SET, description="one\ntwo"), r"description"),
        ("not-text", dict(SET, gpu=3), r"gpu is 3"),
    ],
)
def test_a_folder_that_is_not_a_described_set_is_refused_named(name, info, message, tmp_path):
    _set(tmp_path, name, info)
    with pytest.raises(store.ResultError, match=message) as err:
        store.hardware_sets(tmp_path)
    assert str(tmp_path / name) in str(err.value)


def test_a_symlink_is_refused_as_a_set(tmp_path):
    (tmp_path / "etc").symlink_to("/etc")
    with pytest.raises(store.ResultError, match="symbolic link") as err:
        store.hardware_sets(tmp_path)
    assert str(tmp_path / "etc") in str(err.value)
