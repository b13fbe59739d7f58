"""The notebooks under docs/notebooks/: one per module, generated from its chapter, and the results
notebook; each executed on the CPU, its outputs committed, rendered by mkdocs-jupyter.

    python scripts/notebooks.py               # regenerate every module's notebook and execute all
    python scripts/notebooks.py m02 m07       # only these modules (and not the results notebook)
    python scripts/notebooks.py --check       # exit 1 naming each notebook whose cells differ from
                                              # what its chapter, snippets and figures.py give now

A module's notebook holds, in the chapter's order, every Python block of the chapter that includes
snippet sections (``--8<-- "snippets/m02/x.py:section"``, expanded as the site expands them); a
block the chapter marks as GPU-only is kept but tagged ``skip-execution``. Then the code that loads
the stored results and redraws the chapter's figures with its ``figures.py`` functions (only those
and what they use, the course's helpers inlined by coursekit/deps.py), so the notebook runs alone.

Where the stored results come from, at run time: the repository's ``build_results/`` when the
notebook runs inside a clone (the working folder or one above it holds ``build_results/``); else
the site's raw data, ``<site>/downloads/data/<hardware>/<module>/<snippet>.json``, with ``<site>``
from the environment variable ``COURSE_SITE`` or the published site (the GitHub Pages address of
mkdocs.yml's default ``repo_url``). A notebook cannot know the address it was downloaded from.

Executed here with nbclient in one kernel per run (shared by the notebooks in turn), from the
repository root, on the CPU (``CUDA_VISIBLE_DEVICES=""``, ``TRITON_INTERPRET=1``). The figures are
displayed twice over in one output: plotly's own MIME type (Jupyter draws it) and an HTML
``<div class="course-plot" data-plotly=...>`` that the site's figures.js draws with the
self-hosted plotly.js (mkdocs-jupyter renders the HTML; nothing is fetched from a CDN).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import markdown  # noqa: E402
import nbformat  # noqa: E402
import yaml  # noqa: E402

from coursekit import chapters, deps  # noqa: E402
from coursekit import results as store  # noqa: E402

DOCS = ROOT / "docs"
NOTEBOOKS = DOCS / "notebooks"
RESULTS_NOTEBOOK = NOTEBOOKS / "results-in-python.ipynb"
FENCE_OPEN = re.compile(r"^(?P<fence>`{3,})\s*(?P<lang>python|py)\b(?P<info>.*)$")
INCLUDE = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')
GPU_MARK = re.compile(r"^<!--\s*pytest\.mark\.skipif\(")
FIGURE = re.compile(
    r"(?<!\\)\{\{\s*figure\s+(?P<mod>[a-z0-9_]+)/(?P<func>[a-z0-9_]+)\s*(?:\|(?P<caption>[^{}]*?))?\s*\}\}"
)
CPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
CPU_LABEL = "outputs from a CPU run at small sizes"
STORED_LABEL = f"figures from the stored H200 results ({store.REFERENCE_HARDWARE})"


class NotebookError(RuntimeError):
    pass


# ---------------------------------------------------------------- configuration


def _mkdocs_yml() -> dict:
    """mkdocs.yml with each ``!ENV [NAME, default]`` read as its default (what the repository
    says, not what this shell's environment says: the notebooks must not depend on it)."""

    class Loader(yaml.SafeLoader):
        pass

    def env_default(loader, node):
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)[-1]
        return None

    Loader.add_constructor("!ENV", env_default)
    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)


def pages_url(repo_url: str) -> str:
    """The GitHub Pages address of a GitHub repository: https://github.com/OWNER/REPO ->
    https://owner.github.io/REPO/ (a repository named OWNER.github.io is served at the root)."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repo_url.strip())
    if not m:
        raise NotebookError(f"repo_url {repo_url!r} is not https://github.com/OWNER/REPO")
    owner, repo = m[1].lower(), m[2]
    return (
        f"https://{owner}.github.io/" if repo.lower() == f"{owner}.github.io" else f"https://{owner}.github.io/{repo}/"
    )


def published_site() -> str:
    return pages_url(_mkdocs_yml()["repo_url"])


def expand(code: str) -> str:
    """Include lines expanded as the site expands them (mkdocs.yml's pymdownx.snippets settings,
    without ``auto_append``, which is for pages)."""
    config = {}
    for ext in _mkdocs_yml()["markdown_extensions"]:
        if isinstance(ext, dict) and "pymdownx.snippets" in ext:
            config = {k: v for k, v in ext["pymdownx.snippets"].items() if k != "auto_append"}
    md = markdown.Markdown(extensions=["pymdownx.snippets"], extension_configs={"pymdownx.snippets": config})
    cwd = os.getcwd()
    os.chdir(ROOT)  # base_path is relative to the working directory, as under mkdocs
    try:
        return "\n".join(md.preprocessors["snippet"].run(code.split("\n"))).strip("\n")
    finally:
        os.chdir(cwd)


# ---------------------------------------------------------------- what a chapter shows


@dataclass
class Block:
    line: int  # where the block opens on the page
    title: str
    source: str  # the block as written (include lines)
    gpu_only: bool


def blocks(page_text: str) -> list[Block]:
    """The page's Python blocks that include snippet sections, in order."""
    out, lines, i = [], page_text.splitlines(), 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i].strip())
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != m["fence"]:
            body.append(lines[i])
            i += 1
        i += 1
        if not any(INCLUDE.match(ln) for ln in body):
            continue
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        title = re.search(r'title="([^"]*)"', m["info"])
        out.append(Block(start + 1, title[1] if title else "", "\n".join(body), bool(GPU_MARK.match(before))))
    return out


def figures(page_text: str) -> list[tuple[str, str, str]]:
    """(module folder, function, caption) of every ``{{ figure ... | caption }}`` on the page, in order."""
    return [(m["mod"], m["func"], " ".join((m["caption"] or "").split())) for m in FIGURE.finditer(page_text)]


def figure_code(module_dir: str, funcs: list[str]) -> str:
    """The functions ``funcs`` of snippets/<module_dir>/figures.py and everything of that file they
    use, in the file's order, the course's helpers they import inlined (coursekit/deps.py)."""
    path = ROOT / "snippets" / module_dir / "figures.py"
    source = path.read_text()
    body = [
        s
        for s in ast.parse(source).body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # the docstring
        and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")
    ]
    defs: dict[str, list[ast.stmt]] = {}
    for s in body:
        for name in deps._bound_names(s):
            defs.setdefault(name, []).append(s)
    missing = [f for f in funcs if f not in defs]
    if missing:
        raise NotebookError(f"{path} defines no {', '.join(missing)}")
    keep: list[ast.stmt] = []
    todo = list(funcs)
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for s in defs.get(name, []):
            if s not in keep:
                keep.append(s)
                todo += [n for n in deps._used_names([s]) if n in defs]
    lines = source.splitlines()
    text = []
    for s in sorted(keep, key=lambda s: s.lineno):
        if isinstance(s, ast.Import | ast.ImportFrom):
            s = ast.copy_location(
                type(s)(**{**s.__dict__, "names": [a for a in s.names if (a.asname or a.name).split(".")[0] in seen]}),
                s,
            )
            text.append(ast.unparse(s))
            continue
        if text and text[-1].startswith(("import ", "from ")):
            text.append("")
        start = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
        if isinstance(s, ast.FunctionDef | ast.ClassDef):
            text += ["", ""]
        text += lines[start - 1 : s.end_lineno]
    with tempfile.TemporaryDirectory() as tmp:  # deps.standalone inlines the helpers of a file
        pruned = Path(tmp) / "figures.py"
        pruned.write_text("\n".join(text).strip("\n") + "\n")
        return deps.standalone(pruned).strip("\n")


# ---------------------------------------------------------------- the notebook


LOADER = '''\
import copy
import html
import json
import os
import re
import urllib.request
from pathlib import Path

from IPython.display import display

HARDWARE = "{hardware}"  # a folder of build_results/: the reference set, or your GPU's after a rebuild
SITE = os.environ.get("COURSE_SITE", "{site}")  # the course site, where no clone is at hand
# inside a clone of the repository: its build_results/ (in this folder or one above it)
LOCAL = next((p / "build_results" for p in (Path.cwd(), *Path.cwd().parents) if (p / "build_results").is_dir()), None)
_stored = {{}}


def stored(key, hardware=None):
    """A stored result: build_results/<hardware>/<key>.json (data, runs, provenance)."""
    where = (hardware or HARDWARE, key)
    if where not in _stored:
        if LOCAL is not None:
            _stored[where] = json.loads((LOCAL / where[0] / f"{{key}}.json").read_text())
        else:
            with urllib.request.urlopen(f"{{SITE.rstrip('/')}}/downloads/data/{{where[0]}}/{{key}}.json") as response:
                _stored[where] = json.load(response)
    return _stored[where]


def results(key, hardware=None, process=None):
    """What the site hands a figure function: a result's data, of process 1 or the one named."""
    doc = stored(key, hardware)
    runs = [doc["data"], *doc.get("runs", [])]
    return copy.deepcopy(runs[min((process or 1) - 1, len(runs) - 1)])


results.processes = lambda key, hardware=None: 1 + len(stored(key, hardware).get("runs", []))


def show(fig, caption):
    """Jupyter draws plotly's own output; the course site draws the HTML one with its own plotly.js."""
    fig.layout.template = None  # plain here; the site applies its light or dark palette
    fig.update_xaxes(automargin=True)  # tick labels and titles grow the margin, never clipped
    fig.update_yaxes(automargin=True)
    spec = fig.to_json()
    label, _, text = caption.partition(". ")  # "Figure 2", "what it shows"
    shown = re.sub(r"`([^`]+)`", r"<code>\\1</code>", html.escape(text, quote=False))
    page = (
        f'<figure class="course-figure" id="fig-notebook-{{label.split()[-1]}}"><div class="course-plot" role="img" '
        f'aria-label="{{html.escape(caption.replace("`", ""))}}" data-plotly="{{html.escape(spec)}}"></div>'
        f'<figcaption><p class="figure-caption"><span class="figure-number">{{label}}.</span> {{shown}}</p>'
        f'<p class="provenance-line">Redrawn by this notebook from the stored results of {{HARDWARE}}</p>'
        "</figcaption></figure>"
    )
    display({{"application/vnd.plotly.v1+json": json.loads(spec), "text/html": page}}, raw=True)


print("stored results of", HARDWARE, "from", "build_results/ of this clone" if LOCAL else SITE)'''

CPU_SETUP = """\
import os
import shutil

if shutil.which("nvidia-smi") is None:  # no NVIDIA GPU: Triton kernels run in its interpreter, on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")"""


def _cell(kind: str, source: str, cell_id: str, tags: list[str] | None = None):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source=source)
    cell.id = cell_id
    if tags:
        cell.metadata["tags"] = tags
    return cell


def generate(module: str, site: str | None = None):
    """The module's notebook, unexecuted."""
    chapter = chapters.chapters()[module]
    page = DOCS / chapter.page
    text = page.read_text()
    site = site or published_site()
    chapter_url = site + chapter.page.removesuffix(".md") + "/"
    cells = []

    def add(kind, source, tags=None):
        cells.append(_cell(kind, source, f"{module}-{len(cells):02d}", tags))

    add(
        "markdown",
        f"# {chapter.title}: the notebook\n\n"
        f"The code that [the chapter]({chapter_url}) shows, block by block as the page includes it from "
        f"`snippets/{module}/`, and the chapter's figures redrawn from the stored results.\n\n"
        f"- **The code**: {CPU_LABEL} (`python scripts/notebooks.py` ran it without a GPU, so each snippet "
        "chose its small sizes). On a GPU the same cells run at the sizes the chapter measured.\n"
        f"- **The figures**: {STORED_LABEL}. Inside a clone of the repository the notebook reads "
        "`build_results/`; anywhere else it fetches the same files from the course site's `downloads/data/` "
        "(set the environment variable `COURSE_SITE` to use another copy of the site). To draw your own GPU's "
        "numbers, rebuild the results (`python scripts/build_results.py`) and set `HARDWARE` to your folder.\n\n"
        "Needs the packages the chapter's snippets import (see *Run it yourself* on the site) and `plotly`.",
    )
    add("code", CPU_SETUP)
    shown = blocks(text)
    if shown:
        add("markdown", f"## The chapter's code\n\nEach block as the chapter shows it; {CPU_LABEL}.")
    for block in shown:
        where = f"{chapter.page}, the block at line {block.line}"
        try:
            code = expand(block.source)
        except Exception as exc:  # a typo'd include: name the page and the block
            raise NotebookError(f"{where}: {type(exc).__name__}: {exc}") from None
        heading = f"`{block.title}`" if block.title else "A block of the chapter"
        if block.gpu_only:
            add("markdown", f"{heading}: **GPU only**, so not run in the CPU run (the tag `skip-execution`).")
            add("code", code, ["skip-execution", "gpu-only"])
        else:
            add("markdown", heading)
            add("code", code)
    drawn = figures(text)
    if drawn:
        add("markdown", f"## The chapter's figures\n\nThe chapter's figures, drawn again here: {STORED_LABEL}.")
        add("code", LOADER.format(hardware=store.REFERENCE_HARDWARE, site=site))
        for module_dir in dict.fromkeys(m for m, _, _ in drawn):
            funcs = list(dict.fromkeys(f for m, f, _ in drawn if m == module_dir))
            add(
                "markdown",
                f"The figure code of `snippets/{module_dir}/figures.py` (the functions this chapter draws and what "
                "they use; the course's helpers inlined).",
            )
            add("code", figure_code(module_dir, funcs))
        for number, (module_dir, func, caption) in enumerate(drawn, 1):
            label = f"Figure {number}. {caption or module_dir + '/' + func}"
            add("code", f"show({func}(results), {label!r})", ["figure"])
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def sources(nb) -> list[tuple[str, str, list[str]]]:
    """What generation decides (compared by --check): each cell's kind, source and tags."""
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def notebook_path(module: str) -> Path:
    return NOTEBOOKS / f"{module}.ipynb"


# ---------------------------------------------------------------- executing


class Kernel:
    """One kernel for a run of several notebooks (a start and a torch import each would cost more
    than most notebooks' cells): each notebook starts from a fresh namespace (``%reset -f``)."""

    def __init__(self, cwd: Path, env: dict | None = None):
        from jupyter_client.manager import start_new_kernel

        self.env = {**os.environ, **CPU_ENV, **(env or {})}
        self.env.pop("PYTHONPATH", None)  # as a reader runs it: the project's package is not importable
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=self.env)

    def run(self, nb, timeout: int = 600, cwd: Path | None = None):
        """Execute ``nb`` in place; raises nbclient's CellExecutionError naming the failing cell."""
        from nbclient import NotebookClient

        first = nbformat.v4.new_code_cell(source=f"%reset -f\nimport os\nos.chdir({str(cwd or ROOT)!r})")
        client = NotebookClient(nbformat.v4.new_notebook(cells=[first]), km=self.km, timeout=timeout)
        client.kc = self.kc
        client.execute(cleanup_kc=False)
        client = NotebookClient(nb, km=self.km, timeout=timeout, allow_errors=False, record_timing=False)
        client.kc = self.kc
        client.execute(cleanup_kc=False)
        return nb

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def write(nb, path: Path) -> None:
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n")


def check(modules: list[str]) -> list[str]:
    """Notebooks whose cells differ from what generation gives now."""
    stale = []
    for module in modules:
        path = notebook_path(module)
        if not path.exists():
            stale.append(f"{path.relative_to(ROOT)} is missing")
        else:
            have, want = sources(nbformat.read(path, as_version=4)), sources(generate(module))
            if have != want:
                i = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
                first = (want[i][1] if i < len(want) else have[i][1]).strip().splitlines()[:1]
                stale.append(
                    f"{path.relative_to(ROOT)} differs from its chapter, snippets or figures.py from cell {i + 1} "
                    f"on ({first[0][:70] if first else 'empty'}...)"
                )
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="mNN (default: every module, and the results notebook)")
    parser.add_argument("--check", action="store_true", help="only compare the committed notebooks' cells")
    args = parser.parse_args(argv)
    known = list(chapters.chapters())
    unknown = [m for m in args.modules if m not in known]
    if unknown:
        parser.error(f"no module {', '.join(unknown)}; the modules are {', '.join(known)}")
    modules = args.modules or known
    if args.check:
        stale = check(modules)
        for line in stale:
            print(line)
        if stale:
            print(" ".join(["regenerate them: python scripts/notebooks.py", *args.modules]))
        return 1 if stale else 0
    kernel = Kernel(ROOT)
    try:
        todo = [(m, notebook_path(m), generate(m)) for m in modules]
        if not args.modules:
            todo.append(("results", RESULTS_NOTEBOOK, nbformat.read(RESULTS_NOTEBOOK, as_version=4)))
        for name, path, nb in todo:
            start = time.perf_counter()
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            kernel.run(nb)
            write(nb, path)
            size = path.stat().st_size
            print(f"{name:<8} {path.relative_to(ROOT)}  {time.perf_counter() - start:5.1f} s  {size / 1e3:,.0f} kB")
    finally:
        kernel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
