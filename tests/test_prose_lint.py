"""No measured number is typed into the course: numbers with units of time, rate or ratio must come
from build_results/ through a placeholder, or be marked as cited ({{ cited VALUE | SOURCE }}) or
quoted (<q>...</q>); a constant of the page's own is written <span class="constant">600 s</span>.
The rules and what they look at are in coursekit/prose.py; this file applies them to the pages'
Markdown, the notebooks' Markdown cells, the figure modules' string literals and the rendered site,
and proves on small cases that they catch what they should and nothing else."""

import json

import pytest
from conftest import ROOT

from coursekit import prose

PAGES = sorted((ROOT / "docs").rglob("*.md"))
NOTEBOOKS = sorted((ROOT / "docs").rglob("*.ipynb"))
FIGURES = sorted((ROOT / "snippets").glob("*/figures.py"))
HOW = 'use a placeholder, {{ cited VALUE | SOURCE }}, a <q> quotation, or <span class="constant"> for a constant'


def _name(p):
    return str(p.relative_to(ROOT))


def _texts(hits):
    return [h.text for h in hits]


def _as_found(typed):
    """What a hit reports: the text normalised (µ becomes μ), its whitespace single spaces."""
    return " ".join(prose.normalise(typed).split())


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_typed_measurements(page):
    found = prose.lint_markdown(page.read_text())
    assert not found, f"{_name(page)} types measured-looking numbers: {', '.join(map(str, found))}; {HOW}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_name)
def test_no_typed_measurements_in_notebooks(notebook):
    found = prose.lint_notebook(notebook.read_text())
    assert not found, f"{_name(notebook)} types measured-looking numbers: {', '.join(map(str, found))}; {HOW}"


@pytest.mark.parametrize("module", FIGURES, ids=_name)
def test_no_typed_measurements_in_figure_labels(module):
    found = prose.lint_python_strings(module.read_text())
    assert not found, (
        f"{_name(module)} types measured-looking numbers in its labels: {', '.join(map(str, found))}; "
        "format them from the data the figure is given"
    )


def test_the_lint_covers_the_pages_notebooks_and_figures():
    assert len(PAGES) > 10 and NOTEBOOKS and len(FIGURES) >= 3


def test_no_typed_measurements_in_the_rendered_site(built_site):
    """The rendered article, so that no markup hides a number: emphasis, entities, tags."""
    site, _ = built_site
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    problems = []
    for page in pages:
        text = page.read_text()
        _, articles = prose.article_text(text)
        if articles != 1:
            problems.append(f"{page.relative_to(site)}: {articles} <article class=md-content__inner> (expected 1)")
        problems += [f"{page.relative_to(site)}: {hit}" for hit in prose.lint_html(text)]
    assert not problems, "the rendered site types measured-looking numbers:\n" + "\n".join(problems) + f"\n{HOW}"


# --------------------------------------------------------------------------- what the rules catch

CAUGHT = [
    # time, in every spelling
    ("eager costs 7.3 µs per op", "7.3 µs"),  # micro sign U+00B5
    ("eager costs 7.3 \u03bcs per op", "7.3 μs"),  # Greek mu U+03BC
    ("7.3us per op", "7.3us"),
    ("7.3 usec", "7.3 usec"),
    ("7.3 µsec", "7.3 μsec"),
    ("it takes 7.3 microseconds", "7.3 microseconds"),
    ("about 1 microsecond", "1 microsecond"),
    ("a 2 ms step", "2 ms"),
    ("a 2ms step", "2ms"),
    ("2 msec", "2 msec"),
    ("2.5 milliseconds", "2.5 milliseconds"),
    ("40 ns", "40 ns"),
    ("40 nsec", "40 nsec"),
    ("40 Nanoseconds", "40 Nanoseconds"),
    ("500 ps", "500 ps"),
    ("a first call of 3.2 s.", "3.2 s"),
    ("a first call of 3.2s, then", "3.2s"),
    ("took 12 sec", "12 sec"),
    ("took 12 secs", "12 secs"),
    ("took 12 seconds", "12 seconds"),
    ("took 1 second", "1 second"),
    ("a 3 min compile", "3 min"),
    ("a 5-minute compile", "5-minute"),
    ("7+ ms", "7+ ms"),
    ("costs 7 (±0.3) ms", "0.3) ms"),
    ("7 ± 0.3 ms", "0.3 ms"),
    ("a 400-cycle latency", "400-cycle"),
    ("3 clock cycles", "3 clock cycles"),
    ("latency 7e-6 s", "7e-6 s"),
    ("4 273 GB/s", "273 GB/s"),
    ("٧ ms", "٧ ms"),  # Arabic-Indic digit
    ("７ ms", "7 ms"),  # full-width digit
    ("3 minutes of compiling", "3 minutes"),
    ("2 hours", "2 hours"),
    ("2 h of device time", "2 h"),
    ("a 7.3-µs kernel", "7.3-µs"),
    ("costs 7.3\nµs per op", "7.3 µs"),  # a line break inside the measurement
    ("1e3 µs", "1e3 µs"),
    (".5 ms", ".5 ms"),
    ("4,273.5 ms", "4,273.5 ms"),
    ("½ ms", "2 ms"),
    ("7.3 ｍｓ", "7.3 ms"),  # full-width letters
    ("10⁻³ s", "3 s"),
    ("7.3 microsec", "7.3 microsec"),
    ("7.3 millisec", "7.3 millisec"),
    ("7.3 nanosec", "7.3 nanosec"),
    ("7.3 Microsecs", "7.3 Microsecs"),
    ("12.5 mus", "12.5 mus"),  # µs typed as "mus"
    ("7.3 usecs", "7.3 usecs"),
    ("7.3 msecs", "7.3 msecs"),
    ("40 nsecs", "40 nsecs"),
    # percentages
    ("busy 11% of the time", "11%"),
    ("busy 11 % of the time", "11 %"),
    ("busy 11 percent of the time", "11 percent"),
    ("busy 11 per cent of the time", "11 per cent"),
    ("busy 11 Percent of the time", "11 Percent"),
    ("11 pct. faster", "11 pct"),
    ("3 percentage points", "3 percentage points"),
    ("3 ‰", "3 ‰"),
    ("between 5 and 10 per cent", "10 per cent"),
    # ratios
    ("a 4x speedup", "4x speedup"),
    ("4x faster", "4x faster"),
    ("4X faster", "4X faster"),
    ("runs 4× faster", "4× faster"),
    ("speedup: 3.2×.", "speedup: 3.2×"),
    ("the speedup is 3.2 ×.", "speedup is 3.2 ×"),
    ("3 times faster", "3 times faster"),
    ("3 times slower", "3 times slower"),
    ("2.5 times as long", "2.5 times as"),
    ("3 times the GPU time", "3 times the"),
    ("3 x faster", "3 x faster"),
    ("3 X slower", "3 X slower"),
    ("3 × more", "3 × more"),
    ("a 1.5x\nspeedup", "1.5x speedup"),
    ("2.5-fold", "2.5-fold"),
    ("2.5 times eager's time", "2.5 times eager's"),
    ("3 times eager's time", "3 times eager's"),
    ("runs at 2.5 × eager", "2.5 ×"),
    ("a speedup of 3.2 over eager", "speedup of 3.2"),
    ("speedups of about 2", "speedups of about 2"),
    ("the slowdown: 1.3", "slowdown: 1.3"),
    ("runs at 1.0× eager", "1.0×"),
    ("3 fold", "3 fold"),
    ("3fold", "3fold"),
    ("speedup of 3.2", "speedup of 3.2"),
    ("slowdown of 1.4", "slowdown of 1.4"),
    ("a 3.2 speed-up", "3.2 speed-up"),
    ("a 3.2 speedup", "3.2 speedup"),
    ("a 1.4-slowdown", "1.4-slowdown"),
    ("sped up by 3.2", "sped up by 3.2"),
    ("it speeds up by about 3", "speeds up by about 3"),
    ("slowed down by 1.4 over eager", "slowed down by 1.4"),
    # ratios in words, before a comparison of speed or time
    ("twice as fast", "twice as fast"),
    ("twice as slow", "twice as slow"),
    ("Twice as long", "Twice as long"),
    ("in half the time", "half the time"),
    ("half as fast", "half as fast"),
    ("thrice as fast", "thrice as fast"),
    ("three times as fast", "three times as fast"),
    ("three times faster", "three times faster"),
    ("ten times slower", "ten times slower"),
    ("two-times the speed", "two-times the speed"),
    ("double the throughput", "double the throughput"),
    ("triple the time", "triple the time"),
    ("twice\nas fast", "twice as fast"),
    # numbers in words (one to ninety-nine) with a unit of time, a per cent, a fold or a speed comparison
    ("a launch costs five microseconds", "five microseconds"),
    ("it is twelve times faster", "twelve times faster"),
    ("twenty-five percent of the step", "twenty-five percent"),
    ("about one per cent", "one per cent"),
    ("a twelve-fold gap", "twelve-fold"),
    ("Thirty-two seconds later", "Thirty-two seconds"),
    ("eleven milliseconds", "eleven milliseconds"),
    # rates
    ("reaches 4,273 GB/s", "4,273 GB/s"),
    ("reaches 4.8 TB/s", "4.8 TB/s"),
    ("reaches 900 GiB/s", "900 GiB/s"),
    ("12 MB/s", "12 MB/s"),
    ("12 KB/s", "12 KB/s"),
    ("400 Gbit/s", "400 Gbit/s"),
    ("5 GB / s", "5 GB / s"),
    ("2 GB/sec", "2 GB/sec"),
    ("989 TFLOPS", "989 TFLOPS"),
    ("989 TFLOPs", "989 TFLOPs"),
    ("989 TFLOP/s", "989 TFLOP/s"),
    ("1.2 PFLOP/s", "1.2 PFLOP/s"),
    ("500 GFLOPS", "500 GFLOPS"),
    ("2e15 FLOP/s", "2e15 FLOP/s"),
    ("10 FLOPS", "10 FLOPS"),
    ("1,000 tokens/s", "1,000 tokens/s"),
    ("1,000 tok/s", "1,000 tok/s"),
    ("12 it/s", "12 it/s"),
    ("300 samples/s", "300 samples/s"),
    ("50 requests/s", "50 requests/s"),
    ("50 req/s", "50 req/s"),
    ("1e6 ops/s", "1e6 ops/s"),
    ("200 calls/s", "200 calls/s"),
    ("3/s", "3/s"),
    ("100 tokens per second", "100 tokens per second"),
    ("100 new tokens per second", "100 new tokens per second"),
    ("3 per second", "3 per second"),
    ("8 launches per µs", "8 launches per µs"),
    ("220 words a minute", "220 words a minute"),
    ("3 tokens a second, on average", "3 tokens a second"),
    ("2 Gbps", "2 Gbps"),
    ("a 1.98 GHz core", "1.98 GHz"),
    ("60 fps", "60 fps"),
    ("100 qps", "100 qps"),
    ("1.5k tokens/s", "1.5k tokens/s"),  # a magnitude suffix before the unit
    ("2M tokens/s", "2M tokens/s"),
    ("3.5K req/s", "3.5K req/s"),
    ("2B tokens per second", "2B tokens per second"),
    ("a 1k-cycle latency", "1k-cycle"),
    # markup around or inside the number
    ("**7.3 µs**", "7.3 µs"),
    ("*7.3* µs", "7.3 µs"),
    ("_7.3_ µs", "7.3 µs"),
    ("__7.3__ µs", "7.3 µs"),
    ("~~7.3~~ µs", "7.3 µs"),
    ("7.3&nbsp;µs", "7.3 µs"),
    ("7.3&#181;s", "7.3μs"),
    ("7.3&micro;s", "7.3μs"),
    ("7.3&#x3bc;s", "7.3μs"),
    ("7.3&thinsp;ms", "7.3 ms"),
    ("7.3\u202fms", "7.3 ms"),  # narrow no-break space
    ("7.3\u00a0ms", "7.3 ms"),
    ("7.3\u200bms", "7.3ms"),  # zero-width space
    ("7.3\u00adms", "7.3ms"),  # soft hyphen
    ("busy 45&#37; of the time", "45%"),
    ("3&times; faster", "3× faster"),
    ("7<b>.3</b> µs", "7.3 µs"),
    ("7.3 <em>µs</em>", "7.3 µs"),
    ("<strong>7.3</strong>&nbsp;µs", "7.3 µs"),
    ('<span style="color:red">7.3 µs</span>', "7.3 µs"),
    ("7.3<!-- a comment -->µs", "7.3µs"),
    ("7\\.3 µs", "7.3 µs"),
    ("7.3\\\nµs", "7.3 µs"),  # a backslash line break
    ("7.3  \nµs", "7.3 µs"),  # a two-space line break
    ("7.3 <kbd>µs</kbd>", "7.3 µs"),
    ("![7 ms](plot.png)", "7 ms"),  # alt text is read
    # a tooltip (title) or an image's alt text in hand-written HTML or Markdown: shown to the reader
    ('<abbr title="7.3 µs">x</abbr>', "7.3 µs"),
    ('<span title="4 ms">', "4 ms"),
    ("<span title='4 ms'>x</span>", "4 ms"),
    ("<span title=4ms>x</span>", "4ms"),
    ('<img alt="3x faster" src="plot.png">', "3x faster"),
    ('<abbr title="7&nbsp;µs">x</abbr>', "7 µs"),
    ('<abbr\n  title="a 4.8 TB/s copy">x</abbr>', "4.8 TB/s"),
    ('{{ m:x | .1f }} <abbr title="median: 7 µs">µs</abbr>', "7 µs"),  # a title next to a placeholder
    ('[the kernel](#k "takes 7 ms")', "7 ms"),  # a Markdown link's title
    ("![plot](plot.png 'twice as fast')", "twice as fast"),
    ('<span title="x">7</span> ms', "7 ms"),  # an attribute does not cut the prose around it
    ("[^1]: it takes 7 ms", "7 ms"),  # a footnote's text is prose
    ("## Takes 7.3 µs", "7.3 µs"),
    ("> quoted 7 ms", "7 ms"),
    ("- a list item of 7 ms", "7 ms"),
    ("<div markdown>\n7 ms\n</div>", "7 ms"),
    ("[7.3 µs](#the-kernel)", "7.3 µs"),
    ("[7.3 µs][ref]", "7.3 µs"),
    ("see https://example.com, then 7 ms", "7 ms"),
    # what looks exempt but is not
    ("\\{{ 7 ms }}", "7 ms"),  # literal braces, shown as typed
    ("`code` then 7 µs `more code`", "7 µs"),
    ("a `b\n\nthen 7 µs per op` c", "7 µs"),  # a code span does not cross a paragraph
    ("``a` b`` then 7 µs", "7 µs"),  # a run of two backticks closes only on two
    ('<span class="constant">7.3 µs, 2 tries</span>', "7.3 µs"),  # a constant holds one number
    ('<span class="measured">7.3</span> µs', "7.3 µs"),  # only a placeholder makes a measured span
    ('<span class="cited">4.8 TB/s</span>', "4.8 TB/s"),  # only {{ cited ... | SOURCE }} names a source
    ("<q>8 µs</q> and then 9 µs", "9 µs"),
    ("<q>a quotation\n\nthat never closes 9 µs", "9 µs"),
    ('!!! info "The kernel takes 7 µs"', "7 µs"),  # an admonition's title is prose
    ("| 1 | 3.2 ms |", "3.2 ms"),  # a table cell
    # numbers under a unit in a table's header or row label
    ("| How | µs per add |\n|---|---|\n| graph | 7.3 |\n| events | {{ m:x | .2f }} |", "7.3"),
    ("| Tokens | Eager (µs) |\n|---:|---:|\n| 1 | {{ a:b }} |\n| 16 | 12 |", "12"),
    ("| Tokens | `default` (s) |\n|---|---|\n| 1 | 3.2 |", "3.2"),
    ("| GPU | copy GB/s |\n|---|---|\n| H200 | 4,273 |", "4,273"),
    ("| Mode | Speedup |\n|---|---|\n| default | 1.04 |", "1.04"),
    ("| | eager | compile |\n|---|---|---|\n| first call (s) | 3.2 | {{ a:b }} |", "3.2"),
    ('!!! note "x"\n    | Mode | Time (ms) |\n    |---|---|\n    | eager | 9 |', "9"),
]


@pytest.mark.parametrize(("text", "typed"), CAUGHT, ids=[t for t, _ in CAUGHT])
def test_the_lint_catches(text, typed):
    assert _texts(prose.lint_markdown(text)) == [_as_found(typed)]


ALLOWED = [
    "torch 2.11",
    "CUDA 13.0",
    "Python 3.12",
    "triton 3.6.0 and JAX 0.10.2",
    "PyTorch 2.0 (March 2023)",
    "4,096 tokens",
    "2^28 elements",
    "2<sup>28</sup> elements",
    "60 MB of L2",
    "a 2 GiB copy",
    "48 MiB",
    "4 KB",
    "a 256 MB buffer",
    "in 2019",
    "the 2010s",
    "in the 1990s and 2000s",
    "section 5",
    "module 03",
    "Module 02",
    "an H200",
    "H100s",
    "m02/crossover",
    "p90",
    "sm_90",
    "fp16 and float4",
    "PEP 523",
    "an 8192³ product",
    "1,024 floats",
    "21 module calls",
    "3 kernels per step",
    "called 3 times in a row",
    "ran 2 kernels a second time",
    "the second call",
    "a 3x3 convolution",
    "a 4×4 tile",
    "0x7f",
    "x86",
    "bytes moved = 12 × elements",
    "a 4 × 4096 matrix",
    "eager = 1×",
    "the 10th–90th percentile",
    "90 percentile",
    "the 90th pct.",
    "several times as long",
    "many times faster",
    "twofold",
    "called twice",
    "measured twice, then once more",
    "twice the code",
    "the first half of the chapter",
    "half of the kernels",
    "a double-buffered copy",
    "double precision",
    "a double",
    "a triple-quoted string",
    "triple the batch",
    "one time faster than you think",
    "ten times the memory",
    "the speed up 3 kernels get",
    "3 speedups",
    "2K tokens",
    "a 4K display",
    "2M elements",
    "the 1.5k tokens of context",
    '<abbr title="Compute Unified Device Architecture">CUDA</abbr> 13.0',
    '<img alt="module 03, figure 2" src="x.png">',
    '<span data-title="7 ms" class="x">x</span>',
    '<span title="{{ m:x | .1f }} ms">',
    '<span class="constant" title="7 ms">600 s</span>',
    '[the kernel](#k "the graph kernel")',
    "a few hundred nanoseconds",
    "`2 ms` in code",
    "``a ` 2 ms`` in code",
    "{{ m02/x:y | .1f }} µs",
    "{{ m02/x:y | .0% }}",
    "{{ m03/modes:points.0.speedup | .1f }}×",
    "{{ cited 4.8 TB/s | NVIDIA H200 product brief }}",
    "<q>roughly 8 µs of CPU work to launch 2 µs of GPU work</q>",
    "<q>approximately\n4us of overhead</q>",
    '<span class="constant">600 s</span>',
    '<span class="constant">220 words a minute</span>',
    "<span class='constant'>80 per cent</span>",
    "<!-- 7 ms -->",
    '<!--pytest.mark.skipif(not cuda_available, reason="takes 600 s")-->',
    "[module 03](03-graph-mode.md#3-5ms)",
    "see https://example.com/v2/3s",
    "[3 ms]: https://example.com",
    "{ #fig-3x .wide }",
    "| 1 | {{ m03/x:y | .1f }}× |",
    "--8<-- snippets",
    "sizes 1,024 and 4,096 with 2x3 tiles",
    "speedup at 1,024 tokens",
    "<code>7 ms</code> in raw HTML",
    "<pre>\n7 ms\n\n9 ms\n</pre>",
    "| Module | Reading time |\n|---|---|\n| 01 | {{ reading-time part-j/01-why-eager-won.md }} |",
    "| Tokens | Eager (µs) |\n|---:|---:|\n| 1,024 | {{ a:b | .0f }} |",
    "| Tokens | GPU's share |\n|---|---|\n| 16 | 12 |",
    "| Overhead | Where |\n|---|---|\n| Host time per op | CPU, 1 launch |",
    "one of the two kernels",
    "called twelve times",
    "the five kernels each take their own time",
]


@pytest.mark.parametrize("text", ALLOWED)
def test_the_lint_allows(text):
    assert not prose.lint_markdown(text)


# --------------------------------------------------------------------------- fenced code


def test_a_four_backtick_fence_holds_three_backtick_lines():
    page = "````markdown\n```python\nx = 1  # 7 ms\n```\nstill code: 9 ms\n````\nafter the fence: 7 µs\n"
    assert [(h.text, h.where) for h in prose.lint_markdown(page)] == [(_as_found("7 µs"), "line 7")]


def test_prose_between_fences_is_linted():
    page = "```\ncode 3 ms\n```\nprose 4 ms\n```text\ncode 5 ms\n```\n"
    assert _texts(prose.lint_markdown(page)) == ["4 ms"]


def test_a_fence_closes_only_without_an_info_string_and_on_the_same_character():
    page = "```\ncode 3 ms\n```python\n~~~\nstill code 4 ms\n```\nprose 5 ms\n"
    assert _texts(prose.lint_markdown(page)) == ["5 ms"]


def test_a_longer_fence_closes_a_shorter_one():
    assert _texts(prose.lint_markdown("```\n3 ms\n`````\nprose 5 ms\n")) == ["5 ms"]


def test_tilde_fences_and_indented_fences():
    page = '~~~\n```\n3 ms\n~~~\n!!! example "x"\n    ```python\n    4 ms\n    ```\n    prose 5 ms\n'
    assert _texts(prose.lint_markdown(page)) == ["5 ms"]


def test_an_unclosed_fence_hides_nothing():
    assert _texts(prose.lint_markdown("text\n```python\n# 3 ms\n")) == ["3 ms"]


def test_backticks_in_an_info_string_make_no_fence():
    assert _texts(prose.lint_markdown("``` `x` ```\nthen 7 ms\n```\n")) == ["7 ms"]


def test_hits_name_their_line():
    found = prose.lint_markdown("one\n\n```\n2 ms\n```\n<!-- a\ncomment -->\nfour {{ x:y }} 5 ms\n")
    assert [str(h) for h in found] == ["line 8: '5 ms' (time)"]


def test_tooltip_hits_name_their_line_among_the_others():
    page = 'one 2 ms\n\n```\n<abbr title="3 ms">\n```\n<abbr\ntitle="a\n4 ms">x</abbr> and 5 ms\n'
    assert [str(h) for h in prose.lint_markdown(page)] == [
        "line 1: '2 ms' (time)",
        "line 8: '5 ms' (time)",
        "line 8: '4 ms' (time)",
    ]


# --------------------------------------------------------------------------- notebooks


def _notebook(*cells):
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "source": source, "metadata": {}, **({"outputs": []} if kind == "code" else {})}
                for kind, source in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_notebook_markdown_cells_are_linted():
    nb = _notebook(("markdown", "# Title"), ("code", "print('7 ms')"), ("markdown", ["A step takes\n", "**7.3 µs**."]))
    assert [str(h) for h in prose.lint_notebook(nb)] == ["cell 3, line 2: '7.3 μs' (time)"]


def test_notebook_raw_cells_are_linted():
    assert [str(h) for h in prose.lint_notebook(_notebook(("raw", "took 3 s")))] == ["cell 1, line 1: '3 s' (time)"]


def test_notebook_code_cells_are_not():
    nb = _notebook(("markdown", "Timings are stored as `7 ms` summaries"), ("code", "x = '11% of 7 ms'"))
    assert not prose.lint_notebook(nb)


# --------------------------------------------------------------------------- figure labels

FIGURE_CAUGHT = [
    ('fig.update_layout(title="eager takes 7.3 µs")', "7.3 µs"),
    ('f"floor 7.3 µs, then {x:.1f}"', "7.3 µs"),
    ('f"{name}: 11% busy"', "11%"),
    ('LABELS = {"eager": "eager (3x slower)"}', "3x slower"),
    ('text="reaches 4.8 TB/s"', "4.8 TB/s"),
    ('hovertemplate="<b>7</b>.3 µs<extra></extra>"', "7.3 µs"),
    ('name="7.3<br>µs"', "7.3 µs"),
    ("f\"{'7 ms' if fast else ''}\"", "7 ms"),  # a literal inside a formatted expression is typed
    ('"7 ms: %s" % label', "7 ms"),
    ('"%.1f ms, not 9 ms" % x', "9 ms"),
    ('f"{x:.1f} µs" + " (p90: 12 µs)"', "12 µs"),
    ('title = "7" + ".3 µs"', "7.3 µs"),  # a + chain is one string
    ('title = "7." + f"{3}" + " µs"', None),  # ...whose data parts are gaps
    ('label = name + " is 2.5× faster"', "2.5× faster"),
]


@pytest.mark.parametrize(("code", "typed"), FIGURE_CAUGHT, ids=[c for c, _ in FIGURE_CAUGHT])
def test_figure_labels_are_linted(code, typed):
    assert _texts(prose.lint_python_strings(code)) == ([_as_found(typed)] if typed else [])


FIGURE_ALLOWED = [
    'f"{x:.1f} µs per op"',
    'f"{x:.1%} of the ceiling"',
    'f"{x:{width}.3s}"',
    'fig.update_xaxes(tickformat=".2s")',
    'fig.update_yaxes(hoverformat=".1%")',
    'layout = {"xaxis": {"tickformat": ".3s"}}',
    'hovertemplate="%{x:.3s} elements: %{y:.3g} s<extra></extra>"',
    'hovertemplate="%{y:.2f}×"',
    '"{:.3s} elements".format(n)',
    '"%.1f ms" % x',
    '"%3s" % x',
    'def f():\n    """Takes 7 ms and 11% of the GPU: a docstring, not a label."""\n',
    '"""Module docstring: 3x faster."""',
    'text="eager = 1×"',
    'title="elements per tensor (float32; bytes moved = 12 × elements)"',
    'ticktext=["0.5", "0.7", "1", "1.5", "2"]',
    'marker_color="#1f5fbf"',
    'COLOR = {"jax_jit": "#2e9e5f"}',
    'symbol="line-ns-open"',
    'results("m03/modes")["points"]',
    "x = 7  # 7 ms: a comment is not in the syntax tree",
]


@pytest.mark.parametrize("code", FIGURE_ALLOWED)
def test_figure_code_that_is_not_a_typed_label(code):
    assert not prose.lint_python_strings(code)


# --------------------------------------------------------------------------- the rendered page

ARTICLE = '<html><body><article class="md-content__inner md-typeset">{}</article></body></html>'

HTML_CAUGHT = [
    ("<p>7<b>.3</b> µs</p>", "7.3 µs"),
    ("<p>7.3 <em>µs</em></p>", "7.3 µs"),
    ("<p>7.3&nbsp;&micro;s</p>", "7.3 μs"),
    ("<p>7.3&#181;s</p>", "7.3μs"),
    ("<p>7.3<!-- x -->ms</p>", "7.3ms"),
    ("<p>3&times; faster</p>", "3× faster"),
    ("<p>busy 45&#37;</p>", "45%"),
    ("<p><strong>7.3 µs</strong></p>", "7.3 µs"),
    ("<p>7.3<br>µs</p>", "7.3 µs"),
    ('<p><span class="measurement">7.3</span> µs</p>', "7.3 µs"),  # a class that only looks like one
    ("<ul><li>costs 7.3 ms</li></ul>", "7.3 ms"),
    ("<table><tr><th>Reading time</th></tr><tr><td>14 min</td></tr></table>", "14 min"),  # typed, not generated
    (
        "<table><thead><tr><th>Mode</th><th>Eager (µs)</th></tr></thead>"
        "<tbody><tr><td>x</td><td>12</td></tr></tbody></table>",
        "12",
    ),
    ("<table><tr><td>first call (s)</td><td><em>3.2</em></td></tr></table>", "3.2"),
    ("<p>7.3 <kbd>ms</kbd></p>", "7.3 ms"),
    ('<div class="admonition"><p class="admonition-title">takes 7 µs</p></div>', "7 µs"),
    ('<p><abbr title="7.3 µs">x</abbr></p>', "7.3 µs"),  # a tooltip
    ('<p><span title="4&nbsp;ms">x</span></p>', "4 ms"),
    ('<p><img alt="3x faster" src="plot.png"></p>', "3x faster"),
    ('<p><img alt="3x faster" src="plot.png" /></p>', "3x faster"),
    ("<p>1.5k tokens/s, that is</p>", "1.5k tokens/s"),
    ("<p>twice as fast</p>", "twice as fast"),
]


@pytest.mark.parametrize(("body", "typed"), HTML_CAUGHT, ids=[b for b, _ in HTML_CAUGHT])
def test_the_rendered_lint_catches(body, typed):
    assert _texts(prose.lint_html(ARTICLE.format(body))) == [_as_found(typed)]


HTML_ALLOWED = [
    '<p><span class="measured" title="median of 30">7.3</span> µs</p>',
    '<p><span class="measured fallback" title="...">7.3</span>&nbsp;µs</p>',
    '<p><span class="cited" title="cited, not measured here: datasheet">4.8 TB/s</span></p>',
    '<p><span class="constant">600 s</span></p>',
    "<p><q>roughly 8 µs of CPU work</q></p>",
    "<p><code>2 ms</code></p>",
    '<div class="highlight"><pre><span></span><code>sleep(7)  # 7 ms</code></pre></div>',
    '<details class="provenance"><summary>Provenance</summary><table><tr><td>duration_s</td><td>12 s</td></tr></table>'
    "</details>",
    '<figure class="course-figure"><div data-plotly="7 ms"></div><figcaption>7 ms</figcaption></figure>',
    '<script>var t = "7 ms";</script><style>.x { width: 3s; }</style>',
    "<svg><text>7 ms</text></svg>",
    '<table class="hardware-sets"><tr><td>Xeon @ 2.00GHz</td></tr></table>',
    '<div class="jp-Cell jp-CodeCell"><div>print(f"{t:7.1f} s")</div></div>',
    '<div class="clipboard-copy-txt">x = "7 ms"</div>',
    "<table><thead><tr><th>Module</th><th>Reading time</th></tr></thead><tbody><tr><td>01</td>"
    '<td><span class="reading-time">14 min</span></td></tr><tr><td>02</td>'
    '<td><strong><span class="reading-time">16 min</span></strong> of about <span class="constant">221 min</span></td>'
    "</tr></tbody></table>",
    "<table><thead><tr><th>Mode</th><th>Eager (µs)</th></tr></thead><tbody><tr><td>1,024 tokens</td>"
    '<td><span class="measured">12</span></td></tr></tbody></table>',
    '<p>costs <code>x</code>\n<span class="measured">7</span> µs</p>',
    '<table><tr><td>1</td><td><span class="measured">3.1</span>×</td><td>16</td><td>×</td></tr></table>',
    '<h2 id="x">Three overheads<a class="headerlink" href="#x">&para;</a></h2><p>torch 2.11, 4,096 tokens, 2019</p>',
    "<p>2<sup>28</sup> elements</p>",
    '<p><span class="measured" title="median of 30 runs, 7.3 µs">7.3</span> µs</p>',  # the placeholder's own
    '<p><span class="cited" title="cited: 4.8 TB/s">4.8 TB/s</span></p>',
    '<p><span class="reading-time" title="at 220 words a minute">12 min</span></p>',
    '<p><span class="constant" title="600 s">600 s</span></p>',
    '<p><code title="7 ms">x</code></p>',
    '<p><a class="headerlink" href="#x" title="Permanent link">&para;</a><img alt="module 03" src="x.png"></p>',
]


@pytest.mark.parametrize("body", HTML_ALLOWED)
def test_the_rendered_lint_allows(body):
    assert not prose.lint_html(ARTICLE.format(body))


def test_the_rendered_lint_reads_only_the_article():
    page = (
        '<html><head><title>7 ms</title></head><body><header>12 min read</header><nav class="md-nav">3x</nav>'
        '<article class="md-content__inner md-typeset"><p>plain prose</p></article><footer>11%</footer></body></html>'
    )
    assert prose.article_text(page)[1] == 1
    assert not prose.lint_html(page)
    assert prose.article_text("<html><body><p>7 ms</p></body></html>") == ("", 0)


# --------------------------------------------------------------------------- exercises (issue 16)
#
# Every written chapter ends with a `## Exercises` section, after its "What to remember" box and as
# its last section: three to five numbered exercises, each with its answer nested in its list item
# as a collapsible block (four spaces in, its text eight):
#
#     ## Exercises
#
#     1. Predict ... then check it against the figure.
#
#         ??? success "Answer"
#             ... {{ m03/modes:points[tokens=1].modes.eager.time_us | .0f }} µs ...
#
# At least one answer holds a placeholder, so that the reader checks a prediction against the
# page's own data. The section is not chapter prose: coursekit.teaching counts words before it.

import html.parser  # noqa: E402
import re  # noqa: E402

import markdown  # noqa: E402

from coursekit import teaching  # noqa: E402
from coursekit.page.grammar import PLACEHOLDER  # noqa: E402
from coursekit.page.tables import STUB_MARK  # noqa: E402

CHAPTERS = sorted((ROOT / "docs").glob("part-*/[0-9][0-9]-*.md"))
WRITTEN = [p for p in CHAPTERS if STUB_MARK not in p.read_text()]
EXERCISES = re.compile(r"^## Exercises[ \t]*$", re.M)
# the site's block extensions, without the placeholders: only the section's structure is checked here
EXERCISE_EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "pymdownx.details", "pymdownx.superfences"]


class _Exercises(html.parser.HTMLParser):
    """The rendered section: for each item of its first top-level <ol>, the text of each answer
    (a <details class="success"> whose summary is "Answer") and the item's other text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.lists, self.items = [], 0, []  # items: [question text, [answer texts]]
        self.answer = None  # stack depth of the open answer's <details>, and whether its summary says Answer
        self.summary = None

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "hr", "img", "input", "meta", "link"):
            return
        self.stack.append(tag)
        depth = len(self.stack)
        if tag == "ol" and depth == 1:
            self.lists += 1
        elif tag == "li" and depth == 2 and self.stack[0] == "ol" and self.lists == 1:
            self.items.append(["", []])
        elif tag == "details" and self.items and self.answer is None and len(self.stack) > 2:
            if "success" in (dict(attrs).get("class") or "").split():
                self.answer = depth
                self.items[-1][1].append("")
        elif tag == "summary" and self.answer is not None:
            self.summary = ""

    def handle_endtag(self, tag):
        if tag in ("br", "hr", "img", "input", "meta", "link") or tag not in self.stack:
            return
        while self.stack:
            depth, top = len(self.stack), self.stack.pop()
            if top == "summary" and self.summary is not None:
                if self.summary.strip() != "Answer":
                    self.items[-1][1][-1] = f"<summary {self.summary.strip()!r}, not 'Answer'>"
                self.summary = None
            if top == "details" and depth == self.answer:
                self.answer = None
            if top == tag:
                break

    def handle_data(self, data):
        if self.summary is not None:
            self.summary += data
        elif self.answer is not None:
            self.items[-1][1][-1] += data
        elif self.items and len(self.stack) >= 2 and self.lists == 1:
            self.items[-1][0] += data


def exercise_problems(page: str) -> list[str]:
    """What is wrong with a chapter's `## Exercises` section; nothing when it is as the comment above says."""
    found = list(EXERCISES.finditer(page))
    if len(found) != 1:
        return [f"{len(found)} '## Exercises' headings (expected 1, the chapter's last section)"]
    start = found[0].start()
    line = page.count("\n", 0, start) + 1
    problems = []
    remember = page.rfind("What to remember")
    if remember < 0 or remember > start:
        problems.append(f"line {line}: '## Exercises' must come after the 'What to remember' box")
    section = page[found[0].end() :]
    later = re.search(r"^#{1,2} ", section, re.M)
    if later:
        problems.append(f"line {line + section.count(chr(10), 0, later.start())}: a section after the exercises")
    parser = _Exercises()
    parser.feed(markdown.markdown(section, extensions=EXERCISE_EXTENSIONS))
    items = parser.items
    if parser.lists != 1:
        problems.append(
            f"line {line}: {parser.lists} numbered lists (expected one list; an answer at column 0 ends it)"
        )
    if not 3 <= len(items) <= 5:
        problems.append(f"line {line}: {len(items)} exercises (expected 3 to 5)")
    for n, (question, answers) in enumerate(items, 1):
        if not question.strip():
            problems.append(f"exercise {n} has no question")
        if len(answers) != 1:
            problems.append(
                f'exercise {n} has {len(answers)} answers (expected one `??? success "Answer"` block in its item)'
            )
        problems += [f"exercise {n}: {a}" for a in answers if a.startswith("<summary")]
        problems += [f"exercise {n}'s answer is empty" for a in answers if not a.strip()]
    if not any(PLACEHOLDER.search(a) for _, answers in items for a in answers):
        problems.append("no answer checks a prediction against the page's data (no {{ placeholder }} in an answer)")
    return problems


def test_chapters_are_found():
    assert len(CHAPTERS) >= 14 and WRITTEN


@pytest.mark.parametrize("chapter", WRITTEN, ids=_name)
def test_every_written_chapter_ends_with_exercises(chapter):
    problems = exercise_problems(chapter.read_text())
    assert not problems, f"{_name(chapter)}: " + "; ".join(problems)


GOOD_EXERCISES = """# 99 · A chapter

Prose.

!!! abstract "What to remember"
    1. One point.

## Exercises

1. Predict the time of one op, then check it.

    ??? success "Answer"
        It is {{ m02/host_overhead:host_us.no_grad | .1f }} µs: the host's share.

2. Why does the gap close?

    ??? success "Answer"
        Because the GPU's time grows with the size while the host's does not.

        ```python
        x = 1
        ```

3. Change `BLOCK` in the snippet and say what happens.

    ??? success "Answer"
        Nothing changes until the grid fills the GPU.
"""


def test_the_exercise_check_accepts_a_good_section():
    assert exercise_problems(GOOD_EXERCISES) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p: p.replace("## Exercises", "## Problems"), "0 '## Exercises' headings"),
        (lambda p: p.replace("## Exercises", "## Exercises\n\n## Exercises"), "2 '## Exercises' headings"),
        (lambda p: p.replace("What to remember", "Summary"), "after the 'What to remember' box"),
        (lambda p: p + "\n## Further reading\n\nA book.\n", "a section after the exercises"),
        (lambda p: p.replace("    ??? success", "??? success").replace("        ", "    "), "numbered lists"),
        (lambda p: p.replace('??? success "Answer"', "??? success"), "not 'Answer'"),
        (lambda p: p.replace('??? success "Answer"', '!!! note "Answer"'), "has 0 answers"),
        (lambda p: p + '\n    ??? success "Answer"\n        Twice.\n', "has 2 answers"),
        (lambda p: p[: p.index("3. Change")], "2 exercises (expected 3 to 5)"),
        (lambda p: p + "".join(f'\n{n}. Q?\n\n    ??? success "Answer"\n        A.\n' for n in (4, 5, 6)), "6 exer"),
        (lambda p: p.replace("{{ m02/host_overhead:host_us.no_grad | .1f }}", "some"), "no answer checks a prediction"),
    ],
)
def test_the_exercise_check_catches(change, problem):
    problems = exercise_problems(change(GOOD_EXERCISES))
    assert any(problem in p for p in problems), problems


def test_prose_words_stop_at_the_exercises():
    def words(text: str) -> int:
        return teaching.measure(text).words

    body = "Words of prose here. " * 10
    page = f"# A chapter\n\n{body}\n```\n## Exercises\n```\n"
    assert words(page + "## Exercises\n\n1. More words that do not count.\n") == words(page) > 40
    assert words(page + "## Exercises and more\n\nThese count.\n") == words(page) + 5
