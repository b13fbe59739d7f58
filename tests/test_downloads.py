"""Every snippet's download, as the built site serves it, runs alone: copied into an empty folder
outside the repository, with nothing of the project on the path, in a fresh interpreter with a
reader's environment (no TRITON_INTERPRET, no COURSE_* variable), on the CPU at small sizes."""

import ast
import os

import pytest
from conftest import ROOT, imports_torch_before_triton, reader_env, run_download, run_script_once

from coursekit import deps
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


def _module_level(body):
    """The statements that run when a file is run: the top level, and the branches of its ifs and trys."""
    for s in body:
        yield s
        for name in ("body", "orelse", "finalbody"):
            if isinstance(s, ast.If | ast.Try):
                yield from _module_level(getattr(s, name, []))
        for handler in getattr(s, "handlers", []):
            yield from _module_level(handler.body)


def interpreter_order_problem(text: str) -> str | None:
    """Why a file's module-level ``import triton`` would run before the file sets TRITON_INTERPRET
    (Triton reads it once, as it is imported: a kernel then cannot run on a CPU), or None."""
    first_import = first_switch = None
    for s in _module_level(ast.parse(text).body):
        if isinstance(s, ast.Import | ast.ImportFrom) and first_import is None:
            modules = [a.name for a in s.names] if isinstance(s, ast.Import) else [s.module or ""]
            if any(m.split(".")[0] == "triton" for m in modules):
                first_import = s.lineno
        elif not isinstance(s, ast.If | ast.Try) and "TRITON_INTERPRET" in ast.unparse(s) and first_switch is None:
            first_switch = s.lineno
    if first_import is not None and (first_switch is None or first_switch > first_import):
        where = f"on line {first_switch}" if first_switch else "nowhere"
        return f"`import triton` on line {first_import} runs before TRITON_INTERPRET is set ({where})"
    return None


@pytest.mark.parametrize("snippet", SNIPPETS, ids=store.snippet_key)
def test_download_switches_the_interpreter_before_importing_triton(snippet):
    problem = interpreter_order_problem(deps.standalone(snippet))
    assert problem is None, f"download of {store.snippet_key(snippet)}: {problem}"


HELPER = """import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton  # noqa: E402


@triton.jit
def kernel(x):
    pass
"""


def test_inlined_helper_keeps_its_switch_above_its_triton_import(tmp_path):
    """A helper whose switch sits between its imports keeps that order when it is inlined (the
    downloads once put every import of a helper above its code)."""
    (tmp_path / "_helper.py").write_text(HELPER)
    snippet = tmp_path / "demo.py"
    snippet.write_text("import torch\nfrom _helper import kernel\n\n\ndef measure(small=False):\n    return kernel\n")
    text = deps.standalone(snippet)
    assert "import triton" in text and "TRITON_INTERPRET" in text
    assert interpreter_order_problem(text) is None, text
    assert interpreter_order_problem(
        HELPER.replace("import triton  # noqa: E402\n", "").replace("import torch\n", "import torch\nimport triton\n")
    ), "the check must see a triton import above the switch"


PROBE = """import os
import sys


def measure(small=False):
    return {"repetitions": 1, "env": sorted(os.environ), "cwd": os.getcwd(), "small": small,
            "preloaded": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "triton", "coursekit"))}


if __name__ == "__main__":
    print(measure())
"""


@pytest.mark.parametrize(
    "imports_triton, torch_first, compiles",
    [(True, False, False), (True, True, False), (False, False, False), (False, True, True)],
    ids=["imports-triton", "torch-then-triton", "no-triton", "compiles"],
)
def test_downloads_run_in_a_readers_environment(imports_triton, torch_first, compiles):
    """What the download tests run in: no project variable, an empty folder outside the repository,
    and nothing imported for the file but torch: a file that imports triton (here only in a function
    it never calls) and not torch before it gets a fresh interpreter; one that imports torch first,
    or never imports triton, may be forked after `import torch` only; one that calls torch.compile
    and never imports triton, after torch.compile's machinery too (which imports triton, as the call
    would), never the project."""
    assert not {k for k in reader_env() if k.startswith("COURSE_") or k in ("TRITON_INTERPRET", "PYTHONPATH")}
    probe = ("import torch\n" if torch_first else "") + PROBE
    probe += "\n\ndef _on_a_gpu():\n    import triton  # noqa: F401\n" if imports_triton else ""
    probe += "\n\ndef _later(f):\n    return torch.compile(f)\n" if compiles else ""
    proc = run_download(probe, "probe.py", timeout=300)
    assert proc["returncode"] == 0, proc["stderr"]
    data = proc["data"]
    assert not [k for k in data["env"] if k.startswith("COURSE_") or k in ("TRITON_INTERPRET", "PYTHONPATH")], data
    assert not [m for m in data["preloaded"] if m.split(".")[0] == "coursekit"], data["preloaded"]
    if not compiles:
        assert not [m for m in data["preloaded"] if m.split(".")[0] == "triton"], data["preloaded"]
    if imports_triton and not torch_first:
        assert data["preloaded"] == [], data["preloaded"]
    assert data["small"] is True
    assert not os.path.realpath(data["cwd"]).startswith(str(ROOT)), data["cwd"]
    assert "'repetitions': 1" in proc["stdout"], proc["stdout"]


def test_only_a_file_that_imports_torch_before_triton_is_forked_after_import_torch():
    """The first import of torch or triton that running the file executes, functions aside."""
    assert imports_torch_before_triton("import os\nimport torch.nn as nn\nimport triton\n")
    assert imports_torch_before_triton("import torch\n\n\ndef f():\n    import triton\n")
    assert not imports_torch_before_triton("import triton\nimport torch\n")
    assert not imports_torch_before_triton("from triton import language\nimport torch\n")
    assert not imports_torch_before_triton("try:\n    import triton\nexcept ImportError:\n    pass\nimport torch\n")
    assert not imports_torch_before_triton("def f():\n    import torch\n\n\nimport triton\n")
    assert not imports_torch_before_triton("import os\n")


KERNEL_BEFORE_SWITCH = """import os

import torch
import triton
import triton.language as tl

os.environ.setdefault("TRITON_INTERPRET", "1")  # too late: tl.sum was made a compiled-only function at import


@triton.jit
def total(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


def measure(small=False):
    x, out = torch.ones(8), torch.zeros(1)
    total[(1,)](x, out, BLOCK=8)
    return {"repetitions": 1, "sum": float(out[0])}


if __name__ == "__main__":
    print(measure())
"""


def test_a_download_that_imports_triton_before_its_switch_fails_here():
    """The download tests see the failure a reader would: a CPU, no TRITON_INTERPRET from outside.
    (triton.language's own functions, tl.sum among them, are jit'd as triton is imported, so a kernel
    that calls one fails in the interpreter unless the switch came first.)"""
    proc = run_download(KERNEL_BEFORE_SWITCH, "late_switch.py", timeout=300)
    assert proc["returncode"] != 0, "ran although triton was imported before the interpreter was switched on"
    assert "outside of the scope of a kernel" in proc["stderr"], proc["stderr"][-3000:]
    assert proc["data"] is None
