"""The GPU build job's behaviour on good and bad snippets, on a machine without a GPU."""

import json
import shutil
import time

from conftest import ROOT, run_python

from coursekit import results as store

GOOD = """
from coursekit.bench import host_us

def measure(small=False):
    return {"repetitions": 3, "t": host_us(lambda: sum(range(100)), calls=10, repeats=3, warmup=1)}
"""
RAISES = "def measure(small=False):\n    raise RuntimeError('snippet broke')\n"
HANGS = "import time\n\ndef measure(small=False):\n    time.sleep(120)\n"
GARBAGE = "def measure(small=False):\n    return {'repetitions': 1, 't': float('nan')}\n"
NO_SPREAD = "def measure(small=False):\n    return {'repetitions': 1, 'speed': 3.0}\n"
SYNTAX = "def measure(small=False):\n    return {\n"


def make_tree(tmp_path):
    snippets = tmp_path / "snippets" / "mx"
    snippets.mkdir(parents=True)
    for name, src in dict(
        good=GOOD, raises=RAISES, hangs=HANGS, garbage=GARBAGE, no_spread=NO_SPREAD, syntax=SYNTAX
    ).items():
        (snippets / f"{name}.py").write_text(src)
    results = tmp_path / "build_results"
    # an existing, valid result for each failing snippet (from an older version of the code)
    existing = {}
    for name in ("raises", "hangs", "garbage", "no_spread", "syntax"):
        doc = {
            "schema_version": 1,
            "key": f"mx/{name}",
            "snippet": f"snippets/mx/{name}.py",
            "snippet_hash": "0" * 64,
            "hardware": "cpu",
            "provenance": {f: "x" for f in store.PROVENANCE_FIELDS} | {"repetitions": 1},
            "data": {"repetitions": 1, "t": {"median": 1.0, "p10": 1.0, "p90": 1.0, "n": 1}},
        }
        path = store.result_path(f"mx/{name}", "cpu", results)
        store.write_atomic(path, doc)
        existing[path] = path.read_bytes()
    return tmp_path / "snippets", results, existing


def build(snippets, results, *extra, timeout=120):
    return run_python(
        [
            str(ROOT / "scripts" / "build_results.py"),
            "--snippets-dir",
            str(snippets),
            "--results-dir",
            str(results),
            *extra,
        ],
        timeout=timeout,
    )


def test_failures_leave_results_untouched_and_are_named(tmp_path):
    snippets, results, existing = make_tree(tmp_path)
    proc = build(snippets, results, "--cpu", "--timeout", "10")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    for name in ("raises", "hangs", "garbage", "no_spread", "syntax"):
        assert f"mx/{name}" in out.split("failed")[-1], f"summary does not name mx/{name}:\n{out}"
    assert "timed out" in out and "snippet broke" in out and "not a finite number" in out
    for path, before in existing.items():
        assert path.read_bytes() == before, f"{path} was changed by a failing snippet"
    good = store.load(store.result_path("mx/good", "cpu", results))
    assert good["snippet_hash"] == store.snippet_hash(snippets / "mx" / "good.py")
    assert good["provenance"]["gpu"] == "none (CPU run)" and good["provenance"]["repetitions"] == 3
    assert not list(results.rglob("*.tmp")), "a temporary file was left behind"


def test_up_to_date_snippets_are_skipped_quickly(tmp_path):
    snippets, results, _ = make_tree(tmp_path)
    for name in ("raises", "hangs", "garbage", "no_spread", "syntax"):
        (snippets / "mx" / f"{name}.py").unlink()
    assert build(snippets, results, "--cpu").returncode == 0
    start = time.perf_counter()
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr
    assert time.perf_counter() - start < 10, "a no-op rebuild must take under 10 s"


def test_comment_changes_keep_a_result_fresh_and_code_changes_do_not(tmp_path):
    path = tmp_path / "s.py"
    path.write_text(GOOD)
    before = store.snippet_hash(path)
    path.write_text("# a comment\n" + GOOD.replace("calls=10", "calls = 10"))
    assert store.snippet_hash(path) == before
    path.write_text(GOOD.replace("calls=10", "calls=11"))
    assert store.snippet_hash(path) != before


def test_refuses_gpu_results_without_a_gpu(tmp_path):
    snippets, results, existing = make_tree(tmp_path)
    before = sorted(p for p in results.rglob("*") if p.is_file())
    proc = build(snippets, results)
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p for p in results.rglob("*") if p.is_file()) == before


def test_malformed_result_is_reported_with_its_path(tmp_path):
    bad = tmp_path / "m02" / "broken.json"
    bad.parent.mkdir()
    bad.write_text('{"schema_version": 1, "key": ')
    try:
        store.load(bad)
    except store.ResultError as exc:
        assert str(bad) in str(exc)
    else:
        raise AssertionError("a truncated results file loaded without error")
    shutil.copy(ROOT / "build_results" / store.REFERENCE_HARDWARE / "methodology" / "ceilings.json", bad)
    doc = json.loads(bad.read_text())
    del doc["provenance"]["driver"]
    bad.write_text(json.dumps(doc))
    try:
        store.load(bad)
    except store.ResultError as exc:
        assert str(bad) in str(exc) and "driver" in str(exc)
    else:
        raise AssertionError("a result without full provenance loaded without error")


def other_pythons():
    """Commands that run other Python 3 versions here: pythonX.Y on the PATH, or pyenv's versions."""
    import os
    import shutil
    import subprocess
    import sys

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = {}
    for v in ("3.10", "3.12", "3.13"):
        if v != here and shutil.which(f"python{v}"):
            found[v] = ([f"python{v}"], {})
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True)
        for version in out.stdout.split():
            mm = ".".join(version.split(".")[:2])
            if version[0] == "3" and mm not in (here, "3.6", "3.7", "3.8", "3.9"):
                found[mm] = (["pyenv", "exec", "python"], {"PYENV_VERSION": version})
    return [(cmd, dict(os.environ, **env)) for cmd, env in found.values()]


def test_hash_is_the_same_on_every_python_version():
    """The GPU machine's Python (3.12) and the test machines' (3.11) must agree on a snippet's hash."""
    import glob
    import subprocess

    import pytest

    code = (
        "import sys, glob; sys.path.insert(0, '.'); from coursekit import results as s; "
        "print([s.snippet_hash(p) for p in sorted(glob.glob('snippets/*/*.py'))])"
    )
    here = str([store.snippet_hash(p) for p in sorted(glob.glob(str(ROOT / "snippets/*/*.py")))])
    compared = 0
    for cmd, env in other_pythons():
        out = subprocess.run(cmd + ["-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
        if out.returncode != 0:
            continue  # e.g. a shim for a version that is not installed
        assert out.stdout.strip() == here, f"{cmd} {env.get('PYENV_VERSION', '')} computes different hashes"
        compared += 1
    if not compared:
        pytest.skip(
            "no second Python version runs here; the GPU machine's results (Python 3.12) "
            "are still compared with this one's hashes by tests/test_results.py"
        )
