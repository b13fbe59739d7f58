"""Evidence files (coursekit/evidence.py): the build job stores only listed, plainly named files of at
most 2 MB beside their result, and refuses anything else naming snippet and file, losing nothing
older; every stored one exists, matches its SHA-256, opens as what it says it is and names its
snippet; ``{{ evidence key }}`` links each to the file the site serves for the page's set."""

import gzip
import hashlib
import json
import re
import tarfile
from pathlib import Path

import pytest
from test_build_job import build, make_tree, result_doc
from test_mdext import convert, data, doc, fails

from coursekit import results as store
from coursekit.page.context import Page, PageContext
from coursekit.page.evidence import evidence

# ---------------------------------------------------------------- the build job

EVIDENCE = """
from coursekit.evidence import artifact

def measure(small=False):
    path = artifact("mx/{name}", "{suffix}")
    folder = path.parent
    {write}
    return {{
        "repetitions": 1,
        "t": {{"median": 1.0, "p10": 1.0, "p90": 1.0, "min": 1.0, "max": 1.0, "n": 1, "unit": "us"}},
        "artifacts": [{{"name": {listed}, "what": "compile log", "opens_with": "a text editor", "shows": "a log"}}],
    }}
"""


def evidence_snippet(name, write, listed="path.name", suffix="log.txt"):
    return EVIDENCE.format(name=name, write=write, listed=listed, suffix=suffix)


def test_the_job_stores_listed_files_and_refuses_big_badly_named_or_missing_ones(tmp_path):
    sources = {
        "good": evidence_snippet("good", "path.write_text('new log')"),
        "big": evidence_snippet("big", f"path.write_bytes(b'x' * ({store.MAX_ARTIFACT_BYTES} + 1))"),
        "badname": evidence_snippet("badname", "(folder / 'Odd Name.txt').write_text('x')", listed="'Odd Name.txt'"),
        "missing": evidence_snippet("missing", "pass"),
        "unlisted": evidence_snippet(
            "unlisted", "path.write_text('x'); (folder / 'mx-unlisted-extra.txt').write_text('y')"
        ),
    }
    snippets, results, existing = make_tree(tmp_path, stored=("good", "big"), **sources)
    for name in ("good", "big"):  # older results with evidence files of their own
        old = store.evidence_dir(store.result_path(f"mx/{name}", "cpu", results))
        old.mkdir()
        (old / f"mx-{name}-old.txt").write_text("older")
    older_big = (results / "cpu" / "mx" / "big" / "mx-big-old.txt").read_bytes()
    proc = build(snippets, results, "--cpu", "--force")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    summary = out.split("summary")[-1]
    assert re.search(r"mx/big .*mx-big-log\.txt' is 2,097,153 bytes, over the limit", out), out
    assert re.search(r"mx/badname .*'Odd Name\.txt' is not a plain file name", out), out
    assert re.search(r"mx/missing .*'mx-missing-log\.txt' is listed but was not written", out), out
    assert re.search(r"mx/unlisted .*mx-unlisted-extra\.txt that data\.artifacts does not list", out), out
    for name in ("big", "badname", "missing", "unlisted"):
        assert f"mx/{name}" in summary, f"the summary does not name mx/{name}:\n{out}"
    for name in ("badname", "missing", "unlisted"):
        assert not store.result_path(f"mx/{name}", "cpu", results).exists(), f"mx/{name}'s result was written"
    big = store.result_path("mx/big", "cpu", results)
    assert big.read_bytes() == existing[big], "the older result of a refused snippet was changed"
    assert (results / "cpu" / "mx" / "big" / "mx-big-old.txt").read_bytes() == older_big, "older evidence lost"
    good = store.load(store.result_path("mx/good", "cpu", results))
    folder = results / "cpu" / "mx" / "good"
    assert sorted(p.name for p in folder.iterdir()) == ["mx-good-log.txt"], "the older evidence was not replaced"
    assert good["artifacts"] == [
        {"name": "mx-good-log.txt", "bytes": 7, "sha256": hashlib.sha256(b"new log").hexdigest()}
    ]
    assert not list(results.rglob("*.tmp")), "a temporary file or folder was left behind"


def test_a_stored_result_refuses_records_that_do_not_match_its_listing():
    listed = {"name": "mx-a-trace.json.gz", "what": "profiler trace", "opens_with": "ui.perfetto.dev", "shows": "it"}
    d = result_doc("mx/a")
    d["data"]["artifacts"] = [listed]
    with pytest.raises(store.ResultError, match="artifacts and data.artifacts go together"):
        store.validate(d)
    d["artifacts"] = [{"name": "mx-a-trace.json.gz", "bytes": store.MAX_ARTIFACT_BYTES + 1, "sha256": "0" * 64}]
    with pytest.raises(store.ResultError, match="bytes"):
        store.validate(d)
    d["artifacts"][0]["bytes"] = 10
    store.validate(d)
    d["data"]["artifacts"][0]["what"] = "a picture"
    with pytest.raises(store.ResultError, match="not one of profiler trace"):
        store.validate(d)
    d["data"]["artifacts"][0].update(what="profiler trace", name="mx-a-trace.json")
    d["artifacts"][0]["name"] = "mx-a-trace.json"
    with pytest.raises(store.ResultError, match="ends in .json"):
        store.validate(d)


def test_a_failed_write_keeps_the_older_result_and_its_files(tmp_path, monkeypatch):
    listed = {"name": "mx-a-log.txt", "what": "compile log", "opens_with": "a text editor", "shows": "a log"}
    target = store.result_path("mx/a", "cpu", tmp_path / "build_results")
    source = tmp_path / "made"
    source.mkdir()
    (source / "mx-a-log.txt").write_text("new")
    d = result_doc("mx/a")
    d["data"]["artifacts"] = [listed]
    d["artifacts"] = [{"name": "mx-a-log.txt", "bytes": 3, "sha256": hashlib.sha256(b"new").hexdigest()}]
    store.write_atomic(target, result_doc("mx/a"))
    before = target.read_bytes()
    (store.evidence_dir(target)).mkdir()
    (store.evidence_dir(target) / "mx-a-old.txt").write_text("older")

    def disk_full(path, doc):
        raise OSError("No space left on device")

    monkeypatch.setattr(store, "write_atomic", disk_full)
    with pytest.raises(OSError, match="No space"):
        store.write_with_evidence(target, d, source)
    assert target.read_bytes() == before
    assert [p.name for p in store.evidence_dir(target).iterdir()] == ["mx-a-old.txt"]
    assert not list(target.parent.glob(".*.tmp")), "a temporary folder was left behind"
    monkeypatch.undo()
    store.write_with_evidence(target, d, source)
    assert [p.name for p in store.evidence_dir(target).iterdir()] == ["mx-a-log.txt"]
    # a job killed between moving the older folder aside and putting the new one in its place
    aside = target.parent / ".a.old.x1.tmp"
    (aside / "a").mkdir(parents=True)
    (aside / "a" / "mx-a-log.txt").write_text("new")
    store.evidence_dir(target).rename(tmp_path / "gone")
    said = store.restore_interrupted_evidence(tmp_path / "build_results")
    assert any("restored" in line for line in said) and (store.evidence_dir(target) / "mx-a-log.txt").exists()
    assert not aside.exists()


# ---------------------------------------------------------------- every stored evidence file


def stored_evidence():
    for hw in store.hardware_sets():
        for path in store.result_files(hw):
            d = store.load(path)
            for described, record in zip(d["data"].get("artifacts", []), d.get("artifacts", []), strict=True):
                yield pytest.param(d["key"], path, described, record, id=f"{hw}/{record['name']}")


def opens(path: Path, what: str, key: str) -> None:
    """The file opens as what its result says it is, and names its snippet inside where it can."""
    raw = path.read_bytes()
    if what == "profiler trace":
        trace = json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
        assert isinstance(trace.get("traceEvents"), list) and trace["traceEvents"], f"{path}: no traceEvents"
        assert trace.get("course_snippet") == key, f"{path}: the trace's metadata does not name {key}"
    elif what == "memory snapshot":
        body = gzip.decompress(raw) if path.name.endswith(".gz") else raw
        assert body[:1] == b"\x80", f"{path}: not a pickle (memory_viz reads torch.cuda.memory._dump_snapshot's)"
    elif path.name.endswith((".tar.gz", ".tgz")):  # a TORCH_TRACE folder for tlparse, or IR files
        with tarfile.open(path) as tar:
            assert tar.getmembers(), f"{path}: an empty archive"
    elif path.name.endswith(".gz"):
        gzip.decompress(raw).decode()
    else:
        raw.decode()  # a log or Triton IR: text


@pytest.mark.parametrize(("key", "result", "described", "record"), list(stored_evidence()))
def test_a_stored_evidence_file_exists_matches_is_bounded_opens_and_names_its_snippet(key, result, described, record):
    path = store.evidence_dir(result) / record["name"]
    assert path.is_file(), f"{result} records {record['name']}, which is not stored at {path}"
    raw = path.read_bytes()
    assert len(raw) == record["bytes"] <= store.MAX_ARTIFACT_BYTES, path
    assert hashlib.sha256(raw).hexdigest() == record["sha256"], f"{path} is not the file its result records"
    assert path.name.startswith(store.artifact_prefix(key)), f"{path} does not name its snippet {key}"
    opens(path, described["what"], key)
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        r["name"] for r in store.load(result)["artifacts"]
    ), f"{path.parent} holds files its result does not record"


def test_the_demonstration_evidence_is_stored_for_the_cpu_set():
    keys = {(p.values[0], p.values[1].parts[-3]) for p in stored_evidence()}
    assert ("m02/evidence", "cpu-small") in keys, keys


# ---------------------------------------------------------------- {{ evidence key }}

LISTED = {"name": "mx-a-trace.json.gz", "what": "profiler trace", "opens_with": "ui.perfetto.dev", "shows": "two steps"}


def store_evidence(site, hardware="nvidia-h200", content=b"x" * 1500):
    d = doc("mx/a", data(artifacts=[LISTED]), hardware=hardware)
    if store.is_cpu_set(hardware):
        d["provenance"].update(gpu=store.CPU_GPU, sizes=store.SMALL)
    d["artifacts"] = [{"name": LISTED["name"], "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}]
    path = store.result_path("mx/a", hardware, site / "build_results")
    store.write_atomic(path, d)
    folder = store.evidence_dir(path)
    folder.mkdir(exist_ok=True)
    (folder / LISTED["name"]).write_bytes(content)


@pytest.fixture
def site(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "snippets" / "mx").mkdir(parents=True)
    store_evidence(tmp_path)
    return tmp_path


def test_the_evidence_box_links_each_file_of_the_pages_set_with_its_size_and_tool(site):
    html = convert(site, "{{ evidence mx/a }}")
    assert "Get the evidence" in html
    assert 'href="downloads/data/nvidia-h200/mx/a/mx-a-trace.json.gz"' in html
    assert "profiler trace</a> (2 KB, gzipped): two steps; open it in ui.perfetto.dev." in html
    store_evidence(site, "cpu-small", content=b"y" * 31_000)
    assert 'href="downloads/data/cpu-small/mx/a/mx-a-trace.json.gz"' in convert(
        site, "{{ evidence mx/a }}", "cpu-small"
    )


def test_the_evidence_box_refuses_what_it_cannot_link(site):
    fails(site, "{{ evidence mx/nope }}", r"no result 'mx/nope'")
    fails(site, "{{ evidence mx/a extra }}", r"written \{\{ evidence module/snippet \}\}")
    (site / "build_results" / "nvidia-h200" / "mx" / "a" / LISTED["name"]).unlink()
    fails(site, "{{ evidence mx/a }}", r"evidence file .*mx-a-trace\.json\.gz of result 'mx/a' is missing")


def test_a_result_without_evidence_files_is_refused(site):
    store.write_atomic(store.result_path("mx/b", "nvidia-h200", site / "build_results"), doc("mx/b", data()))
    fails(site, "{{ evidence mx/b }}", r"lists no evidence files")


def test_the_evidence_links_resolve_to_files_the_built_site_serves(built_site):
    """Every evidence box of a built page links to a file there; and the box for each stored evidence
    result, rendered from the repository's results on its own set, links to the file the site serves."""
    site, _ = built_site
    for page in site.rglob("*.html"):
        text = page.read_text()
        for box in re.findall(r'<div class="admonition info evidence">.*?</div>', text, re.S):
            for href in re.findall(r'href="([^"]+)"', box):
                assert (page.parent / href).resolve().is_file(), f"{page}: {href} is not served"
    rendered = 0
    for key, result, _, record in (p.values for p in stored_evidence()):
        hw = result.parts[-3]
        ctx = PageContext(Page(None, store.RESULTS_DIR, store.RESULTS_DIR.parent / "snippets", site), hw)
        ctx.page.stash = lambda text: text
        (href,) = re.findall(rf'href="([^"]*{re.escape(record["name"])})"', evidence(ctx, key, "{{ evidence }}"))
        served = site / href
        assert served.is_file(), f"the site does not serve {href}"
        assert served.read_bytes() == (store.evidence_dir(result) / record["name"]).read_bytes()
        rendered += 1
    assert rendered, "no stored evidence result to render"
