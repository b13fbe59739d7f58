"""The notebooks under docs/notebooks/: one per module, generated from its chapter, and the results
notebook; each executed on the CPU, its outputs committed, rendered by mkdocs-jupyter
(``scripts/notebooks.py`` is the command line).

A module's notebook holds, in the chapter's order:

- a first cell that installs what the module's code imports, where it is missing (on Colab, say;
  on a machine that has the packages it installs nothing and needs no network), and a cell that
  puts Triton in its interpreter where there is no NVIDIA GPU;
- every Python block of the chapter that includes snippet sections (``--8<-- "snippets/m02/x.py:s"``,
  expanded as the site expands them); a block the chapter marks as GPU-only is kept but tagged
  ``skip-execution``;
- the stored results the chapter's figures read, carried in one cell (compressed JSON; the site
  hides that cell's source), the figure interface of coursekit/figdata.py and the chapter's
  ``figures.py`` functions (only those and what they use, the course's helpers inlined), and a cell
  per figure that draws it with exactly the arguments the page draws it with.

So a downloaded notebook runs wherever it lands: no clone, no network, no address of the site. Its
first Markdown cell links the chapter on the published site and offers "Open in Colab", both from
mkdocs.yml's ``repo_url`` (https://colab.research.google.com/github/OWNER/REPO/blob/main/docs/notebooks/mNN.ipynb).

Executed here with nbclient in one kernel per run (shared by the notebooks in turn), from the
repository root, on the CPU (``CUDA_VISIBLE_DEVICES=""``, ``TRITON_INTERPRET=1``). The figures are
displayed twice over in one output: plotly's own MIME type (Jupyter draws it) and an HTML
``<div class="course-plot" data-plotly=...>`` that the site's figures.js draws with the
self-hosted plotly.js (mkdocs-jupyter renders the HTML; nothing is fetched from a CDN).
"""

from __future__ import annotations

import base64
import json
import os
import re
import textwrap
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import markdown
import nbformat
import yaml

from coursekit import chapters, deps, figdata
from coursekit import results as store

ROOT = Path(__file__).resolve().parent.parent
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
DATA_TAG = "carried-data"  # the cell that carries the stored results (mkdocs.yml hides its source)
PIP_TAG = "install"


def stored_label(hardware: str = store.REFERENCE_HARDWARE) -> str:
    return f"figures from the stored results of {hardware}, carried in the notebook"


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


def _github(repo_url: str) -> tuple[str, str]:
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repo_url.strip())
    if not m:
        raise NotebookError(f"repo_url {repo_url!r} is not https://github.com/OWNER/REPO")
    return m[1], m[2]


def pages_url(repo_url: str) -> str:
    """The GitHub Pages address of a GitHub repository: https://github.com/OWNER/REPO ->
    https://owner.github.io/REPO/ (a repository named OWNER.github.io is served at the root)."""
    owner, repo = _github(repo_url)
    owner = owner.lower()
    return (
        f"https://{owner}.github.io/" if repo.lower() == f"{owner}.github.io" else f"https://{owner}.github.io/{repo}/"
    )


def colab_url(repo_url: str, module: str, branch: str = "main") -> str:
    """Where Colab opens the committed notebook of ``module`` straight from the repository."""
    owner, repo = _github(repo_url)
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/docs/notebooks/{module}.ipynb"


def repo_url() -> str:
    return _mkdocs_yml()["repo_url"]


def published_site() -> str:
    return pages_url(repo_url())


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
    try:
        return deps.cut(ROOT / "snippets" / module_dir / "figures.py", funcs)
    except KeyError as exc:
        raise NotebookError(str(exc).strip("'\"")) from None


# ---------------------------------------------------------------- the notebook


def pack(carried: figdata.Embedded) -> str:
    """Stored documents as the notebook carries them: compact JSON, zlib, base64."""
    text = json.dumps({"docs": carried.docs, "keys": carried.listed}, separators=(",", ":"), sort_keys=True)
    return base64.b64encode(zlib.compress(text.encode(), 9)).decode()


def unpack(blob: str) -> dict:
    return json.loads(zlib.decompress(base64.b64decode(blob)))


def data_cell(carried: figdata.Embedded) -> str:
    blob = pack(carried)
    lines = [blob[i : i + 100] for i in range(0, len(blob), 100)]
    return (
        "# The stored results this notebook's figures read (data, other processes' runs, provenance),\n"
        "# as compact JSON compressed with zlib, in base64. CARRIED.docs[hardware][key] is one result;\n"
        '# e.g. print(json.dumps(CARRIED.docs[HARDWARE]["<module>/<snippet>"]["provenance"], indent=1))\n'
        "import base64\nimport json\nimport zlib\n\n"
        "_packed = json.loads(zlib.decompress(base64.b64decode(\n" + "\n".join(f'    "{ln}"' for ln in lines) + "\n)))"
    )


def install_cell(module: str) -> str:
    required, _ = chapters.requirements(module)
    packages = sorted({*required, "plotly"})
    return (
        "# On Colab or a fresh machine: install what this module's code imports, where it is missing.\n"
        "# A machine that has them installs nothing (and needs no network).\n"
        "import importlib.util\n\n"
        f"_missing = [p for p in {packages!r} if importlib.util.find_spec(p) is None]\n"
        "if _missing:\n"
        '    %pip install --quiet {" ".join(_missing)}'
    )


CPU_SETUP = """\
import os
import shutil

if shutil.which("nvidia-smi") is None:  # no NVIDIA GPU: Triton kernels run in its interpreter, on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")"""

SHOW = '''\
import html
import re

from IPython.display import display

HARDWARE = "{hardware}"  # the set the figures are drawn from (CARRIED holds its results)
CARRIED = Embedded(_packed["docs"], _packed["keys"])


def arguments():
    """Exactly what the course site hands a figure function (coursekit/figdata.py)."""
    return (Results(CARRIED, HARDWARE),)


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


print("stored results of", HARDWARE, "carried in this notebook:", ", ".join(CARRIED.keys(HARDWARE)))'''


def _cell(kind: str, source: str, cell_id: str, tags: list[str] | None = None):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source=source)
    cell.id = cell_id
    if tags:
        cell.metadata["tags"] = tags
    return cell


def generate(module: str, hardware: str = store.REFERENCE_HARDWARE, source=None):
    """The module's notebook, unexecuted; its figures drawn from ``hardware``'s stored results
    (``source``: a figdata source, default build_results/)."""
    chapter = chapters.chapters()[module]
    page = DOCS / chapter.page
    text = page.read_text()
    repo = repo_url()
    chapter_url = pages_url(repo) + chapter.page.removesuffix(".md") + "/"
    cells = []

    def add(kind, source, tags=None):
        cells.append(_cell(kind, source, f"{module}-{len(cells):02d}", tags))

    add(
        "markdown",
        f"# {chapter.title}: the notebook\n\n"
        f"[Open in Colab]({colab_url(repo, module)}) (a GPU there: *Runtime › Change runtime type*)\n\n"
        f"The code that [the chapter]({chapter_url}) shows, block by block as the page includes it from "
        f"`snippets/{module}/`, and the chapter's figures redrawn from the stored results.\n\n"
        "- **The first cell** installs what the module's code imports, where it is missing (on Colab, say).\n"
        f"- **The code**: {CPU_LABEL} (`python scripts/notebooks.py` ran it without a GPU, so each snippet "
        "chose its small sizes). On a GPU the same cells run at the sizes the chapter measured.\n"
        f"- **The figures**: {stored_label(hardware)}, so they draw anywhere, offline too. To draw your own "
        "GPU's numbers, rebuild the results in a clone of the repository (`python scripts/build_results.py`) "
        "and regenerate the notebook from your folder (`python scripts/notebooks.py --hardware <folder>`).",
    )
    add("code", install_cell(module), [PIP_TAG])
    add("code", CPU_SETUP)
    shown = blocks(text)
    if shown:
        add("markdown", f"## The chapter's code\n\nEach block as the chapter shows it; {CPU_LABEL}.")
    for block in shown:
        where = f"{chapter.page}, the block at line {block.line}"
        try:
            code = textwrap.dedent(expand(block.source))  # a block in a box is indented on the page
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
        names = list(dict.fromkeys(f"{m}/{f}" for m, f, _ in drawn))
        try:
            carried = figdata.needed(names, hardware, source)
        except Exception as exc:
            raise NotebookError(
                f"{chapter.page}: drawing its figures on {hardware}: {type(exc).__name__}: {exc}"
            ) from exc
        add(
            "markdown",
            f"## The chapter's figures\n\nThe chapter's figures, drawn again here: {stored_label(hardware)} "
            "(the next cell; the site shows only its output), handed to each figure function as the course "
            "site hands them.",
        )
        add("code", data_cell(carried), [DATA_TAG])
        interface = deps.cut(Path(figdata.__file__), ["Results", "Embedded"])
        add("code", interface + "\n\n\n" + SHOW.format(hardware=hardware))
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
            add("code", f"show({func}(*arguments()), {label!r})", ["figure"])
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def sources(nb) -> list[tuple[str, str, list[str]]]:
    """What generation decides (compared by --check): each cell's kind, source and tags; the
    carried data compared as data (its compressed bytes may differ between zlib builds)."""
    out = []
    for c in nb.cells:
        tags = list(c.metadata.get("tags", []))
        text = c.source
        if DATA_TAG in tags:
            blob = "".join(re.findall(r'^\s+"([A-Za-z0-9+/=]+)"$', text, re.M))
            try:
                text = json.dumps(unpack(blob), sort_keys=True)
            except Exception:
                pass  # not data: compared as written
        out.append((c.cell_type, text, tags))
    return out


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
                    f"{path.relative_to(ROOT)} differs from its chapter, snippets, figures.py or stored results "
                    f"from cell {i + 1} on ({first[0][:70] if first else 'empty'}...)"
                )
    return stale


def regenerate(modules: list[str], results_notebook: bool, hardware: str = store.REFERENCE_HARDWARE, say=print):
    """Generate and execute the notebooks of ``modules`` (and the results notebook), writing each."""
    kernel = Kernel(ROOT)
    try:
        todo = [(m, notebook_path(m), generate(m, hardware)) for m in modules]
        if results_notebook:
            todo.append(("results", RESULTS_NOTEBOOK, nbformat.read(RESULTS_NOTEBOOK, as_version=4)))
        for name, path, nb in todo:
            start = time.perf_counter()
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            kernel.run(nb)
            write(nb, path)
            size = path.stat().st_size
            say(f"{name:<8} {path.relative_to(ROOT)}  {time.perf_counter() - start:5.1f} s  {size / 1e3:,.0f} kB")
    finally:
        kernel.close()
