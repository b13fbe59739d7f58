"""Every snippet runs as a reader runs it (`python file.py`) and returns valid data, on a CPU at small sizes."""

import ast
import json

import pytest
from conftest import ROOT, _run_script, run_python, run_script_once

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
def test_snippet_measure_returns_valid_data(path):
    """The data of the same run (run_script_once: the download, through the build job's runner)."""
    proc = run_script_once(path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    try:
        store.check_data(proc.data)
    except store.ResultError as exc:
        if "must be positive" not in str(exc):
            raise
        # On a CPU a race's time can be a difference of two host timings (m14/decode1: T(n tokens)
        # less T(1 token), two rounds at small sizes), which a loaded machine can push below zero:
        # one fresh run more, held to the same check
        again = _run_script(path)
        assert again["returncode"] == 0, again["stderr"][-4000:]
        store.check_data(again["data"])


def test_the_runner_prints_the_table_from_the_data_it_measured(tmp_path):
    """--table runs the snippet's main block with measure() swapped for the data already measured:
    measure runs once, and the table shows that data."""
    snippet = tmp_path / "demo.py"
    snippet.write_text(
        "calls = []\n"
        "def measure(small=False):\n"
        "    calls.append(small)\n"
        "    return {'repetitions': 3, 'value': 41 + len(calls)}\n"
        "if __name__ == '__main__':\n"
        "    print('value', measure(small=True)['value'], 'calls', len(calls))\n"
    )
    proc = run_python(["-m", "coursekit.runner", str(snippet), str(tmp_path / "out.json"), "--small", "--table"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["value", "42", "calls", "1"]
    assert json.loads((tmp_path / "out.json").read_text())["data"]["value"] == 42


def _processes_statement(path):
    """The module-level `PROCESSES = <int>` of a snippet, as the build job reads it (by AST)."""
    found = [
        node
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PROCESSES" for t in node.targets)
    ]
    return found[0] if len(found) == 1 else None


@pytest.mark.parametrize("path", MEASURED, ids=store.snippet_key)
def test_snippet_declares_its_processes(path):
    """The build job runs a snippet in PROCESSES fresh processes (run-to-run spread of host timings);
    one process is a choice that the snippet explains in a comment."""
    node = _processes_statement(path)
    assert node is not None, f"{path.relative_to(ROOT)} declares no module-level PROCESSES = <int>"
    value = node.value.value if isinstance(node.value, ast.Constant) else None
    assert isinstance(value, int) and not isinstance(value, bool) and value >= 1, (
        f"{path.relative_to(ROOT)}: PROCESSES must be a literal positive integer, not {ast.unparse(node.value)}"
    )
    if value == 1:
        lines = path.read_text().splitlines()
        line, above = lines[node.lineno - 1], lines[node.lineno - 2] if node.lineno > 1 else ""
        assert "#" in line or above.lstrip().startswith("#"), (
            f"{path.relative_to(ROOT)}: PROCESSES = 1 needs a comment saying why one process is enough"
        )


def test_figures_and_stats_import_without_torch():
    """figures.py modules run at site-build time, where torch may be missing: they and
    coursekit.stats must not import it (coursekit.bench does)."""
    figures = sorted((ROOT / "snippets").glob("*/figures.py"))
    assert figures
    code = f"""
import importlib.abc, importlib.util, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "jax"):
            raise ImportError(f"imported {{name}} at site-build time")

sys.meta_path.insert(0, NoTorch())
import coursekit.stats
for i, path in enumerate({[str(p) for p in figures]!r}):
    spec = importlib.util.spec_from_file_location(f"figures_{{i}}", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
"""
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr[-3000:]
