"""Every snippet's download, as the built site serves it, runs alone: copied into an empty folder
outside the repository, with nothing of the project on the path, on the CPU at small sizes."""

import ast

import pytest
from conftest import ROOT, run_script_once

from coursekit import results as store

SNIPPETS = store.snippet_files()


@pytest.mark.parametrize("snippet", SNIPPETS, ids=store.snippet_key)
def test_snippet_download_runs_outside_the_repository(snippet, built_site):
    site, _ = built_site
    served = site / "downloads" / f"{store.snippet_key(snippet)}.py"
    assert served.exists(), f"the site does not serve {served.relative_to(site)}"
    text = served.read_text()
    assert "coursekit" not in "\n".join(ln for ln in text.splitlines() if ln.lstrip().startswith(("import", "from")))
    # run_script_once runs exactly this file, alone in an empty folder, no project on the path
    proc = run_script_once(snippet)
    assert proc.standalone == text, "the site serves a different file from the one the tests ran"
    assert proc.returncode == 0, f"{served.name} failed outside the repository:\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{served.name} printed nothing"
    for inside in ("snippets", "coursekit"):  # nothing of the project was used (the venv may live in it)
        assert str(ROOT / inside) not in proc.stderr, f"{served.name} reached into the repository:\n{proc.stderr}"


def test_raw_data_is_served_for_every_result(built_site):
    site, _ = built_site
    for path in sorted(store.RESULTS_DIR.rglob("*.json")):
        rel = path.relative_to(store.RESULTS_DIR)
        assert (site / "downloads" / "data" / rel).read_bytes() == path.read_bytes(), rel


def test_pages_link_to_the_served_files(built_site):
    site, _ = built_site
    page = (site / "methodology" / "index.html").read_text()
    assert 'href="../downloads/methodology/ceilings.py"' in page
    assert 'href="../downloads/data/nvidia-h200/methodology/ceilings.json"' in page
    assert "data:application/json;base64" not in page


def test_no_download_imports_the_project_or_a_sibling(built_site):
    site, _ = built_site
    names = {p.stem for p in SNIPPETS} | {"coursekit", "figures"}
    for served in (site / "downloads").rglob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(served.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert not imported & names, f"{served} imports {imported & names}"


def test_downloads_pass_pyflakes(built_site):
    """No undefined or unused name in what a reader downloads (ruff's pyflakes rules)."""
    from test_lint import ruff

    site, _ = built_site
    proc = ruff("check", "--no-cache", "--isolated", "--select", "F", str(site / "downloads"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
