"""Every Python code block a reader sees on the site runs when pasted alone, from a real file.

Blocks are read from the raw Markdown with pytest-codeblocks' parser (so its markers work:
`<!--pytest.mark.skipif(...)-->`, `<!--pytest-codeblocks:cont-->`,
`<!--pytest-codeblocks:expected-output-->`), titled blocks (```python title="x.py") included.
A block that includes a file (`--8<-- "snippets/m02/x.py:section"`, several such lines allowed)
is expanded with the same pymdownx.snippets configuration the site uses (read from mkdocs.yml).

Two checks per block, both on the code exactly as the page shows it:

- it runs: written to `block.py` in an empty folder and run there in a fresh interpreter (forked
  from one that has only imported torch, triton and torch.compile's machinery, tests/forkserver.py,
  unless the block sets the environment; COURSE_TESTS_FRESH=1 starts every one from nothing), on the
  CPU, with TRITON_INTERPRET=1 and the repository NOT on the path (PYTHONPATH="", imports of
  `coursekit` or of a snippet module refused), as a reader who pastes it would run it; every
  file it includes runs too, as a script (`python snippets/m02/x.py`). A block marked
  `<!--pytest.mark.skipif(not cuda_available, reason="...")-->` skips with that reason here (its
  files still run in tests/test_snippets.py, which runs every snippet);
- it stands alone, GPU-only blocks included: parsed with `ast`/`symtable`, it may not import
  `coursekit` or a snippet module, nor use a name that it neither defines, imports nor gets
  from builtins. A block continuing the previous one (`<!--pytest-codeblocks:cont-->`, which the
  page must announce with a visible "Continues the block above") is checked with it.
"""

import ast
import builtins
import io
import re
import symtable

import markdown
import pytest
import yaml
from conftest import ROOT, run_reader_code, run_script_once
from pytest_codeblocks import extract_from_buffer

INCLUDE = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
LOOKS_LIKE_INCLUDE = re.compile(r"^\s*-\s*-\s*8\s*<")  # also `--8 < --"x"`, as a Python formatter rewrites it
PAGES = sorted((ROOT / "docs").rglob("*.md"))
# What a block may not import: the course's package and the snippets (their files' module names).
FORBIDDEN_MODULES = frozenset(
    {"coursekit", "snippets"}
    | {p.stem for p in (ROOT / "snippets").rglob("*.py")}
    | {p.name for p in (ROOT / "snippets").iterdir() if p.is_dir()}
)
# Names a fresh interpreter has besides builtins (not __file__: a pasted block has none).
MODULE_NAMES = frozenset({"__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__"})
CONTINUES = re.compile(r"continues the block above", re.I)


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


# ---------------------------------------------------------------- the static check


def forbidden_imports(code: str) -> list[str]:
    """Modules the block imports that a reader's fresh interpreter does not have: the course's."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else ["." * node.level + (node.module or "")]
        else:
            continue
        found += [n for n in names if n.startswith(".") or n.split(".")[0] in FORBIDDEN_MODULES]
    return found


def free_names(code: str) -> set[str]:
    """Names the block uses but neither defines (at module level), imports, nor gets from builtins:
    in a fresh interpreter they raise NameError, at once or when the function using them runs."""
    top = symtable.symtable(code, "block.py", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    allowed = defined | set(dir(builtins)) | MODULE_NAMES
    missing = set()

    def walk(table):
        for s in table.get_symbols():
            if s.is_referenced() and s.is_global() and s.get_name() not in allowed:
                missing.add(s.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return missing


def standalone_problems(code: str) -> list[str]:
    """Why the (expanded) block would not run pasted alone; empty if nothing is wrong."""
    try:
        compile(code, "block.py", "exec")
    except SyntaxError as exc:
        return [f"not valid Python: {exc}"]
    problems = [
        f"imports {m}, which a reader does not have (only this repository does)" for m in forbidden_imports(code)
    ]
    missing = sorted(free_names(code))
    if missing:
        problems.append(f"uses {', '.join(missing)} without defining or importing it (defined in another block?)")
    return problems


# ---------------------------------------------------------------- collecting the blocks


def blocks_of(text: str, name: str, with_marks: bool = True):
    """pytest params for the Python blocks of one page's raw Markdown, titled blocks included;
    a block continued by the next (`<!--pytest-codeblocks:cont-->`) comes with its continuation."""
    params = []
    for block in extract_from_buffer(io.StringIO(text)):
        syntax = (block.syntax or "").split()
        if not syntax or syntax[0] not in ("python", "py"):
            continue
        # this suite runs without a GPU: blocks marked for one skip, with the reason they give
        marks = [eval(m, {"pytest": pytest, "cuda_available": False}) for m in block.marks] if with_marks else []
        params.append(pytest.param(block, id=f"{name}:{block.lineno}", marks=marks))
    return params


def collect(with_marks: bool = True):
    return [
        p
        for page in PAGES
        for p in blocks_of(page.read_text(), str(page.relative_to(ROOT / "docs")), with_marks=with_marks)
    ]


BLOCKS = collect()
BLOCKS_UNMARKED = collect(with_marks=False)  # the static check covers GPU-only blocks too


def unannounced_continuations(text: str) -> list[int]:
    """Line numbers of `<!--pytest-codeblocks:cont-->` markers whose page does not say, in the text
    between the block above and the continuing block, that the block continues the one above."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        if not re.fullmatch(r"\s*<!--[-\s]*pytest-codeblocks:cont[-\s]*-->\s*", line):
            continue
        start = i
        while start > 0 and not lines[start - 1].lstrip().startswith(("```", "~~~")):
            start -= 1
        end = i
        while end < len(lines) and not lines[end].lstrip().startswith(("```", "~~~")):
            end += 1
        visible = re.sub(r"<!--.*?-->", "", "\n".join(lines[start:end]), flags=re.S)
        if not CONTINUES.search(visible):
            bad.append(i + 1)
    return bad


# ---------------------------------------------------------------- the checker can fail


def test_collector_sees_titled_blocks_and_gpu_markers():
    text = (
        '```python title="a.py"\nprint(1)\n```\n\n```py\nprint(2)\n```\n\n```text\nnot code\n```\n\n'
        '<!--pytest.mark.skipif(not cuda_available, reason="needs a CUDA GPU")-->\n```python\nprint(3)\n```\n'
    )
    params = blocks_of(text, "t")
    assert [p.values[0].code.strip() for p in params] == ["print(1)", "print(2)", "print(3)"]
    (mark,) = params[2].marks
    assert mark.name == "skipif" and mark.args == (True,) and mark.kwargs["reason"] == "needs a CUDA GPU"
    assert not blocks_of(text, "t", with_marks=False)[2].marks


def test_static_check_fails_what_it_should():
    assert standalone_problems("import torch\nx = torch.ones(2)\nprint(x)\n") == []
    # a name defined in another block, at module level or only when a function runs
    assert free_names("print(model(x))\n") == {"model", "x"}
    assert free_names("def f():\n    return LR * 2\n") == {"LR"}
    assert free_names("class A:\n    y = undefined + 1\n") == {"undefined"}
    assert free_names("f = lambda: missing\n") == {"missing"}
    # the course's package and sibling snippets are not on a reader's machine
    assert forbidden_imports("import coursekit") == ["coursekit"]
    assert forbidden_imports("from coursekit.bench import host_us") == ["coursekit.bench"]
    assert forbidden_imports("from modes import Block") == ["modes"]
    assert forbidden_imports("import train_step as t") == ["train_step"]
    assert forbidden_imports("from .modes import Block") == [".modes"]
    assert standalone_problems("from coursekit.bench import host_us\nprint(host_us)\n")
    assert standalone_problems("--8<-- oops\n")
    # and no false alarms: closures, comprehensions, classes, except/with/for targets, builtins
    ok = (
        "import contextlib\n"
        "def outer(a):\n"
        "    def inner():\n"
        "        return a + sum(i for i in range(3))\n"
        "    return inner\n"
        "class B:\n"
        "    k = 1\n"
        "    def m(self):\n"
        "        return self.k + len(B.__name__)\n"
        "try:\n    pass\nexcept ValueError as err:\n    print(err)\n"
        "with contextlib.nullcontext() as c:\n    print(c, __name__)\n"
        "for n in range(2):\n    print(n)\n"
    )
    assert standalone_problems(ok) == []


def test_continued_blocks_are_checked_together_and_announced():
    text = (
        "```python\nimport torch\nx = torch.ones(2)\n```\n\n"
        "*Continues the block above.*\n<!--pytest-codeblocks:cont-->\n```python\nprint(x)\n```\n"
    )
    (block,) = [p.values[0] for p in blocks_of(text, "t")]
    assert standalone_problems(block.code) == []
    assert unannounced_continuations(text) == []
    silent = text.replace("*Continues the block above.*\n", "")
    assert unannounced_continuations(silent) == [6]
    assert standalone_problems("print(x)\n"), "the second block alone uses x"


def test_pages_have_code_blocks():
    assert len(BLOCKS) >= 5, "the code-block collector found almost nothing: is the parser broken?"


# ---------------------------------------------------------------- the pages' blocks


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_continued_blocks_say_so(page):
    bad = unannounced_continuations(page.read_text())
    assert not bad, (
        f"{page.relative_to(ROOT)} lines {bad}: a block marked <!--pytest-codeblocks:cont--> needs a visible "
        '"Continues the block above." just above it, or a reader pastes it alone and it fails'
    )


@pytest.mark.parametrize("block", BLOCKS_UNMARKED)
def test_code_block_stands_alone(block):
    for ln in block.code.splitlines():
        assert not LOOKS_LIKE_INCLUDE.match(ln) or INCLUDE.match(ln), (
            f'include line {ln!r} is not `--8<-- "path:section"`: did a formatter rewrite it? '
            "(pyproject.toml keeps ruff off *.md: check its extend-exclude)"
        )
    code = expand(block.code)
    assert code.strip() and "--8<--" not in code, f"include expanded to nothing: {block.code!r}"
    problems = standalone_problems(code)
    assert not problems, (
        "a reader who pastes this block alone gets an error:\n- " + "\n- ".join(problems) + "\n---\n" + code
    )


# Refuse the course's modules inside the block's process too: the editable install would find them.
GUARD = f"""
import importlib.abc, runpy, sys

class _NotOnAReadersMachine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(FORBIDDEN_MODULES)!r}:
            raise ImportError(f"a code block imported {{name}}, which only this repository has")

sys.meta_path.insert(0, _NotOnAReadersMachine())
runpy.run_path("block.py", run_name="__main__")
"""


@pytest.mark.parametrize("block", BLOCKS)
def test_code_block_runs(block, tmp_path):
    includes = [m[1] for m in map(INCLUDE.match, block.code.splitlines()) if m]
    for include in includes:
        path = ROOT / include.split(":")[0]
        assert set(expand(f'--8<-- "{include}"').splitlines()) <= set(path.read_text().splitlines()), (
            f"expansion of {include} is not from {path}"
        )
    for path in dict.fromkeys(ROOT / include.split(":")[0] for include in includes):
        proc = run_script_once(path)  # each file it includes runs as a reader runs it (python x.py)
        assert proc.returncode == 0, f"{path} failed:\n{proc.stderr[-3000:]}"
    code = expand(block.code)
    # the block alone, pasted into a fresh interpreter in an empty folder
    (tmp_path / "block.py").write_text(code)
    proc = run_reader_code(["-c", GUARD], code, tmp_path)
    assert proc.returncode == 0, f"block failed when run alone:\n{code}\n---\n{proc.stderr[-3000:]}"
    if block.expected_output is not None:
        assert proc.stdout.strip() == block.expected_output.strip(), (
            f"the block printed something other than the page shows:\n{proc.stdout}"
        )


# The notebooks (docs/notebooks/) are executed by tests/test_notebooks.py, downloaded from the built site.
