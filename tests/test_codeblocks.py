"""Every Python code block a reader sees on the site runs, from a real file.

Blocks are read from the raw Markdown with pytest-codeblocks' parser (so its markers work:
`<!--pytest.mark.skipif(...)-->`, `<!--pytest-codeblocks:cont-->`,
`<!--pytest-codeblocks:expected-output-->`), titled blocks (```python title="x.py") included.
A block that includes a file (`--8<-- "snippets/m02/x.py:section"`) is expanded with the same
pymdownx.snippets configuration the site uses (read from mkdocs.yml); the expansion must be
non-empty, and the included file must run as a script. Other blocks are written to a file and
run with `python file.py`. On a machine without a GPU, blocks marked
`<!--pytest.mark.skipif(not cuda_available, reason="...")-->` skip with that reason.
"""

import io
import re

import markdown
import pytest
import yaml
from conftest import ROOT, run_python, run_script_once
from pytest_codeblocks import extract_from_buffer

INCLUDE = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def snippets_config() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # mkdocs' !!python tags
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    for ext in config["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            return ext["pymdownx.snippets"]
    raise AssertionError("mkdocs.yml does not configure pymdownx.snippets")


def expand(text: str) -> str:
    md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": snippets_config()})
    return "\n".join(md.preprocessors["snippet"].run(text.split("\n")))


def blocks_of(text: str, name: str):
    """pytest params for the Python blocks of one page's raw Markdown, titled blocks included."""
    params = []
    for block in extract_from_buffer(io.StringIO(text)):
        syntax = (block.syntax or "").split()
        if not syntax or syntax[0] not in ("python", "py"):
            continue
        # this suite runs without a GPU: blocks marked for one skip, with the reason they give
        marks = [eval(m, {"pytest": pytest, "cuda_available": False}) for m in block.marks]
        params.append(pytest.param(block, id=f"{name}:{block.lineno}", marks=marks))
    return params


def collect():
    return [p for page in PAGES for p in blocks_of(page.read_text(), str(page.relative_to(ROOT / "docs")))]


BLOCKS = collect()


def test_collector_sees_titled_blocks_and_gpu_markers():
    text = (
        '```python title="a.py"\nprint(1)\n```\n\n```py\nprint(2)\n```\n\n```text\nnot code\n```\n\n'
        '<!--pytest.mark.skipif(not cuda_available, reason="needs a CUDA GPU")-->\n```python\nprint(3)\n```\n'
    )
    params = blocks_of(text, "t")
    assert [p.values[0].code.strip() for p in params] == ["print(1)", "print(2)", "print(3)"]
    (mark,) = params[2].marks
    assert mark.name == "skipif" and mark.args == (True,) and mark.kwargs["reason"] == "needs a CUDA GPU"


def test_pages_have_code_blocks():
    assert len(BLOCKS) >= 5, "the code-block collector found almost nothing: is the parser broken?"


@pytest.mark.parametrize("block", BLOCKS)
def test_code_block_runs(block, tmp_path):
    lines = [ln for ln in block.code.strip().splitlines() if ln.strip()]
    includes = [INCLUDE.match(ln) for ln in lines]
    if lines and all(includes):
        expanded = expand(block.code)
        assert expanded.strip() and "--8<--" not in expanded, f"include expanded to nothing: {block.code!r}"
        for m in includes:
            path = ROOT / m[1].split(":")[0]
            body = path.read_text()
            assert all(ln in body for ln in expanded.splitlines()), f"expansion is not from {path}"
            proc = run_script_once(path)
            assert proc.returncode == 0, f"{path} failed:\n{proc.stderr[-3000:]}"
            if block.expected_output is not None:
                assert proc.stdout.strip() == block.expected_output.strip(), (
                    f"{path} printed something other than the page shows:\n{proc.stdout}"
                )
        return
    assert not any(includes), "a block mixes includes with inline code; keep them apart"
    script = tmp_path / "block.py"
    script.write_text(expand(block.code))
    proc = run_python([str(script)], cwd=tmp_path)
    assert proc.returncode == 0, f"block failed:\n{block.code}\n---\n{proc.stderr[-3000:]}"
    if block.expected_output is not None:
        assert proc.stdout.strip() == block.expected_output.strip()


NOTEBOOKS = sorted((ROOT / "docs").rglob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_notebook_code_runs(notebook, tmp_path):
    """The site renders notebooks with mkdocs-jupyter (execute: false), so their code is run here."""
    import json

    cells = json.loads(notebook.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert code.strip(), f"{notebook} has no code"
    script = tmp_path / "notebook.py"
    script.write_text(code)
    proc = run_python([str(script)])  # from the repository root, as the notebook says
    assert proc.returncode == 0, proc.stderr[-3000:]
