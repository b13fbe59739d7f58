"""The teaching edition's bars (coursekit/teaching.py) and its diagrams (docs/assets/diagrams/).

Each chapter in TEACHING_EDITION is held to every bar; a chapter joins the list when it is rewritten.
The counter's own rules are tested on small pages, and every diagram on any page is checked for what
a reader needs: a caption, real text, theme colours only, nothing fetched, legible on a phone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coursekit import teaching

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHAPTERS = sorted(DOCS.glob("part-*/[0-9][0-9]-*.md"))
TEACHING_EDITION: list[str] = [  # chapters rewritten to the teaching edition, one a line
    "part-j/01-why-eager-won.md",
    "part-j/02-eager-per-op.md",
    "part-j/03-graph-mode.md",
    "part-k/04-dynamo.md",
    "part-k/05-ir-ladder.md",
    "part-k/06-inductor.md",
    "part-k/07-triton.md",
    "part-l/08-caching-allocator.md",
    "part-l/09-cuda-graphs.md",
    "part-m/10-dynamic-shapes.md",
    "part-m/11-moe.md",
    "part-m/12-topk.md",
    "part-n/13-partitioning.md",
    "part-n/14-inference-server.md",
]


@pytest.mark.parametrize("page", TEACHING_EDITION or [None], ids=lambda p: str(p))
def test_teaching_edition_chapters_meet_every_bar(page):
    if page is None:
        pytest.skip("no chapter is in the teaching edition yet")
    bars = teaching.measure((DOCS / page).read_text())
    assert not bars.misses(), f"{page}: {bars.misses()}"


def test_teaching_edition_names_real_chapters():
    known = {str(p.relative_to(DOCS)) for p in CHAPTERS}
    assert set(TEACHING_EDITION) <= known, set(TEACHING_EDITION) - known


def test_listings_count_what_each_main_line_block_shows(tmp_path):
    """A listing counts its non-blank lines, an include the lines of its section (markers not
    shown); blocks in a collapsed box or the exercises are not on the main line."""
    (tmp_path / "s.py").write_text("import os\n# --8<-- [start:a]\nx = 1\n\ny = 2\n# --8<-- [end:a]\nz = 3\n")
    page = (
        'Text.\n\n```python\n--8<-- "s.py:a"\nprint(x)\n```\n\n```text\none\n\ntwo\n```\n\n'
        '??? note "Box"\n    ```python\n    boxed = 1\n    ```\n\n'
        "## Exercises\n\n```python\nexercise = 1\n```\n"
    )
    bars = teaching.measure(page, root=tmp_path)
    assert bars.listing_sizes == (3, 2)
    assert (bars.longest_listing, bars.listing_lines) == (3, 5)
    whole = teaching.measure('```python\n--8<-- "s.py"\n```\n', root=tmp_path)
    assert whole.listing_sizes == (4,)  # the whole file, its two marker lines not shown


def test_a_long_listing_misses_its_bar_and_a_bad_include_is_named(tmp_path):
    (tmp_path / "long.py").write_text("".join(f"line_{i} = {i}\n" for i in range(31)))
    bars = teaching.measure('```python\n--8<-- "long.py"\n```\n', root=tmp_path)
    assert any(m.startswith("longest_listing 31") for m in bars.misses()), bars.misses()
    with pytest.raises(ValueError, match="has no section 'nope'"):
        teaching.measure('```python\n--8<-- "long.py:nope"\n```\n', root=tmp_path)
    with pytest.raises(ValueError, match="no file"):
        teaching.measure('```python\n--8<-- "missing.py:a"\n```\n', root=tmp_path)


PAGE = """# A chapter

Two words, then a number {{ m02/crossover:floor_us | .1f }} and a cited {{ cited 4.8 TB/s | datasheet }}.

{{ figure m02/crossover | A caption that is not read on the main line }}

<figure class="course-diagram" id="dia-m02-x">
<svg viewBox="0 0 300 100"><text>not counted</text></svg>
<figcaption>Diagram 1. Neither is this.</figcaption>
</figure>

```python
code words do not count
```

??? note "How this was measured"
    Boxed words, three {{ m02/crossover:floor_us | .1f }}.

    ```text
    boxed code
    ```

    Still boxed.

After the box [a link](https://example.com/very/long/address) here.
{{ assert m02/a:x < m02/b:y }}

## Exercises

1. Not counted at all {{ m02/crossover:floor_us | .1f }}.
"""


def test_the_counter_reads_only_the_main_line():
    b = teaching.measure(PAGE)
    # A, chapter, Two, words, then, a, number, 0, and, a, cited, After, the, box, a, link, here
    assert b.words == 17
    assert b.values == 1  # the boxed one, the exercise's and the assert are not on the main line
    assert b.collapsed_words == 10  # How this was measured / Boxed words three 0 / Still boxed, less the code
    assert (b.figures, b.diagrams) == (1, 1)


def test_an_expanded_box_is_main_line():
    open_box = '???+ note "Open"\n    Four words in here.\n'
    closed = open_box.replace("???+", "???")
    assert teaching.measure(open_box).words == teaching.measure(closed).words + 5
    assert teaching.measure(closed).collapsed_words == 5


def test_reading_time_counts_words_and_visuals():
    b = teaching.Bars(words=2000, values=0, collapsed_words=0, diagrams=2, figures=4)
    assert b.minutes == pytest.approx(10 + 6 * 20 / 60)
    assert b.reading_minutes == 12
    assert teaching.Bars(words=2700, values=41, collapsed_words=0, diagrams=1, figures=2).misses() == [
        "values 41, the bar is <= 40",
        "diagrams 1, the bar is >= 2",
    ]


def test_a_lone_less_than_sign_hides_no_words():
    assert teaching.measure("When a < b the text goes on, and b > a.\n").words == 10


# ---------------------------------------------------------------- diagrams

DIAGRAM = re.compile(r"<figure\b[^>]*\bclass=\"course-diagram\"[^>]*>.*?</figure>", re.S)
INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+\.svg)"\s*$', re.M)
PHONE_COLUMN = 358  # px of text column at a 390 px wide phone
MIN_FONT_PX = 10.5


def _expanded(page: Path) -> str:
    return INCLUDE.sub(lambda m: (ROOT / m["path"]).read_text(), page.read_text())


def _diagrams():
    for page in sorted(DOCS.rglob("*.md")):
        for i, m in enumerate(DIAGRAM.finditer(_expanded(page))):
            yield pytest.param(m.group(0), id=f"{page.relative_to(DOCS)}#{i + 1}")


def diagram_problems(block: str) -> list[str]:
    problems = []
    fid = re.search(r'\bid="([^"]+)"', block)
    if not fid or not re.fullmatch(r"dia-m\d\d-[a-z0-9-]+|dia-[a-z0-9-]+", fid[1]):
        problems.append("the <figure> needs an id dia-mNN-name")
    cap = re.search(r"<figcaption>(.*?)</figcaption>", block, re.S)
    if not cap or len(re.findall(r"\w+", re.sub(r"<[^>]+>", " ", cap[1]))) < 8:
        problems.append("a <figcaption> of at least 8 words (it is the text alternative)")
    svg = re.search(r"<svg\b[^>]*>", block)
    if not svg:
        return problems + ["no inline <svg>"]
    view = re.search(r'viewBox="\s*[-\d.]+\s+[-\d.]+\s+([\d.]+)\s+([\d.]+)"', svg[0])
    if not view:
        problems.append("the <svg> needs a viewBox")
    if "<text" not in block:
        problems.append("its words must be SVG <text>, selectable and searchable")
    for bad, why in [
        (r"<script", "a script"),
        (r"<image\b", "an embedded image"),
        (r"(?:href|src)=\"(?:https?:)?//", "an outside reference"),
        (r"@import|@font-face", "a font or stylesheet fetched"),
        (
            r"(?:fill|stroke|color)\s*[:=]\s*\"?\s*(?:#[0-9a-fA-F]{3,8}|rgb|hsl|black|white|red|blue|green|gray|grey)",
            "a typed colour (use the classes in course.css, currentColor or var(--...))",
        ),
    ]:
        if re.search(bad, block):
            problems.append(f"{why} in the diagram")
    if view:
        width = float(view[1])
        sizes = [float(s) for s in re.findall(r"font-size[=:]\s*\"?([\d.]+)", block)] or [15.0]
        smallest = min(sizes + ([13.0] if 'class="small' in block or "class='small" in block else []))
        shown = smallest * min(1.0, PHONE_COLUMN / width)
        if shown < MIN_FONT_PX:
            problems.append(
                f"its smallest text shows at {shown:.1f} px on a phone (font {smallest:g} in a {width:g} wide "
                f"viewBox); at least {MIN_FONT_PX} px: a narrower, portrait layout or larger text"
            )
    return problems


@pytest.mark.parametrize("block", list(_diagrams()))
def test_every_diagram_reads_on_any_screen(block):
    assert not diagram_problems(block)


def test_the_diagram_check_catches():
    good = (
        '<figure class="course-diagram" id="dia-m01-two">\n<svg viewBox="0 0 360 200">'
        '<rect class="box"/><text x="1" y="2">Words</text></svg>\n'
        "<figcaption>Diagram 1. Python runs beside the GPU, one launch per op.</figcaption>\n</figure>"
    )
    assert diagram_problems(good) == []
    assert diagram_problems(good.replace('class="box"', 'fill="#ff0000"'))
    assert diagram_problems(good.replace("0 0 360 200", "0 0 900 200"))
    assert diagram_problems(good.replace('<text x="1" y="2">Words</text>', "<path d='M0 0'/>"))
    assert diagram_problems(good.replace("Diagram 1. Python runs beside the GPU, one launch per op.", "A picture"))
    assert diagram_problems(good.replace("<rect", "<script>x</script><rect"))


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_no_figure_sits_in_a_collapsed_box(page):
    """figures.js draws a figure when it nears the screen; one inside a closed box never does (and an
    open box draws it narrower than the column): figures go on the main line."""
    _, boxed = teaching.split_collapsed(page.read_text())
    assert "{{ figure" not in boxed, f"{page.relative_to(DOCS)}: a {{{{ figure }}}} inside a collapsed box"


def test_a_figure_in_a_box_is_found():
    _, boxed = teaching.split_collapsed('??? note "Box"\n    {{ figure m02/crossover | A caption }}\n')
    assert "{{ figure" in boxed
