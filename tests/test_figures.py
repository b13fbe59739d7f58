"""Figures that read well on any screen (issue 16), without a browser.

- every figure function of every snippets/*/figures.py, drawn from the stored reference results
  as a page carries it (``ResultsPreprocessor.figure_json``): a title on every axis that shows
  data, automargin on every axis (so that no title or tick label is clipped), and "µs", never
  "us", in anything the figure writes;
- ``{{ figure ... }}``: a caption is required, figures are numbered per page ("Figure N.") with
  the caption as the plot's text alternative, and a caption that types a measured number fails;
- the prose points at figures by number, and the number is right.

The browser checks (tests/test_browser.py, ``figure_problems``) look at the drawn figures at
phone and desktop sizes, light and dark."""

import ast
import json
import re

import markdown
import pytest
from conftest import ROOT

from coursekit.mdext import PlaceholderError

SNIPPETS = ROOT / "snippets"
US = re.compile(r"(?<![\w.%])us(?![\w])")  # "12 us", "(us)"; not step_us, bus, use
SHOWN = ("text", "name", "hovertemplate", "hovertext", "ticktext", "texttemplate")  # keys whose strings are drawn


def figure_functions() -> list[str]:
    """module/function of every public function in a figures.py that builds a plotly figure
    (calls ``go.Figure`` or ``make_subplots``); the others compute values for the prose."""
    names = []
    for path in sorted(SNIPPETS.glob("*/figures.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            calls = {
                getattr(c.func, "attr", None) or getattr(c.func, "id", None)
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
            }
            if calls & {"Figure", "make_subplots"}:
                names.append(f"{path.parent.name}/{node.name}")
    return names


FIGURES = figure_functions()


def preprocessor(snippets=SNIPPETS, docs=ROOT / "docs"):
    md = markdown.Markdown(
        extensions=["coursekit.mdext"],
        extension_configs={
            "coursekit.mdext": {
                "hardware": "nvidia-h200",
                "results_dir": str(ROOT / "build_results"),
                "snippets_dir": str(snippets),
                "docs_dir": str(docs),
            }
        },
    )
    return md, md.preprocessors["course_results"]


@pytest.fixture(scope="module")
def reference():
    return preprocessor()[1]


def axis_problems(spec: dict) -> list[str]:
    layout = spec.get("layout", {})
    axes = {k: v for k, v in layout.items() if re.fullmatch(r"[xy]axis\d*", k)}

    def title(ax: dict) -> str:
        t = ax.get("title") or {}
        return (t if isinstance(t, str) else t.get("text")) or ""

    shown = set()
    for trace in spec.get("data", []):
        if trace.get("visible", True) is not False:
            for letter in "xy":
                ref = trace.get(f"{letter}axis", letter)
                shown.add(f"{letter}axis{ref[1:]}")
    problems = []
    for key in sorted(shown):
        ax = axes.get(key, {})
        # a panel of a row (or column) of panels may share the title of the panel that has it
        shared = any(
            other != key and other[0] == key[0] and title(o) and o.get("domain", [0, 1]) == ax.get("domain", [0, 1])
            for other, o in axes.items()
        )
        if not title(ax) and not shared:
            problems.append(f"{key} shows data but has no title")
    problems += [f"{key} has no automargin" for key, ax in sorted(axes.items()) if ax.get("automargin") is not True]
    return problems


def drawn_strings(node, key=""):
    """Every string a figure writes on screen: titles, names, hover and tick texts, annotations."""
    if isinstance(node, str):
        if key in SHOWN or key == "title" or key.endswith(".text"):
            yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            if k not in ("bdata", "dtype", "shape", "customdata"):
                yield from drawn_strings(v, f"{key}.{k}" if k == "text" else k)
    elif isinstance(node, list):
        for v in node:
            yield from drawn_strings(v, key)


def test_every_figure_function_is_found():
    assert len(FIGURES) >= 50 and "m01/train_step" in FIGURES and "methodology/drift_figure" in FIGURES


@pytest.mark.parametrize("name", FIGURES)
def test_figure_axes_are_titled_fit_and_write_microseconds(name, reference):
    fig, _, _ = reference.call_figures(name, f"{{{{ figure {name} }}}}")
    spec = json.loads(reference.figure_json(fig))
    problems = axis_problems(spec)
    problems += [f"writes 'us' for µs: {s[:80]!r}" for s in drawn_strings(spec) if US.search(s)]
    assert not problems, f"snippets/{name.split('/')[0]}/figures.py:{name.split('/')[1]}():\n  " + "\n  ".join(problems)


def test_the_checks_catch_an_untitled_axis_and_us():
    spec = {
        "data": [{"x": [1], "y": [1]}, {"x": [1], "y": [1], "xaxis": "x2", "yaxis": "y2", "name": "3 us"}],
        "layout": {
            "xaxis": {"title": {"text": "a"}, "automargin": True, "domain": [0, 0.4]},
            "yaxis": {"title": {"text": "b"}, "automargin": True},
            "xaxis2": {"domain": [0.6, 1], "automargin": True},
            "yaxis2": {"anchor": "x2", "automargin": True},
        },
    }
    assert axis_problems(spec) == ["xaxis2 shows data but has no title"]  # yaxis2 shares yaxis's row
    assert [s for s in drawn_strings(spec) if US.search(s)] == ["3 us"]
    assert not US.search("step_us.both") and not US.search("µs per call")


# ---------------------------------------------------------------- numbers, captions, text alternatives

FIGURES_PY = """
import plotly.graph_objects as go


def line(results):
    c = results("methodology/ceilings")
    return go.Figure(go.Scatter(x=[1, 2], y=[c["copy"]["GBps"]["median"]] * 2))
"""


@pytest.fixture
def tiny_site(tmp_path):
    (tmp_path / "snippets" / "mx").mkdir(parents=True)
    (tmp_path / "snippets" / "mx" / "figures.py").write_text(FIGURES_PY)
    (tmp_path / "docs").mkdir()
    return tmp_path


def test_figures_are_numbered_per_page_with_their_caption_as_text_alternative(tiny_site):
    md, _ = preprocessor(tiny_site / "snippets", tiny_site / "docs")
    text = "{{ figure mx/line | The copy rate, drawn flat }}\n\nProse.\n\n{{ figure mx/line | Again, with `code` }}\n"
    html = md.convert(text)
    assert html.count('role="img"') == 2
    assert 'aria-label="Figure 1. The copy rate, drawn flat"' in html
    assert 'aria-label="Figure 2. Again, with code"' in html
    assert '<span class="figure-number">Figure 2.</span> Again, with <code>code</code>' in html
    assert html.index("figure-caption") < html.index('class="provenance-line"'), "provenance comes after the caption"
    # the next page (the same Markdown instance, as outside MkDocs) starts again at 1
    assert 'aria-label="Figure 1. Again' in md.reset().convert("{{ figure mx/line | Again }}\n")


@pytest.mark.parametrize(
    "placeholder, why",
    [
        ("{{ figure mx/line }}", r"a figure needs a caption that says what it shows"),
        ("{{ figure mx/line |   }}", r"a figure needs a caption"),
        ("{{ figure mx/line | Copy at 7 ms per call }}", r"looks measured \('7 ms'\)"),
    ],
)
def test_a_figure_without_a_proper_caption_fails_naming_page_and_line(tiny_site, placeholder, why):
    page = tiny_site / "docs" / "page.md"
    page.write_text(f"# Page\n\nSome prose.\n\n{placeholder}\n")
    md, _ = preprocessor(tiny_site / "snippets", tiny_site / "docs")
    with pytest.raises(PlaceholderError, match=why) as err:
        md.convert(page.read_text())
    assert f"{page}:5" in str(err.value)


# ---------------------------------------------------------------- the prose points at figures by number

PLACEHOLDER = re.compile(r"\{\{\s*figure\s+([a-z0-9_]+)/([a-z0-9_]+)\s*(?:\|([^{}]*))?\}\}")
REFERENCE = re.compile(r'<a href="#(fig-[a-z0-9_]+-[a-z0-9_]+)">Figure (\d+)</a>')


def test_pages_caption_their_figures_and_refer_to_them_by_the_right_number():
    problems, pages = [], 0
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text()
        found = PLACEHOLDER.findall(text)
        ids = [f"fig-{module}-{func}" for module, func, _ in found]
        pages += bool(ids)
        where = page.relative_to(ROOT)
        problems += [f"{where}: {{{{ figure {m}/{f} }}}} has no caption" for m, f, c in found if not c.strip()]
        for target, number in REFERENCE.findall(text):
            if target not in ids:
                problems.append(f"{where}: 'Figure {number}' points at #{target}, which is not on the page")
            elif ids.index(target) + 1 != int(number):
                problems.append(f"{where}: #{target} is Figure {ids.index(target) + 1}, not Figure {number}")
        vague = re.finditer(r"the figure (?:below|above)", text)
        problems += [f"{where}: {m.group(0)!r}: say which figure (Figure N)" for m in vague]
    assert pages >= 14
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the methodology page's host sharing


def test_host_sharing_counts_results_pinned_to_part_of_the_host():
    import importlib.util

    from coursekit import figdata

    spec = importlib.util.spec_from_file_location("methodology_figures", SNIPPETS / "methodology" / "figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (mod._cores("0-15"), mod._cores("0-3,8-11"), mod._cores("5")) == (16, 8, 1)

    def doc(workers, affinity, processes):
        prov = {"workers": workers, "cpu_affinity": affinity, "cpu_count": 32, "processes": processes}
        return {"data": {}, "provenance": prov}

    docs = {
        mod.REFERENCE: {"a/alone": doc(1, "0-31", 3), "a/pair": doc(2, "0-15", 1), "a/half": doc(1, "16-31", 3)},
        mod.RERUN: {"a/alone": doc(1, "0-31", 1)},
    }
    out = mod.host_sharing(figdata.Results(figdata.Embedded(docs), mod.REFERENCE))
    assert out["reference"] == {
        "results": 3,
        "alone": 1,
        "shared": 2,
        "host_bound": 2,
        "host_bound_shared": 1,
        "host_bound_shared_keys": "a/half",
    }
    assert out["rerun"]["shared"] == 0 and out["rerun"]["host_bound_shared_keys"] == "none"


# ---------------------------------------------------------------- one plotting module

SET_NAME = re.compile(r"""["'](?:nvidia-[a-z0-9-]+|cpu(?:-[a-z0-9-]+)?)["']""")
TYPED_LEGEND = re.compile(r"""\blegend\s*=\s*(?:dict\(|\{)""")


def test_figures_take_sets_legends_margins_whiskers_and_colours_from_coursekit_plotting():
    """No figures.py names a stored set, types the course's legend, defines WHISKERS or types one of
    the shared colours: coursekit/plotting.py says each once."""
    from coursekit import plotting
    from coursekit import results as store

    assert plotting.REFERENCE == store.REFERENCE_HARDWARE and set(plotting.RUNS.values()) <= set(store.hardware_sets())
    shared = {v.lower() for k, v in vars(plotting).items() if k.isupper() and isinstance(v, str) and v.startswith("#")}
    problems = []
    for path in sorted(SNIPPETS.glob("*/figures.py")):
        source = path.read_text()
        where = path.relative_to(ROOT)
        for i, line in enumerate(source.splitlines(), 1):
            code = line.split("#", 1)[0] if not re.search(r"""["'][^"']*#""", line) else line
            if SET_NAME.search(code):
                problems.append(f"{where}:{i}: a set's name typed (coursekit.plotting: REFERENCE, RERUN, RUNS)")
            if TYPED_LEGEND.search(code):
                problems.append(f"{where}:{i}: a legend typed (coursekit.plotting.legend)")
            if re.match(r"\s*WHISKERS\s*=", line):
                problems.append(f"{where}:{i}: WHISKERS defined again (coursekit.plotting.WHISKERS)")
            problems += [
                f"{where}:{i}: the colour {c} typed (coursekit.plotting names it)"
                for c in re.findall(r"""["'](#[0-9a-fA-F]{6})["']""", line)
                if c.lower() in shared
            ]
    assert not problems, "\n".join(problems)


def test_plotting_legend_and_margin():
    from coursekit.plotting import WHISKERS, legend, margin

    assert legend(-0.3) == {"orientation": "h", "yanchor": "top", "y": -0.3}
    assert legend(whiskers=True, x=0)["title"] == {"text": WHISKERS, "side": "top"} and legend(x=0)["x"] == 0
    assert margin(l=10, b=110) == {"l": 10, "r": 20, "t": 20, "b": 110}


# ---------------------------------------------------------------- another set at other sizes


def test_another_sets_number_keeps_its_significant_digits(reference):
    """A CPU's few GB/s under the page's ``,.0f`` (written for an H200's thousands) is not "0": the
    swapped-in text keeps two significant digits; the page's own number keeps the page's format."""
    md, _ = preprocessor()
    html = md.convert("moves {{ m07/vector_add:triton[block_size=1024,num_warps=4].GBps | ,.0f }} GB/s")
    values = json.loads(re.search(r"data-hw='([^']*)'", html)[1])
    assert set(values) >= {"cpu-small", "nvidia-h200-rerun"}
    assert re.search(r"[1-9]", values["cpu-small"]), values
    assert re.fullmatch(r"\d,\d{3}", values["nvidia-h200-rerun"]) and re.search(r">\d,\d{3}<", html)
    marker = json.loads(re.search(r"data-hw-sets='([^']*)'", md.convert("{{ m07/vector_add:copy.GBps | ,.0f }}"))[1])
    assert marker["other_sizes"] == ["cpu-small"]


def test_a_figure_legend_keeps_a_small_sets_digits():
    from coursekit import figdata
    from coursekit.plotting import number

    assert (number(4366.2), number(27.44), number(0.01812)) == ("4,366", "27.4", "0.0181")
    fig, _ = figdata.draw("m07/matmul_steps", "cpu-small")
    names = [t.name for t in fig.data if t.name and "reference" in t.name]
    assert names and not [n for n in names if re.search(r"(?<![\d.])0 TFLOP/s", n)], names


def test_a_cpu_sets_zero_for_what_it_cannot_measure_is_not_shown_as_its_number():
    """The GPU's idle share of a training step is 0 on a CPU (there is no GPU): the CPU set shows
    the reference's value as not measured there, not "0.0%"."""
    md, _ = preprocessor()
    html = md.convert("{{ m13/train_step:points[mode=eager].profile.idle_share | .1% }}")
    (values,) = [json.loads(v) for v in re.findall(r"data-hw='([^']*)'", html)]
    assert "cpu-small" not in values and re.search(r"[1-9]", values["nvidia-h200-rerun"])


def test_every_figures_function_is_used():
    """A public function of a figures.py is drawn or read by a page (``{{ figure m01/x }}``,
    ``{{ m01/x:field }}``) or called by another function of its file: none is left behind when a
    page stops using it."""
    pages = "\n".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    unused = []
    for path in sorted(SNIPPETS.glob("*/figures.py")):
        module, source = path.parent.name, path.read_text()
        called = {getattr(c.func, "id", None) for c in ast.walk(ast.parse(source)) if isinstance(c, ast.Call)}
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                on_a_page = re.search(rf"\b{re.escape(module)}/{re.escape(node.name)}\b", pages)
                if not on_a_page and node.name not in called:
                    unused.append(f"{path.relative_to(ROOT)}: {node.name}()")
    assert not unused, f"figures.py functions no page uses (remove them): {unused}"
