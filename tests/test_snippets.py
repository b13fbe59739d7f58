"""Every snippet runs as a reader runs it (`python file.py`) and returns valid data, on a CPU at small sizes."""

import json

import pytest
from conftest import ROOT, run_python, run_script_once

from coursekit import results as store

MEASURED = store.snippet_files()
SCRIPTS = sorted(p for p in (ROOT / "snippets").glob("*/*.py"))  # measured snippets, demos, figures modules


@pytest.mark.parametrize("path", [p for p in SCRIPTS if p.name != "figures.py"], ids=lambda p: str(p.relative_to(ROOT)))
def test_snippet_runs_as_a_script(path):
    proc = run_script_once(path)
    assert proc.returncode == 0, (
        f"python {path.relative_to(ROOT)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    assert proc.stdout.strip(), f"{path.relative_to(ROOT)} printed nothing"


@pytest.mark.parametrize("path", MEASURED, ids=store.snippet_key)
def test_snippet_measure_returns_valid_data(path, tmp_path):
    out = tmp_path / "out.json"
    proc = run_python(["-m", "coursekit.runner", str(path), str(out), "--small"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    store.check_data(json.loads(out.read_text())["data"])
