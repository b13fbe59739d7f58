"""The page machine (coursekit/page/) refuses bad input clearly: a malformed result of any set, a claim
that claims nothing, a page outside docs/, braces typed apart; claims are decided on the set asked
for; one grammar serves every reader of a page; what a build caches is keyed by content."""

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_mdext import add_set, convert, data, doc, fails, summary

from coursekit import cache, prose, teaching
from coursekit import results as store
from coursekit.page import claims, grammar
from coursekit.page.context import MissingValue, Page, PageContext

CLAIMS = [sys.executable, str(ROOT / "scripts" / "claims.py")]


@pytest.fixture
def site(tmp_path):
    """A results folder (one result, mx/a, on the reference set), a docs folder and a snippets folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "snippets" / "mx").mkdir(parents=True)
    result = data(fast=summary(10.0, 9.0, 11.0), slow=summary(20.0, 19.0, 21.0))
    store.write_atomic(store.result_path("mx/a", "nvidia-h200", tmp_path / "build_results"), doc("mx/a", result))
    return tmp_path


# ---------------------------------------------------------------- N1: a malformed result of a second set


def test_a_malformed_result_of_another_set_stops_the_build_naming_the_file(site):
    """It used to be left out of the page silently (a gap), so only a build of that set failed."""
    add_set(site, "nvidia-h200-rerun", key="mx/other")  # the set exists (its set.json) and holds another result
    path = store.result_path("mx/a", "nvidia-h200-rerun", site / "build_results")
    bad = doc("mx/a", data(fast=summary(10.0, 12.0, 11.0)), hardware="nvidia-h200-rerun")  # p10 above the median
    path.write_text(json.dumps(bad))
    fails(site, "{{ mx/a:fast | .1f }}", re.escape(str(path.resolve())))


def test_a_set_that_lacks_a_value_is_still_a_gap(site):
    add_set(site, "nvidia-h200-rerun", key="mx/other")
    assert ">10.0<" in convert(site, "{{ mx/a:fast | .1f }}")


def test_a_lookup_that_finds_nothing_is_a_typed_error_naming_file_key_and_set(site):
    ctx = PageContext(Page(None, site / "build_results", site / "snippets", site / "docs"), "nvidia-h200")
    with pytest.raises(MissingValue) as info:
        ctx.lookup("mx/a", "nope")
    e = info.value
    assert (e.key, e.field, e.hardware) == ("mx/a", "nope", "nvidia-h200")
    assert e.file == store.result_path("mx/a", "nvidia-h200", site / "build_results")
    assert "'nope'" in str(e)  # the message keeps its quotes
    with pytest.raises(MissingValue, match="no result 'mx/zz'"):
        ctx.lookup("mx/zz", "x")


# ---------------------------------------------------------------- N4: claims on the set asked for


def page_with(site, text: str):
    page = site / "docs" / "p.md"
    page.write_text(text)
    return page


def check(site, page, hardware):
    return claims.check(page, hardware, site / "build_results", site / "snippets", site / "docs")


def test_a_claim_is_decided_on_the_set_asked_for_or_reported_missing_there(site):
    page = page_with(site, "{{ assert mx/a:fast < mx/a:slow }}\n")
    add_set(site, "cpu-small", key="mx/other")  # the CPU set lacks mx/a
    (missing,) = check(site, page, "cpu-small")
    assert missing.verdict.holds is None and "cpu-small" in missing.verdict.shown
    add_set(site, "cpu-small", fast=summary(30.0, 29.0, 31.0), slow=summary(20.0, 19.0, 21.0))
    (reversed_there,) = check(site, page, "cpu-small")
    assert reversed_there.verdict.holds is False and "fast = [29, 31]" in reversed_there.verdict.shown
    (on_reference,) = check(site, page, "nvidia-h200")
    assert on_reference.verdict.holds is True


def test_an_assert_inside_a_code_fence_is_not_a_claim(site):
    page = page_with(
        site, "```markdown\n{{ assert mx/a:slow < mx/a:fast }}\n```\n\n{{ assert mx/a:fast < mx/a:slow }}\n"
    )
    checked = check(site, page, "nvidia-h200")
    assert [c.line for c in checked] == [5] and checked[0].verdict.holds


def test_claims_script_refuses_an_unknown_set_naming_the_known_ones(tmp_path):
    proc = subprocess.run([*CLAIMS, "--hardware", "cpu-smal"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert "cpu-smal" in proc.stdout and "nvidia-h200" in proc.stdout and "cpu-small" in proc.stdout


def test_claims_script_works_from_any_directory(tmp_path):
    proc = subprocess.run(CLAIMS, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    held = int(re.search(r"(\d+) claim\(s\) hold", proc.stdout)[1])
    assert held > 100 and "0 fail" in proc.stdout


# ---------------------------------------------------------------- N8: claims and kinds that say nothing


@pytest.mark.parametrize(
    "claim, why",
    [
        ("{{ assert mx/a:fast < inf }}", "claims nothing"),
        ("{{ assert mx/a:fast < -inf }}", "claims nothing"),
        ("{{ assert mx/a:fast < 1e999 }}", "claims nothing"),
        ("{{ assert 1 < 2 }}", "at least one side must be"),
    ],
)
def test_an_empty_claim_is_refused(site, claim, why):
    fails(site, claim, why)


def test_a_claim_against_a_finite_literal_still_holds(site):
    assert convert(site, "{{ assert mx/a:fast < 12 }}") == ""


@pytest.mark.parametrize("page", ["/etc/hostname", "../outside.md", "part/../../outside.md"])
def test_reading_time_refuses_a_page_outside_docs(site, page):
    (site / "outside.md").write_text("# Outside\n\nwords\n")
    fails(site, f"{{{{ reading-time {page} }}}}", "not a page under")


def test_hardware_sets_refuses_an_argument(site):
    fails(site, "{{ hardware-sets nvidia-h200 }}", "takes no arguments")


# ---------------------------------------------------------------- braces typed apart


@pytest.mark.parametrize("text", ["{ { mx/a:fast | .1f } }", "see { {mx/a:fast} } here", "{ {"])
def test_braces_typed_apart_stop_the_build(site, text):
    fails(site, text, "braces typed apart")


def test_one_brace_and_code_are_left_alone(site):
    out = convert(site, "a set {x} and `{ {` in code\n\n```\n{ { not a placeholder } }\n```\n")
    assert "{x}" in out and "{ { not a placeholder } }" in out


# ---------------------------------------------------------------- one grammar


def test_every_reader_of_a_page_uses_the_one_grammar():
    assert prose.PLACEHOLDER is grammar.PLACEHOLDER and teaching.PLACEHOLDER is grammar.PLACEHOLDER
    assert prose.strip_fences is grammar.strip_fences and teaching.strip_fences is grammar.strip_fences
    sources = [ROOT / "coursekit" / f for f in ("mdext.py", "prose.py", "teaching.py")] + [
        ROOT / "scripts" / "claims.py"
    ]
    for path in sources:
        text = path.read_text()
        assert 're.compile(r"(?<!\\\\)\\{\\{' not in text and "`{3,}" not in text, f"{path} writes its own grammar"


def test_fences_close_only_on_a_matching_bare_fence_and_an_unclosed_one_is_prose():
    lines = ["````md", "```", "x", "```", "````", "text", "~~~", "never closed"]
    assert grammar.fenced(lines) == [True] * 5 + [False] * 3
    assert grammar.parse_value("m02/a:b.c | .1f").fmt == ".1f" and grammar.parse_value("figure m02/a") is None


# ---------------------------------------------------------------- the cache is keyed by content


def test_a_cached_figure_call_is_redone_when_a_result_it_read_changes(site, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    (site / "snippets" / "mx" / "figures.py").write_text(
        "def twice(results):\n    return {'x': 2 * results('mx/a')['fast']['median']}\n"
    )
    assert ">20.0<" in convert(site, "{{ mx/twice:x | .1f }}")
    assert list((tmp_path / "cache" / "figures").glob("*.pickle"))
    from coursekit.page import figures

    figures._COMPUTED.clear()  # a new build: only the disk cache is left
    assert ">20.0<" in convert(site, "{{ mx/twice:x | .1f }}")
    add_set(site, "nvidia-h200", fast=summary(7.0, 6.0, 8.0))  # the result it read changes
    figures._COMPUTED.clear()
    assert ">14.0<" in convert(site, "{{ mx/twice:x | .1f }}")


def test_the_cache_hashes_content_not_times(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("one")
    first = cache.file_hash(a)
    a.write_text("two")
    assert cache.file_hash(a) != first
    a.write_text("one")
    assert cache.file_hash(a) == first


# ---------------------------------------------------------------- N9: the glossary's hover texts


def test_a_placeholder_in_the_glossary_is_refused_naming_the_line(tmp_path):
    from mkdocs.exceptions import PluginError

    from coursekit.plugin import glossary

    path = tmp_path / "abbreviations.md"
    path.write_text("*[HBM]: High-bandwidth memory\n*[L2]: the {{ m02/crossover:l2_mb | .0f }} MB cache\n")
    with pytest.raises(PluginError, match=re.escape(f"{path}:2") + ".*placeholder"):
        glossary(path)
    path.write_text("*[HBM]: High-bandwidth memory\n")
    assert glossary(path) == {"HBM": "High-bandwidth memory"}


# ---------------------------------------------------------------- what the reader is told


def real_site(text: str) -> str:
    import markdown

    md = markdown.Markdown(
        extensions=["coursekit.mdext"],
        extension_configs={
            "coursekit.mdext": {
                "hardware": store.REFERENCE_HARDWARE,
                "results_dir": str(ROOT / "build_results"),
                "snippets_dir": str(ROOT / "snippets"),
                "docs_dir": str(ROOT / "docs"),
            }
        },
    )
    return md.convert(text)


def test_the_chapter_box_gpu_time_speaks_to_a_reader():
    import html

    out = real_site("{{ chapter-box m02 }}")
    titles = [html.unescape(t) for t in re.findall(r'title="([^"]*)"', out)]
    gpu = [t for t in titles if "GPU seconds" in t]
    assert gpu and all("took to measure on nvidia-h200" in t for t in gpu)
    assert not any(w in t for t in titles for w in ("duration_s", "coursekit/", "spent()", "provenance duration"))


def test_a_figures_versions_are_said_once_per_page():
    out = real_site("{{ figure m02/crossover | one }}\n\n{{ figure m02/host_overhead | two }}")
    lines = re.findall(r'<p class="provenance-line">(.*?)</p>', out)
    assert len(lines) == 2 and all("raw data" in line for line in lines)  # each figure links its own data
    clauses = [c for line in lines for c in line.split("; ")]
    said = [m.group(1) for c in clauses if (m := re.search(r" on (NVIDIA [^(]*?, \d{4}-\d\d-\d\d)", c))]
    assert said and len(said) == len(set(said)), said  # versions and date said once, however many use them
    assert any("Measured by" in c and " on " not in c for c in clauses), clauses  # later uses name none


# ---------------------------------------------------------------- the page machine stays small


def test_no_class_over_300_lines_and_no_function_over_80():
    import ast

    for path in [*sorted((ROOT / "coursekit" / "page").glob("*.py")), ROOT / "coursekit" / "mdext.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                lines = node.end_lineno - node.lineno + 1
                limit = 300 if isinstance(node, ast.ClassDef) else 80
                assert lines <= limit, f"{path.name}: {node.name} is {lines} lines (at most {limit})"


# ---------------------------------------------------------------- N10: a result nested too deep


def test_a_result_nested_too_deep_is_a_clear_error_naming_the_file(site):
    """It stopped the build with a raw RecursionError (the schema check now refuses it: coursekit/results.py)."""
    path = store.result_path("mx/a", "nvidia-h200", site / "build_results")
    bad = json.loads(path.read_text())
    node = {"x": 1.0}
    for _ in range(900):
        node = {"n": node}
    bad["data"]["deep"] = node
    path.write_text(json.dumps(bad))
    fails(site, "{{ mx/a:fast | .1f }}", re.escape(str(path.resolve())) + ".*nested")


def test_a_kept_page_is_refilled_when_what_it_reads_changes(site, tmp_path, monkeypatch):
    """pagecache: the same text over the same results gives the same page from the cache; a changed
    result, or a changed page that a reading time reads, refills it."""
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    (site / "docs" / "other.md").write_text("# Other\n\n" + "word " * 150 + "\n")
    text = "{{ mx/a:fast | .1f }} and {{ reading-time other.md }}"
    first = convert(site, text)
    assert ">10.0<" in first and ">1 min<" in first
    assert list((tmp_path / "cache" / "pages").glob("*.pickle"))
    assert convert(site, text) == first  # kept
    add_set(site, "nvidia-h200", fast=summary(7.0, 6.0, 8.0), slow=summary(20.0, 19.0, 21.0))
    assert ">7.0<" in convert(site, text)
    (site / "docs" / "other.md").write_text("# Other\n\n" + "word " * 450 + "\n")
    assert ">3 min<" in convert(site, text)


def test_the_cache_forgets_what_no_recent_build_used(tmp_path, monkeypatch):
    import os
    import time

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    cache.put("pages", "old", [1])
    cache.put("pages", "used", [2])
    month_ago = time.time() - 30 * 86400
    for name in ("old", "used"):
        os.utime(tmp_path / "pages" / f"{name}.pickle", (month_ago, month_ago))
    assert cache.get("pages", "used") == [2]  # a hit renews it
    assert cache.prune() == 1
    assert cache.get("pages", "old") is None and cache.get("pages", "used") == [2]


def test_figure_json_keeps_five_significant_digits():
    """A page's figures carry their floats at five significant digits (one decimal from 10,000 up),
    integers and non-finite values as they are."""
    import plotly.graph_objects as go

    from coursekit.page.figures import figure_json

    fig = go.Figure(go.Scatter(x=[1, 2, 3, 4], y=[1234.56789, 0.000123456789, 123456.789, float("nan")]))
    spec = json.loads(figure_json(fig))
    y = spec["data"][0]["y"]
    assert y[:3] == [1234.6, 0.00012346, 123456.8] and y[3] is None  # plotly writes NaN as null
    assert spec["data"][0]["x"] == [1, 2, 3, 4]
