"""The Markdown extension and the results store refuse bad input clearly, naming file, key, page
and line; claims hold on spreads; list items are chosen by their fields; the build stays fast."""

import copy
import html
import json
import math
import re
import subprocess
import sys

import markdown
import pytest
from conftest import ROOT

from coursekit import results as store
from coursekit.mdext import PlaceholderError

PROV = {
    "gpu": "Test GPU",
    "driver": "1",
    "cuda": "13.0",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "python": "3.12.0",
    "cpu": "Test CPU",
    "date": "2026-11-30T00:00:00+00:00",
    "commit": "0" * 40,
    "repetitions": 5,
    "duration_s": 1.0,
    "processes": 1,
}


def summary(median, p10=None, p90=None, rounds=None):
    p10 = median if p10 is None else p10
    p90 = median if p90 is None else p90
    s = {"median": median, "p10": p10, "p90": p90, "min": p10, "max": p90, "n": 5, "unit": "us"}
    if rounds is not None:
        s["rounds"] = rounds
    return s


def doc(key, data, hardware="nvidia-h200", runs=None):
    prov = dict(PROV, processes=1 + len(runs or []))
    d = {
        "schema_version": store.SCHEMA_VERSION,
        "key": key,
        "snippet": f"snippets/{key}.py",
        "snippet_hash": "a" * 64,
        "hardware": hardware,
        "provenance": prov,
        "data": data,
    }
    if runs:
        d["runs"] = runs
    return d


def data(**fields):
    return {"repetitions": 5, "t": summary(1.0), **fields}


@pytest.fixture
def site(tmp_path):
    """A results folder, a docs folder and a snippets folder of our own."""
    results, docs, snippets = tmp_path / "build_results", tmp_path / "docs", tmp_path / "snippets"
    docs.mkdir()
    (snippets / "mx").mkdir(parents=True)
    store.write_atomic(
        store.result_path("mx/a", "nvidia-h200", results),
        doc(
            "mx/a",
            data(
                fast=summary(10.0, 9.0, 11.0),
                slow=summary(20.0, 19.0, 21.0),
                close=summary(10.5, 9.5, 12.0),
                label="<b>bold</b>",
                flag=True,
                points=[{"tokens": 1, "us": summary(5.0)}, {"tokens": 4096, "us": summary(50.0)}],
            ),
        ),
    )
    return tmp_path


def convert(site, text, hardware="nvidia-h200"):
    md = markdown.Markdown(
        extensions=["coursekit.mdext"],
        extension_configs={
            "coursekit.mdext": {
                "hardware": hardware,
                "results_dir": str(site / "build_results"),
                "snippets_dir": str(site / "snippets"),
                "docs_dir": str(site / "docs"),
            }
        },
    )
    return md.convert(text)


def fails(site, text, match, **kw):
    with pytest.raises(PlaceholderError, match=match):
        convert(site, text, **kw)


# ---------------------------------------------------------------- values and formats


def test_keyed_selector_picks_the_item_by_its_fields(site):
    assert ">50.0<" in convert(site, "{{ mx/a:points[tokens=4096].us | .1f }}")
    assert ">5.0<" in convert(site, "{{ mx/a:points[tokens=1].us | .1f }}")


def test_positional_index_into_a_list_is_refused(site):
    fails(site, "{{ mx/a:points.1.us | .1f }}", "by position")
    fails(site, "{{ mx/a:points[tokens=7].us }}", "matches 0 items")


def test_string_with_numeric_format_fails_and_plain_string_renders_escaped(site):
    """Defect 4: a numeric format on text, or on a bool, is an error naming the key."""
    fails(site, "{{ mx/a:label | .1f }}", r"mx/a:label.*needs a number")
    fails(site, "{{ mx/a:flag | .1f }}", r"mx/a:flag.*not a number")
    html = convert(site, "{{ mx/a:label }}")
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html


def test_errors_name_the_page_and_line(site):
    page = site / "docs" / "p.md"
    page.write_text("intro\n\nsee {{ mx/a:nope | .1f }} here\n")
    fails(site, page.read_text(), re.escape(f"{page}:3"))


def test_unknown_kind_lists_the_registry(site):
    fails(site, "{{ figures mx/a }}", "the other kinds are figure, provenance, output, cited, assert")


@pytest.mark.parametrize(
    "text",
    ["{{ mx/a:t | .1f }", "{ mx/a:t }}", "{{ mx/a:t | {.1f} }}", "{{{ mx/a:t }}}", "a }} b", "{{ mx/a:t"],
)
def test_malformed_placeholders_fail_the_build(site, text):
    """Defect 6: any {{ or }} left outside code fails, instead of reaching the page as text."""
    fails(site, text, "brace|placeholder|stray")


def test_braces_in_fenced_code_and_escapes_are_left_alone(site):
    html = convert(site, "an escape: \\{{ literal }}\n\n```\n{{ x }}\n```\n")
    assert "{{ literal }}" in html and "{{ x }}" in html


@pytest.mark.parametrize("text", ["{{ cited 5 µs | }}", "{{ cited | a source }}", "{{ cited 5 µs }}"])
def test_cited_needs_both_halves(site, text):
    """Defect 8."""
    fails(site, text, "both halves")


def test_unknown_hardware_is_an_error_listing_the_folders(site):
    """Defect 10: a misspelled hardware folder must not fall back silently."""
    fails(site, "{{ mx/a:t }}", r"nvidia-h100-typo.*holds only: nvidia-h200", hardware="nvidia-h100-typo")


def test_range_prints_the_medians_over_processes(site):
    runs = [data(fast=summary(12.0, 11.0, 13.0)), data(fast=summary(8.0, 7.0, 9.0))]
    store.write_atomic(
        store.result_path("mx/r", "nvidia-h200", site / "build_results"),
        doc("mx/r", data(fast=summary(10.0, 9.0, 11.0)), runs=runs),
    )
    html = convert(site, "{{ mx/r:fast | .1f range }}")
    assert ">8.0–12.0<" in html and "process medians 10.0, 12.0, 8.0" in html
    fails(site, "{{ mx/a:fast | .1f range }}", "several processes")


def test_processes_that_disagree_are_shown_as_a_range_unasked(site):
    """Issue 7: where another process's median lies outside process 1's band, one median would
    overstate what is known; where they agree, the median is shown."""
    agree = [data(fast=summary(10.5, 10.0, 11.0)), data(fast=summary(9.5, 9.0, 10.0))]
    disagree = [data(fast=summary(12.0, 11.0, 13.0)), data(fast=summary(8.0, 7.0, 9.0))]
    for key, runs in (("mx/agree", agree), ("mx/disagree", disagree)):
        store.write_atomic(
            store.result_path(key, "nvidia-h200", site / "build_results"),
            doc(key, data(fast=summary(10.0, 9.0, 11.0)), runs=runs),
        )
    assert ">10.0<" in convert(site, "{{ mx/agree:fast | .1f }}")
    html = convert(site, "{{ mx/disagree:fast | .1f }}")
    assert ">8.0–12.0<" in html and "processes disagree" in html


def test_a_range_whose_ends_print_alike_prints_one_number(site):
    """Review of Part J: "81–81 µs" says nothing a single "81" does not."""
    runs = [data(fast=summary(80.6, 80.0, 81.0)), data(fast=summary(80.9, 80.0, 81.0))]
    store.write_atomic(
        store.result_path("mx/same", "nvidia-h200", site / "build_results"),
        doc("mx/same", data(fast=summary(81.2, 81.0, 81.4)), runs=runs),
    )
    html = convert(site, "{{ mx/same:fast | .0f range }}")
    assert ">81</span>" in html and "–81</span>" not in html  # the shown text, not the tooltip
    assert ">80.6–81.2</span>" in convert(site, "{{ mx/same:fast | .1f range }}")


# ---------------------------------------------------------------- claims on spreads


def test_claims_need_separated_spreads_not_medians(site):
    assert convert(site, "{{ assert mx/a:fast < mx/a:slow }}").strip() in ("", "<p></p>")
    fails(site, "{{ assert mx/a:fast < mx/a:close }}", "spreads overlap")  # medians 10 < 10.5, spreads overlap
    fails(site, "{{ assert mx/a:fast < 10.5 }}", "spreads overlap")  # p90 11 is not below 10.5


def test_claims_take_the_widest_spread_over_processes(site):
    runs = [data(fast=summary(10.0, 9.0, 19.5), slow=summary(20.0, 19.0, 21.0))]
    store.write_atomic(
        store.result_path("mx/p", "nvidia-h200", site / "build_results"),
        doc("mx/p", data(fast=summary(10.0, 9.0, 11.0), slow=summary(20.0, 19.0, 21.0)), runs=runs),
    )
    fails(site, "{{ assert mx/p:fast < mx/p:slow }}", "spreads overlap")


def test_paired_rounds_decide_when_both_come_from_one_interleaved_run(site):
    """Overlapping spreads, but in every round A is below B: the paired difference decides."""
    a = summary(10.0, 8.0, 12.0, rounds=[8.0, 9.0, 10.0, 11.0, 12.0])
    b = summary(10.5, 8.5, 12.5, rounds=[8.5, 9.5, 10.5, 11.5, 12.5])
    store.write_atomic(store.result_path("mx/q", "nvidia-h200", site / "build_results"), doc("mx/q", data(a=a, b=b)))
    assert convert(site, "{{ assert mx/q:a < mx/q:b }}").strip() in ("", "<p></p>")
    fails(site, "{{ assert mx/q:a > mx/q:b }}", "per-round")


def test_failing_claims_are_marked_not_fatal_on_other_hardware(site):
    store.write_atomic(
        store.result_path("mx/a", "other-gpu", site / "build_results"),
        doc("mx/a", data(fast=summary(30.0), slow=summary(20.0)), hardware="other-gpu"),
    )
    assert "claim-fails" in convert(site, "{{ assert mx/a:fast < mx/a:slow }}", hardware="other-gpu")


# ---------------------------------------------------------------- the store refuses bad results


def valid():
    return doc("mx/a", data())


@pytest.mark.parametrize(
    "breaks, named",
    [
        (lambda d: d["data"]["t"].update(median="7.3"), r"t\.median is '7\.3'"),  # defect 3
        (lambda d: d["data"]["t"].update(median=True, p10=True, p90=True), r"t\.median is True"),  # bools
        (lambda d: d["data"]["t"].pop("p10"), "without p10"),  # defect 5
        (lambda d: d.update(snippet="../../../../etc/passwd"), "snippet"),  # defect 9
        (lambda d: d.update(snippet_hash='<img src=x onerror="alert(1)">'), "SHA-256"),  # defect 9
        (lambda d: d.update(snippet_hash=12345), "snippet_hash is 12345"),  # defect 11
        (lambda d: d["provenance"].update(duration_s=math.nan), "provenance.duration_s"),  # defect 11: NaN
        (lambda d: d["provenance"].update(processes=2), "runs"),
        (lambda d: d.update(hardware="../x"), "hardware"),
    ],
)
def test_bad_results_are_refused_naming_the_field(breaks, named):
    d = copy.deepcopy(valid())
    breaks(d)
    with pytest.raises(store.ResultError, match=named):
        store.validate(d, "x.json")


def test_a_bad_result_on_disk_names_its_file_in_the_site_build(site):
    path = store.result_path("mx/b", "nvidia-h200", site / "build_results")
    d = doc("mx/b", data())
    d["data"]["t"]["median"] = "7.3"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(d))
    fails(site, "{{ mx/b:t | .1f }}", re.escape(str(path.resolve())) + r".*t\.median")
    fails(site, "{{ hardware-sets }}", re.escape(str(path.resolve())))  # defect 11: the hardware page too


def test_ceilings_without_copy_is_named(site):
    """Defect 11: the hardware table needs copy.GBps; say so instead of a KeyError."""
    store.write_atomic(
        store.result_path("methodology/ceilings", "nvidia-h200", site / "build_results"),
        doc("methodology/ceilings", data(gemm={"TFLOPs": summary(700.0)})),
    )
    fails(site, "{{ hardware-sets }}", r"ceilings\.json.*copy\.GBps")


def test_figure_function_returning_a_dict_is_named(site):
    (site / "snippets" / "mx" / "figures.py").write_text("def bad(results):\n    return {'data': []}\n")
    fails(site, "{{ figure mx/bad }}", r"figures\.py:bad\(\) returned a dict, not a plotly Figure")


def test_results_are_read_once_per_build(site, monkeypatch):
    convert(site, "{{ mx/a:t }}")
    reads = []
    real = json.loads
    monkeypatch.setattr(store.json, "loads", lambda s: reads.append(1) or real(s))
    convert(site, "{{ mx/a:t }} {{ mx/a:fast }} {{ mx/a:slow }}")
    assert reads == [], "an unchanged result was read again"


# ---------------------------------------------------------------- a course of fourteen modules builds fast

FIGURES = """
import plotly.graph_objects as go


def fig_{i}(results):
    d = results("m{m:02d}/s{i}")
    return go.Figure(go.Scatter(x=[p["tokens"] for p in d["points"]], y=[p["us"]["median"] for p in d["points"]]))
"""


def test_synthetic_site_of_fourteen_modules_builds(tmp_path):
    """14 modules x 30 placeholders x 3 figures, `mkdocs build --strict` (untimed: scripts/bench_site.py
    measures the build)."""
    results, docs, snippets = tmp_path / "build_results", tmp_path / "docs", tmp_path / "snippets"
    docs.mkdir()
    nav = []
    for m in range(1, 15):
        (snippets / f"m{m:02d}").mkdir(parents=True)
        (snippets / f"m{m:02d}" / "figures.py").write_text("".join(FIGURES.format(i=i, m=m) for i in range(3)))
        points = [{"tokens": 2**k, "us": summary(float(k + 1), float(k), float(k + 2))} for k in range(12)]
        for i in range(3):  # three processes, as host-bound snippets store them
            store.write_atomic(
                store.result_path(f"m{m:02d}/s{i}", "nvidia-h200", results),
                doc(f"m{m:02d}/s{i}", data(points=points), runs=[data(points=points), data(points=points)]),
            )
        lines = [f"# Module {m}", ""]
        for j in range(30):
            k = j % 12
            lines.append(f"At {2**k} tokens: {{{{ m{m:02d}/s{j % 3}:points[tokens={2**k}].us | .1f }}}} us.")
        lines += [f"{{{{ figure m{m:02d}/fig_{i} | a synthetic figure }}}}" for i in range(3)]
        lines.append(f"{{{{ assert m{m:02d}/s0:points[tokens=1].us < m{m:02d}/s0:points[tokens=2048].us }}}}")
        (docs / f"m{m:02d}.md").write_text("\n\n".join(lines) + "\n")
        nav.append(f"m{m:02d}.md")
    (docs / "index.md").write_text("# Home\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: synthetic\nstrict: true\ntheme:\n  name: material\n  font: false\n"
        "markdown_extensions:\n  - coursekit.mdext:\n"
        f"      results_dir: {results}\n      snippets_dir: {snippets}\n      docs_dir: {docs}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (tmp_path / "site" / "m14" / "index.html").read_text()
    assert page.count('class="measured"') == 30 and page.count('class="course-plot"') == 3


def test_the_real_site_config_names_existing_results_dir():
    assert (ROOT / "build_results" / store.REFERENCE_HARDWARE).is_dir()


def test_two_sweep_points_are_never_paired(site):
    """Each point of a sweep is timed by its own call: rounds of equal length are not one run."""
    points = [
        {"size": 1, "us": summary(10.0, 7.0, 11.0, rounds=[7.0, 8.0, 10.0, 10.5, 11.0])},
        {"size": 2, "us": summary(11.0, 7.5, 12.0, rounds=[7.5, 8.5, 11.0, 11.5, 12.0])},
    ]
    store.write_atomic(
        store.result_path("mx/s", "nvidia-h200", site / "build_results"), doc("mx/s", data(points=points))
    )
    # paired, every round would have size 1 below size 2; unpaired, the spreads overlap
    fails(site, "{{ assert mx/s:points[size=1].us < mx/s:points[size=2].us }}", "spreads overlap")


def test_braces_in_inline_code_are_checked_too(site):
    """Inline code is filled like prose, so malformed placeholders there fail as well (defect 6)."""
    fails(site, "see `{{ mx/a:t }` here", "brace|stray")


def test_an_unreadable_result_file_is_named(site):
    path = store.result_path("mx/d", "nvidia-h200", site / "build_results")
    path.mkdir(parents=True)  # a folder where the file should be
    with pytest.raises(store.ResultError, match=re.escape(str(path.resolve()))):
        store.load(path)


def test_claims_refuse_medians_and_single_samples(site):
    """A claim on `.median` would compare medians; one on a summary of one sample has no spread."""
    fails(site, "{{ assert mx/a:fast.median < mx/a:slow.median }}", "not medians")
    store.write_atomic(
        store.result_path("mx/one", "nvidia-h200", site / "build_results"),
        doc("mx/one", data(once={**summary(3.0), "n": 1})),
    )
    fails(site, "{{ assert mx/one:once > 1 }}", "fewer than 3 samples")


# ---------------------------------------------------------------- hardware sets side by side (issue 16)


def add_set(site, hardware, key="mx/a", **fields):
    """A result of another hardware set; a CPU set's says CPU and small sizes, as the build job writes."""
    d = doc(key, data(**fields), hardware=hardware)
    if store.is_cpu_set(hardware):
        d["provenance"].update(gpu=store.CPU_GPU, sizes=store.SMALL)
    store.write_atomic(store.result_path(key, hardware, site / "build_results"), d)


def attr_json(text, name):
    """Every ``name='<json>'`` attribute of the HTML, parsed."""
    return [json.loads(html.unescape(v)) for v in re.findall(rf"{name}='([^']*)'", text)]


def test_a_value_carries_its_text_on_every_set_that_measured_it(site):
    add_set(site, "cpu-small", fast=summary(1234.5, 1200.0, 1300.0))
    add_set(site, "nvidia-h200-rerun", key="mx/other")  # a set without mx/a
    out = convert(site, "{{ mx/a:fast | ,.1f }} and {{ mx/a:points[tokens=4096].us | .1f }}")
    assert ">10.0<" in out and ">50.0<" in out  # the page's own set
    # the same format on each set; a set without the value (the rerun; the CPU's small sizes) is left out
    assert attr_json(out, "data-hw") == [{"cpu-small": "1,234.5"}, {}]
    assert attr_json(out, "data-hw-sets") == [
        {
            "sets": [
                ["nvidia-h200", "Test GPU (reference)"],
                ["nvidia-h200-rerun", "Test GPU, second run"],
                ["cpu-small", "CPU, small sizes"],
            ],
            "page": "nvidia-h200",
            "reference": "nvidia-h200",
            "other_sizes": ["cpu-small"],
        }
    ]


def test_a_site_of_one_set_carries_no_set_data(site):
    out = convert(site, "{{ mx/a:fast }} {{ assert mx/a:fast < mx/a:slow }}")
    assert "data-hw" not in out and "hw-sets" not in out


def test_a_cpu_set_builds_with_the_reference_where_its_small_sizes_stop(site):
    """Selected as the page's set, a CPU set's missing sweep point is the reference's value, marked;
    a GPU set's result that lacks a field is still an error, not a gap."""
    add_set(site, "cpu-small", fast=summary(1.5), label=None)  # a value a CPU cannot measure: null
    out = convert(
        site, "{{ mx/a:fast | .1f }} {{ mx/a:points[tokens=4096].us | .1f }} {{ mx/a:label }}", hardware="cpu-small"
    )
    assert re.search(r'class="measured"[^>]*>1\.5<', out), out
    assert re.search(r'class="[^"]*\bfallback\b[^"]*"[^>]*>50\.0<', out), out
    assert re.search(r'class="[^"]*\bfallback\b[^"]*"[^>]*>&lt;b&gt;bold', out), out
    assert attr_json(out, "data-hw") == [
        {"nvidia-h200": "10.0"},
        {"nvidia-h200": "50.0"},
        {"nvidia-h200": "<b>bold</b>"},
    ]
    add_set(site, "other-gpu", fast=summary(2.0))
    fails(site, "{{ mx/a:points[tokens=4096].us }}", "no field 'points'", hardware="other-gpu")


def test_a_claims_verdict_is_computed_on_every_set(site):
    """A claim that fails on another set carries the mark, hidden until the reader selects that set;
    a set decides a claim on its own measurements only (here the CPU set lacks mx/a:close)."""
    add_set(site, "cpu-small", fast=summary(30.0, 29.0, 31.0), slow=summary(5.0, 4.0, 6.0))
    add_set(site, "nvidia-h200-rerun", fast=summary(10.0, 9.0, 11.0), slow=summary(20.0, 19.0, 21.0))
    claims = "A {{ assert mx/a:fast < mx/a:slow }} B {{ assert mx/a:close < mx/a:slow }}"
    marks = re.findall(r"<span class=\"claim-fails\"[^>]*>[^<]*</span>", convert(site, claims))
    assert len(marks) == 1 and 'data-hw-fails="cpu-small"' in marks[0] and " hidden" in marks[0], marks
    marks = re.findall(r"<span class=\"claim-fails\"[^>]*>[^<]*</span>", convert(site, claims, hardware="cpu-small"))
    assert len(marks) == 1 and 'data-hw-fails="cpu-small"' in marks[0] and " hidden" not in marks[0], marks
    assert "[on cpu-small the measurement does not bear out" in marks[0]


def test_a_misspelled_course_hardware_is_an_error(site, monkeypatch):
    add_set(site, "cpu-small", fast=summary(1.5))
    monkeypatch.setenv("COURSE_HARDWARE", "cpu-smal")
    fails(site, "{{ mx/a:fast }}", r"'cpu-smal'.*holds only: cpu-small, nvidia-h200")


OVERLAY_FIGURES = """
import plotly.graph_objects as go


def bars(results):
    d = results("mx/a")
    return go.Figure(go.Bar(x=["fast", "slow"], y=[d["fast"]["median"], d["slow"]["median"]]))


def titled(results):
    d = results("mx/a")
    title = {"text": f"fast {d['fast']['median']}"}
    return go.Figure(go.Bar(x=["fast"], y=[d["fast"]["median"]]), layout={"title": title})


def points(results):
    d = results("mx/a")
    return go.Figure(go.Scatter(x=[p["tokens"] for p in d["points"]], y=[p["us"]["median"] for p in d["points"]]))
"""


def test_a_figure_carries_the_other_sets_traces(site):
    """Each other set whose own results draw the figure: its traces, and its layout only where it
    differs; a set whose data cannot draw it (no sweep points at small sizes) is left out."""
    (site / "snippets" / "mx" / "figures.py").write_text(OVERLAY_FIGURES)
    add_set(site, "cpu-small", fast=summary(30.0, 29.0, 31.0), slow=summary(5.0, 4.0, 6.0))
    out = convert(
        site, "{{ figure mx/bars | Bars }}\n\n{{ figure mx/titled | Title }}\n\n{{ figure mx/points | Points }}"
    )
    bars, titled = attr_json(out, "data-plotly-sets")
    assert list(bars) == ["cpu-small"] and "layout" not in bars["cpu-small"]
    assert bars["cpu-small"]["data"][0]["y"] == [30.0, 5.0]
    assert titled["cpu-small"]["layout"]["title"]["text"] == "fast 30.0"
    assert out.count('data-plotly-reference="nvidia-h200"') == 2


def test_a_value_computed_from_named_sets_is_no_other_sets_own(site):
    """A figures.py value that reads the sets it names (the reference's two runs) is the same on every
    set: another set shows it as the reference's, not as its own measurement."""
    (site / "snippets" / "mx" / "figures.py").write_text(
        "def named(results):\n    return {'fast': results('mx/a', hardware='nvidia-h200')['fast']}\n\n"
        "def own(results):\n    return {'fast': results('mx/a')['fast']}\n"
    )
    add_set(site, "cpu-small", fast=summary(30.0, 29.0, 31.0))
    out = convert(site, "{{ mx/named:fast | .1f }} {{ mx/own:fast | .1f }}")
    assert attr_json(out, "data-hw") == [{}, {"cpu-small": "30.0"}]


def test_a_measured_number_is_a_control_whose_title_says_what_its_spread_is():
    """The popover's wording: what the spread is for the sample count (nearest-rank p10 and p90 of a
    few samples are their extremes), the unit as the prose writes it, and a control a tap or a key reaches."""
    from coursekit.page.markup import spread_words

    assert spread_words({"n": 3}) == "min–max"
    assert spread_words({"n": 10}) == "10th–90th percentile (the 2nd of 10 from each end)"
    assert spread_words({"n": 30}) == "10th–90th percentile"
    md = markdown.Markdown(
        extensions=["coursekit.mdext"], extension_configs={"coursekit.mdext": {"hardware": "nvidia-h200"}}
    )
    out = md.convert("{{ m02/host_overhead:host_us.no_grad | .1f }}")
    title = re.search(r'title="([^"]+)"', out)[1]
    assert " µs" in title and " us" not in title and re.search(r"median of \d+ samples", title)
    assert 'tabindex="0"' in out and 'role="button"' in out
