"""Getting and running the code: the notebooks, the chapter boxes, the "Run it yourself" page, the
glossary, the repository link and the Pages workflow.

- Each module's notebook and the results notebook, downloaded from the built site, run on the CPU
  (nbclient, one kernel for all of them) outside the repository: the module notebooks carry the
  stored results their figures read, and every figure cell draws a figure; two of them run with
  `jupyter nbconvert --execute` in an empty folder with no network and no project variables. The
  committed notebooks' cells are what coursekit/notebooks.py generates from the chapters,
  snippets, figures.py files and stored results now (sources only, not outputs), and their
  outputs are there.
- Every ``{{ figure ... }}`` of every page draws through the notebook's path (the data carried,
  the interface and the figure code cut out and run alone) exactly as the page draws it.
- The chapter box and the run-it-yourself numbers are the stored provenance summed; bad data
  stops the build naming the page or the file and line.
- The glossary: one file, on hover on every page, never inside code or a placeholder's value.
- The workflow publishes with the README's install command and the Pages address as SITE_URL;
  a build with SITE_URL set puts it in the canonical links and the sitemap.
"""

import json
import re
import shutil
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import markdown
import nbformat
import pytest
import yaml
from conftest import ROOT, child_env

from coursekit import chapters, deps, figdata, notebooks, plugin
from coursekit import results as store
from coursekit.mdext import PlaceholderError, ResultsPreprocessor

MODULES = list(chapters.chapters())
NOTEBOOK_PAGES = [(m, f"notebooks/{m}/{m}.ipynb") for m in MODULES] + [
    ("results", "notebooks/results-in-python/results-in-python.ipynb")
]
PLOTLY_MIME = "application/vnd.plotly.v1+json"


# ---------------------------------------------------------------- the notebooks


def test_committed_notebooks_are_up_to_date():
    """The cells scripts/notebooks.py would write now (sources and tags; outputs are not compared)."""
    stale = notebooks.check(MODULES)
    assert not stale, "\n".join(stale) + "\nregenerate and run them: python scripts/notebooks.py"


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebooks_were_run(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    unrun = [
        i
        for i, c in enumerate(code, 1)
        if c.execution_count is None and "skip-execution" not in c.metadata.get("tags", [])
    ]
    assert code and not unrun, f"{path.name}: code cells {unrun} have no outputs: python scripts/notebooks.py"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], f"{path.name} stored an error"


def test_a_notebook_has_the_chapters_blocks_figures_and_labels():
    nb = notebooks.generate("m08")
    text = (ROOT / "docs" / "part-l" / "08-caching-allocator.md").read_text()
    code = [c for c in nb.cells if c.cell_type == "code"]
    # every block that includes snippet sections, expanded exactly as the site shows it, less the
    # indentation of a block inside a box (a cell starts at column 0)
    includes = notebooks.blocks(text)
    sources = {c.source for c in code}
    assert includes and all(textwrap.dedent(notebooks.expand(b.source)) in sources for b in includes)
    assert any(b.source.startswith("    ") for b in includes)  # m08 has a block in a box
    assert not [c for c in code if c.source.startswith("    ")]
    gpu = [c for c in code if "skip-execution" in c.metadata.get("tags", [])]
    assert len(gpu) == sum(b.gpu_only for b in includes) > 0
    shown = [c.source for c in code if "figure" in c.metadata.get("tags", [])]
    assert len(shown) == len(notebooks.figures(text)) == text.count("{{ figure ")
    markdown_text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert notebooks.CPU_LABEL in markdown_text and notebooks.stored_label() in markdown_text
    assert "coursekit" not in "\n".join(
        ln for c in code for ln in c.source.splitlines() if ln.startswith(("import", "from"))
    )
    # nothing fetched: the stored results it draws are in the notebook
    assert not [c for c in code if "urllib" in c.source or "http" in c.source.split("#")[0]]
    (data,) = [c for c in code if notebooks.DATA_TAG in c.metadata.get("tags", [])]
    carried = notebooks.unpack("".join(re.findall(r'^\s+"([A-Za-z0-9+/=]+)"$', data.source, re.M)))
    names = [f"{m}/{f}" for m, f, _ in notebooks.figures(text)]
    assert carried["docs"] == json.loads(json.dumps(figdata.needed(names).docs))
    assert set(carried["docs"]) == {store.REFERENCE_HARDWARE}


def test_a_notebook_opens_in_colab_and_installs_only_what_is_missing():
    nb = notebooks.generate("m14")
    first = nb.cells[0].source
    repo = notebooks.repo_url()
    owner_repo = repo.removeprefix("https://github.com/").rstrip("/")
    colab = f"https://colab.research.google.com/github/{owner_repo}/blob/main/docs/notebooks/m14.ipynb"
    assert f"[Open in Colab]({colab})" in first
    assert notebooks.colab_url("https://github.com/someone/fork", "m02") == (
        "https://colab.research.google.com/github/someone/fork/blob/main/docs/notebooks/m02.ipynb"
    )
    install = nb.cells[1]
    assert nb.cells[1].cell_type == "code" and notebooks.PIP_TAG in install.metadata["tags"]
    assert "%pip install" in install.source
    for package in ("torch", "triton", "transformers", "plotly"):
        assert f"'{package}'" in install.source
    # on a machine that has them, the cell installs nothing: its pip line sits behind find_spec
    assert re.search(r"^if _missing:\n    %pip install", install.source, re.M)


def test_generation_names_a_bad_include_and_a_missing_figure_function():
    with pytest.raises(notebooks.NotebookError, match="defines no nope"):
        notebooks.figure_code("m02", ["nope"])
    with pytest.raises(Exception, match="missing"):
        notebooks.expand('--8<-- "snippets/m02/missing.py:x"')


def test_pages_url_of_a_repository():
    assert notebooks.pages_url("https://github.com/Org/course") == "https://org.github.io/course/"
    assert notebooks.pages_url("https://github.com/org/course.git") == "https://org.github.io/course/"
    assert notebooks.pages_url("https://github.com/org/org.github.io") == "https://org.github.io/"
    with pytest.raises(notebooks.NotebookError):
        notebooks.pages_url("https://example.com/x")


def page_figures() -> list[tuple[str, str]]:
    """(page, module/function) of every ``{{ figure ... }}`` on every page, once each."""
    out = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for m, f, _ in notebooks.figures(page.read_text()):
            out.setdefault(f"{m}/{f}", str(page.relative_to(ROOT)))
    return [(page, name) for name, page in out.items()]


PAGE_FIGURES = page_figures()


@pytest.fixture(scope="module")
def interface():
    """What every notebook carries of coursekit/figdata.py, run alone (no coursekit imported)."""
    return deps.cut(ROOT / "coursekit" / "figdata.py", ["Results", "Embedded"])


@pytest.mark.parametrize("page, name", PAGE_FIGURES, ids=[n for _, n in PAGE_FIGURES])
def test_every_page_figure_draws_through_the_notebook_path(page, name, interface):
    """The page's drawing (mdext's figure call) and the notebook's (the data it would carry, packed
    and unpacked, the interface and the figure code cut out and run in a namespace of their own)
    give the same figure, spec for spec."""
    module_dir, func = name.split("/")
    md = markdown.Markdown(
        extensions=["coursekit.mdext"], extension_configs={"coursekit.mdext": {"hardware": store.REFERENCE_HARDWARE}}
    )
    on_page, _, _ = md.preprocessors["course_results"].call_figures(name, f"{{{{ figure {name} }}}}")
    carried = notebooks.unpack(notebooks.pack(figdata.needed([name])))
    code = interface + "\n\n" + notebooks.figure_code(module_dir, [func])
    imports = [ln for ln in code.splitlines() if ln.startswith(("import ", "from "))]
    assert not [ln for ln in imports if "coursekit" in ln], f"{name}: the notebook's code imports the course's package"
    namespace = {"__name__": f"notebook_{module_dir}"}
    exec(compile(code, f"<{module_dir} notebook>", "exec"), namespace)
    results = namespace["Results"](namespace["Embedded"](carried["docs"], carried["keys"]), store.REFERENCE_HARDWARE)
    in_notebook = namespace[func](results)
    assert json.loads(ResultsPreprocessor.figure_json(in_notebook)) == json.loads(
        ResultsPreprocessor.figure_json(on_page)
    ), f"{name} ({page}) draws differently in the notebook"


OFFLINE = ["m04", "m12"]  # two quick notebooks (seconds each on the CPU): torch alone, and Triton in its interpreter


def offline_prefix() -> list[str]:
    """A command prefix that runs its command with no network (a network namespace of its own, its
    loopback up for the kernel's sockets), or [] where user namespaces are not allowed."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return []
    probe = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"], capture_output=True)
    return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"] if probe.returncode == 0 else []


@pytest.mark.timeout(600)
def test_downloaded_notebooks_run_with_nbconvert_offline_in_an_empty_folder(built_site, site_server, tmp_path):
    """As a reader who downloaded two notebooks runs them: `jupyter nbconvert --execute` in an empty
    folder, no network (a namespace without one; where that is not allowed, every proxy pointing at
    a closed port), and none of the project's variables (PYTHONPATH, COURSE_*, TRITON_INTERPRET)."""
    kept = ("PATH", "HOME", "LANG", "TMPDIR", "TORCHINDUCTOR_CACHE_DIR")  # the test run's temporary folders
    env = {k: v for k, v in child_env().items() if k in kept}
    prefix = offline_prefix()
    if not prefix:
        dead = "http://127.0.0.1:9"
        env.update(http_proxy=dead, https_proxy=dead, HTTP_PROXY=dead, HTTPS_PROXY=dead, no_proxy="", NO_PROXY="")
    env["CUDA_VISIBLE_DEVICES"] = ""  # a machine without a GPU (this one has none either)
    jupyter = str(Path(sys.executable).with_name("jupyter"))
    for module in OFFLINE:
        folder = tmp_path / module  # an empty folder each: nothing of the repository, nor of another notebook
        folder.mkdir()
        with urllib.request.urlopen(f"{site_server}notebooks/{module}/{module}.ipynb", timeout=30) as response:
            (folder / f"{module}.ipynb").write_bytes(response.read())
        done = subprocess.run(
            [*prefix, jupyter, "nbconvert", "--to", "notebook", "--execute", f"{module}.ipynb",
             "--output", f"{module}.run.ipynb", "--ExecutePreprocessor.timeout=300"],
            cwd=folder, env=env, capture_output=True, text=True, timeout=500,
        )  # fmt: skip
        assert done.returncode == 0, f"{module}: nbconvert failed:\n{done.stderr[-3000:]}"
        nb = nbformat.read(folder / f"{module}.run.ipynb", as_version=4)
        figures = [c for c in nb.cells if "figure" in c.metadata.get("tags", [])]
        assert figures and all(
            any(o.output_type == "display_data" and PLOTLY_MIME in o.data for o in c.outputs) for c in figures
        ), f"{module}: a figure cell drew nothing"
        installed = next(c for c in nb.cells if notebooks.PIP_TAG in c.metadata.get("tags", []))
        assert not installed.outputs, f"{module}: the install cell did something on a machine that has the packages"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One kernel for every notebook, on the CPU, outside the repository."""
    away = tmp_path_factory.mktemp("reader")
    k = notebooks.Kernel(away, env=child_env())
    yield k, away
    k.close()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name, url", NOTEBOOK_PAGES, ids=[n for n, _ in NOTEBOOK_PAGES])
def test_notebook_from_the_site_runs_on_the_cpu(name, url, built_site, site_server, kernel):
    """Downloaded as a reader gets it (the page's download link), run in a folder outside the
    repository; the results notebook runs from the repository root, as it says."""
    site, _ = built_site
    k, away = kernel
    page = (site / url).parent / "index.html"
    assert f'download href="{url.split("/")[-1]}"' in page.read_text(), f"{page} has no download link"
    with urllib.request.urlopen(site_server + url, timeout=30) as response:
        raw = response.read()
    source = ROOT / "docs" / "notebooks" / url.split("/")[-1]
    assert raw == source.read_bytes(), f"the site serves another {source.name}"
    nb = nbformat.reads(raw.decode(), as_version=4)
    k.run(nb, timeout=300, cwd=ROOT if name == "results" else away)
    figures = [c for c in nb.cells if "figure" in c.metadata.get("tags", [])]
    assert name == "results" or figures, f"{url}: no figure cell"
    for cell in figures:
        drawn = [o for o in cell.outputs if o.output_type == "display_data" and PLOTLY_MIME in o.data]
        assert drawn, f"{url}: the cell {cell.source[:60]!r} drew no figure"
        traces = drawn[0].data[PLOTLY_MIME]["data"]
        assert traces and 'class="course-plot"' in drawn[0].data["text/html"]
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    if name != "results":
        assert "carried in this notebook" in printed, "the notebook did not draw from the data it carries"


def test_notebook_pages_are_offline_light_and_linked(built_site):
    site, _ = built_site
    plotly_js = next((site / "assets" / "javascripts").glob("plotly-basic-*.min.js")).stat().st_size
    for _, url in NOTEBOOK_PAGES:
        page = (site / url).parent / "index.html"
        text = page.read_text()
        size = page.stat().st_size + (plotly_js if 'class="course-plot"' in text else 0)
        assert size < 1_800_000, f"{page.relative_to(site)}: HTML (+ plotly.js) = {size} bytes"
        assert "jp-OutputArea-output" in text, f"{page.relative_to(site)} shows no outputs"
        assert "highlight-ipynb" not in text and "<clipboard-copy" not in text and "--jp-" not in text
    search = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    assert not [d for d in search if re.match(r"notebooks/m\d\d/", d["location"])], "module notebooks are searchable"
    assert [d for d in search if d["location"].startswith("notebooks/results-in-python/")]


def test_plugin_refuses_an_unrun_notebook(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)

    class File:
        src_uri, abs_src_path = "notebooks/x.ipynb", str(path)

    class Page:
        file, meta = File(), {}

    html = (  # what nbconvert writes and the plugin removes first
        '<script type="module">\ndocument.addEventListener("DOMContentLoaded", async () => {\n'
        'const diagrams = document.querySelectorAll(".jp-Mermaid > pre.mermaid");\n</script>'
    )
    with pytest.raises(plugin.PluginError, match=r"never run.*scripts/notebooks\.py"):
        plugin.CoursePlugin().on_page_content(html, page=Page(), config=None, files=None)


# ---------------------------------------------------------------- the chapter box


def convert(text: str, **config) -> str:
    md = markdown.Markdown(
        extensions=["coursekit.mdext", "admonition"],
        extension_configs={"coursekit.mdext": {"hardware": store.REFERENCE_HARDWARE, **config}},
    )
    return md.convert(text)


def reference_seconds(keys) -> float:
    total = 0.0
    for key in keys:
        prov = json.loads(store.result_path(key, store.REFERENCE_HARDWARE).read_text())["provenance"]
        total += prov["duration_s"] * prov.get("gpu_count", 1)
    return total


def test_chapter_box_sums_the_stored_provenance_and_links_what_it_names():
    html = convert("{{ chapter-box m11 }}")
    keys = chapters.snippet_keys("m11")
    assert f">{reference_seconds(keys):,.0f} s<" in html
    assert "on 2 GPUs" in html  # m11/expert_parallel held two
    for key in keys:
        assert f'href="downloads/{key}.py"' in html
    assert 'href="part-m/10-dynamic-shapes/"' in html and 'href="part-k/07-triton/"' in html
    assert 'href="notebooks/m11/"' in html and re.search(r'class="reading-time">\d+ min<', html)


def test_run_it_yourself_total_and_table():
    every = [store.snippet_key(p) for p in store.snippet_files()]
    assert f">{reference_seconds(every):,.0f} GPU seconds<" in convert("{{ chapter-box total }}")
    table = convert("{{ chapter-box all }}")
    assert table.count("<tr>") == len(MODULES) + 2  # the header, a row per module, the total
    row_01 = re.search(r"<tr><td><a[^>]*>01 ·.*?</tr>", table)[0]
    assert "<code>jax</code>" in row_01
    assert "<code>transformers</code>" in re.search(r"<tr><td><a[^>]*>14 ·.*?</tr>", table)[0]
    assert "<code>flashinfer</code> (optional)" in table


def project(tmp_path, chapters_yml: str):
    """A docs/ with two chapters and a notebook, and includes/chapters.yml."""
    for rel, title in (("part-j/01-a.md", "01 · A"), ("part-j/02-b.md", "02 · B")):
        (tmp_path / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / rel).write_text(f"# {title}\n\n{{{{ chapter-box }}}}\n\nWords.\n")
    (tmp_path / "docs" / "notebooks").mkdir()
    for m in ("m01", "m02"):
        (tmp_path / "docs" / "notebooks" / f"{m}.ipynb").write_text("{}")
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "chapters.yml").write_text(chapters_yml)
    return tmp_path / "docs"


@pytest.mark.parametrize(
    "chapters_yml, error",
    [
        ("m01: []\n", r"chapters\.yml has no line for m02 \(part-j/02-b\.md\)"),
        ("m01: []\nm02: [m03]\n", r"chapters\.yml:2: m02 builds on 'm03', which is no module"),
        ("m01: [m02]\nm02: []\n", r"chapters\.yml:1: m01 builds on m02, which is not an earlier module"),
        ("m01: []\nm02: m01\n", r"chapters\.yml:2: m02's prerequisites must be a list"),
        ("m01: []\nm02: []\nm07: []\n", r"chapters\.yml:3: 'm07' has no chapter page"),
    ],
)
def test_bad_chapter_data_stops_the_build_naming_the_file_and_line(tmp_path, chapters_yml, error):
    docs = project(tmp_path, chapters_yml)
    with pytest.raises(PlaceholderError, match=error):
        convert("{{ chapter-box m01 }}", docs_dir=str(docs))


def test_a_chapter_box_off_a_chapter_page_or_without_a_notebook_is_an_error(tmp_path):
    with pytest.raises(PlaceholderError, match="a chapter box goes on a chapter page"):
        convert("{{ chapter-box }}")
    docs = project(tmp_path, "m01: []\nm02: [m01]\n")
    (docs / "notebooks" / "m02.ipynb").unlink()
    with pytest.raises(PlaceholderError, match=r"no .*notebooks/m02\.ipynb: run `python scripts/notebooks\.py`"):
        convert("{{ chapter-box m02 }}", docs_dir=str(docs))


def test_a_missing_result_is_an_error_unless_pending(tmp_path):
    results = tmp_path / "build_results"
    (results / store.REFERENCE_HARDWARE).mkdir(parents=True)
    with pytest.raises(chapters.ChapterError, match=r"m02/crossover has no stored result.*--only m02/crossover"):
        chapters.spent(["m02/crossover"], results_dir=results)
    (results / "pending.txt").write_text("m02/crossover not measured yet\n")
    with pytest.raises(chapters.ChapterError, match="no stored result of m02/crossover"):
        chapters.spent(["m02/crossover"], results_dir=results)


def test_every_chapter_opens_with_its_box(built_site):
    site, _ = built_site
    for chapter in chapters.chapters().values():
        page = site / chapter.page.removesuffix(".md") / "index.html"
        text = page.read_text()
        box = re.search(r'<div class="admonition info chapter-box">.*?</ul></div>', text, re.S)
        assert box, f"{page.relative_to(site)} has no chapter box"
        assert text.index("</h1>") < box.start() < text.index("The question"), "the box goes right under the title"
        for href in re.findall(r'href="([^"#]+)"', box[0]):
            target = (page.parent / href).resolve()
            assert target.exists() or (target / "index.html").exists(), f"{page.relative_to(site)}: {href} is missing"


# ---------------------------------------------------------------- the glossary


def test_glossary_file_and_page_agree():
    hover = plugin.glossary()
    page = (ROOT / "docs" / "glossary.md").read_text()
    listed = set(re.findall(r"^\| ([A-Za-z0-9]+) \|", page, re.M)) - {"Abbreviation", "Concept"}
    singular = {a for a in hover if not (a.endswith("s") and a[:-1] in hover)}
    assert listed == singular, f"only on the page: {listed - singular}; only in the file: {singular - listed}"
    for required in ("HBM", "SM", "PTX", "SASS", "FX", "ATen", "TTGIR", "TTIR", "KV", "MoE", "EP", "GQA", "RoPE"):
        assert required in hover


def test_glossary_concepts_link_the_section_that_explains_them():
    page = (ROOT / "docs" / "glossary.md").read_text()
    concepts = re.findall(
        r"^- \*\*(.+?)\*\*: .+ See \[[^\]]+\]\((part-[j-n]/\d\d-[\w-]+\.md)#([\w-]+)\)\.$", page, re.M
    )
    assert len(concepts) >= 30, (
        f"{len(concepts)} concepts, each a bold name, a sentence and a link to a chapter section"
    )
    rows = [line for line in page.splitlines() if line.startswith("- **")]
    assert len(rows) == len(concepts), [r for r in rows if not re.search(r"\.md#[\w-]+\)\.$", r)]
    missing = [f"{name}: {target}#{anchor}" for name, target, anchor in concepts if anchor not in _heading_ids(target)]
    assert not missing, f"glossary links to sections the chapters no longer have: {missing}"


def _heading_ids(page: str) -> set[str]:
    """The ids the toc extension gives a page's headings (the section anchors a link can name)."""
    text = re.sub(r"^(```|~~~).*?^\1", "", (ROOT / "docs" / page).read_text(), flags=re.S | re.M)
    headings = "\n\n".join(line for line in text.splitlines() if re.match(r"#{2,4} ", line))
    return set(re.findall(r'<h\d id="([^"]+)"', markdown.markdown(headings, extensions=["attr_list", "toc"])))


def test_glossary_rejects_a_malformed_line(tmp_path):
    bad = tmp_path / "abbreviations.md"
    bad.write_text("*[HBM]: High-bandwidth memory\nHBM is memory\n")
    with pytest.raises(plugin.PluginError, match=r"abbreviations\.md:2: not an abbreviation line"):
        plugin.glossary(bad)
    bad.write_text("*[HBM]: one\n*[HBM]: two\n")
    with pytest.raises(plugin.PluginError, match="HBM is defined twice"):
        plugin.glossary(bad)


def test_abbreviations_leave_code_and_placeholders_alone():
    md = markdown.Markdown(
        extensions=["coursekit.mdext", "abbr"],
        extension_configs={
            "coursekit.mdext": {"hardware": store.REFERENCE_HARDWARE},
            "abbr": {"glossary": plugin.glossary()},
        },
    )
    html = md.convert(
        "HBM holds it, `HBM` in code, {{ methodology/ceilings:copy.GBps | .0f }}\n\n```python\nHBM = 1\n```\n"
    )
    assert html.count("<abbr") == 1 and '<abbr title="High-bandwidth memory' in html
    assert "<code>HBM</code>" in html and "HBM = 1" in html and 'class="measured"' in html


def test_built_pages_explain_abbreviations_on_hover(built_site):
    site, _ = built_site
    text = (site / "part-k" / "07-triton" / "index.html").read_text()
    assert re.search(r'<abbr title="Parallel Thread Execution[^"]*">PTX</abbr>', text)
    assert not re.search(r"<(code|pre)[^>]*>[^<]*<abbr", text), "an abbreviation inside code"


# ---------------------------------------------------------------- repository link and deployment


def test_header_links_the_repository_without_fetching_its_facts(built_site):
    site, _ = built_site
    repo = notebooks._mkdocs_yml()["repo_url"]
    text = (site / "index.html").read_text()
    assert f'<a href="{repo}" title="Go to repository" class="md-source">' in text
    assert re.search(r'class="md-source__repository">\s*ml-software-compilers/course\s*<', text)
    assert 'data-md-component="source"' not in text


def test_workflow_publishes_with_the_readme_install_and_the_pages_address():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    assert workflow[True]["push"]["branches"] == ["main"]  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build = workflow["jobs"]["build"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in build]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"] and "actions/upload-pages-artifact" in uses
    readme = (ROOT / "README.md").read_text()
    serve = re.search(
        r"^python3 -m venv \.venv && \.venv/bin/pip install -e \. && \.venv/bin/mkdocs serve$", readme, re.M
    )
    assert serve, "the README's serve command changed: update the workflow and this test"
    install = serve[0].removesuffix(" && .venv/bin/mkdocs serve")
    runs = [s.get("run") for s in build]
    assert install in runs, f"the workflow does not install as the README does: {install}"
    (step,) = [s for s in build if s.get("run") == ".venv/bin/mkdocs build --strict"]
    assert runs.index(install) < runs.index(step["run"])
    assert step["env"]["SITE_URL"] == "${{ steps.pages.outputs.base_url }}/"
    assert [s for s in build if s.get("id") == "pages" and s["uses"].startswith("actions/configure-pages@")]
    assert step["env"]["REPO_URL"] == "${{ github.server_url }}/${{ github.repository }}"
    assert next(s for s in build if "upload-pages-artifact" in s.get("uses", ""))["with"]["path"] == "site"
    (deploy,) = workflow["jobs"]["deploy"]["steps"]
    assert deploy["uses"].startswith("actions/deploy-pages@") and workflow["jobs"]["deploy"]["needs"] == "build"


def test_site_url_from_the_environment_reaches_canonical_links_and_the_sitemap(built_site, site_server):
    """built_site is built with SITE_URL set to the test server's address (conftest.py); without it
    mkdocs.yml's default keeps `mkdocs serve` on localhost."""
    site, _ = built_site
    assert notebooks._mkdocs_yml()["site_url"] == "http://127.0.0.1:8000/"
    canonical = re.search(r'<link rel="canonical" href="([^"]+)"', (site / "glossary" / "index.html").read_text())
    assert canonical and canonical[1] == site_server + "glossary/"
    sitemap = (site / "sitemap.xml").read_text()
    locs = re.findall(r"<loc>([^<]+)</loc>", sitemap)
    assert locs and all(loc.startswith(site_server) for loc in locs)


def test_repo_url_is_configurable_for_forks(monkeypatch):
    from mkdocs.config import load_config

    monkeypatch.setenv("REPO_URL", "https://github.com/someone/fork")
    config = load_config(str(ROOT / "mkdocs.yml"))
    plugin.CoursePlugin().on_config(config)
    assert config.repo_url == "https://github.com/someone/fork" and config.repo_name == "someone/fork"
