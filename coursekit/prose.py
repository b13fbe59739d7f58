"""The prose lint: no measured number is typed into the course.

A number with a unit of time, rate or ratio must come from ``build_results/`` through a
placeholder (``{{ m02/crossover:floor_us | .1f }}``), be marked as cited
(``{{ cited 4.8 TB/s | NVIDIA H200 product brief }}``) or be quoted (``<q>…</q>``). This module
holds the rules and the four ways of getting at the text a reader sees; ``tests/test_prose_lint.py``
applies them. It needs only the standard library (no torch, no Markdown), so that the rules live
in one place.

What is looked at:

- ``lint_markdown``: a page's Markdown source (``docs/**/*.md``);
- ``lint_notebook``: the Markdown (and raw) cells of a notebook (``docs/notebooks/*.ipynb``);
- ``lint_python_strings``: the string literals of a figure module (``snippets/*/figures.py``),
  i.e. every ``ast.Constant`` string and the literal parts of f-strings, but not the formatted
  values (they come from data), not format specs (``:.1%``, ``tickformat=".2s"``), and not
  docstrings (documentation of the code, never drawn);
- ``lint_html``: the rendered page, only its ``<article class="md-content__inner">``, so that no
  markup (emphasis, entities, tags) can hide a number from the source lint.

In the Markdown (and the rendered page) the ``title`` and ``alt`` attributes are read too, each
as a phrase of its own: a tooltip (``<abbr title="7.3 µs">``) or an image's alt text is shown to
the reader. In the source that is the attributes of hand-written HTML and the titles of Markdown
links and images (``[x](url "7 ms")``); a placeholder's own ``title`` is not, since placeholders
are removed first, and in the rendered page the elements skipped below are skipped with their
attributes.

What is removed before the rules run (the number inside is not typed, or not prose):

- fenced code blocks (a fence closes only on a line of the same character, at least as long and
  with no info string, so a ````` ```` ````` block may contain ````` ``` ````` lines; an unclosed
  fence is not a fence, and its lines are linted), code spans (any number of backticks), HTML
  comments;
- placeholders ``{{ ... }}`` on one line, as the Markdown extension fills them (``\\{{`` is a
  literal brace and is linted), which covers ``{{ cited VALUE | SOURCE }}``;
- ``<q>…</q>`` quotations;
- the escape for a typed constant that is not a measurement (a timeout, a reading speed, a
  threshold the text chose)::

      <span class="constant">600 s</span>

  It must hold exactly one number: a span holding more is linted like any other text, so it
  cannot hide a measured number next to the constant. Use it for the page's own constants only;
  a number from elsewhere is ``{{ cited ... }}``, a measured one a placeholder.

In the rendered page, also: ``<code>``, ``<pre>``, ``<script>``, ``<style>``, ``<figure>``,
``<svg>``, elements of class ``measured`` (a placeholder's value; ``measured fallback`` too),
``cited``, ``constant``, ``reading-time`` (``{{ reading-time ... }}``'s "12 min"),
``provenance`` (``<details class="provenance">``), ``hardware-sets`` (the table
``{{ hardware-sets }}`` draws from the stored results), ``scoreboard`` (the table ``{{ scoreboard }}``
draws from the stored races: names such as "65,536 x 1,024" are shapes, and every time in it is a
stored median), ``jp-CodeCell`` and ``clipboard-copy-txt``
(a notebook's code cells and the hidden copy of their code). Tags are stripped (inline ones
without a gap, so ``7<b>.3</b> µs`` reads ``7.3 µs``; a block, a table cell included, ends a
phrase), entities unescaped.

Then the text is normalised (NFKC, so ``µ`` and ``μ``, ``½``, superscripts and full-width forms
read as plain characters; zero-width characters and soft hyphens removed; Markdown emphasis
markers, backslash escapes and link syntax dropped) and these rules run on it. A number is
written with digits (``7``, ``7.3``, ``4,273``, ``.5``, ``1e6``), with or without a magnitude
(``1.5k``, ``2M``, ``3G``, ``2B``), or in words from one to ninety-nine (``five``, ``twenty-five``)
before a unit of time written out (``five microseconds``), a per cent (``one per cent``), a fold
(``twelve-fold``) or a comparison of speed or time (below); a magnitude in words (``a few hundred
nanoseconds``) is not a number. Between a number and its unit may stand spaces (one line break included, not a
blank line or a table cell), a no-break or thin space, a hyphen (``a 7.3-µs kernel``), ``+`` or
``)``.

- **time**: ``ns``, ``ps``, ``µs``/``μs``/``us``/``mus``, ``usec(s)``, ``ms``, ``msec(s)``,
  ``nsec(s)``, ``microsec``, ``millisec``, ``nanosec``, ``s``, ``sec``, ``min``, ``h``, ``hr``,
  the words (``nanosecond(s)``, ``microseconds``, ``milliseconds``, ``seconds``, ``minutes``,
  ``hours``) and ``cycles``;
- **percent**: ``%``, ``‰``, ``percent``, ``per cent``, ``pct``, ``percentage point(s)``;
- **ratio**: ``3x``, ``3×`` (a multiplier written against the number: ``2x H200`` reads as one
  too, so write "two H200s"), ``3 ×`` at the end of a phrase, ``2.5 × eager`` and ``2.5 times``
  (a fraction of times is never a count), ``3 times faster`` / ``3 x slower`` / ``3× more`` /
  ``3 times eager's`` (and longer, fewer, as, the, over, …), ``2.5-fold``, ``a speedup of 3.2``,
  ``a 3.2 speed-up``, ``sped up by 3.2`` / ``slowed down by 1.4``, and in words before a
  comparison of speed or time (faster, slower, longer, as fast, as slow, as long, the time, the
  speed, the throughput, …): ``twice as fast``, ``half the time``, ``thrice as fast``,
  ``three times faster`` (one to ten times), ``double the throughput``, ``triple the time``;
  "called twice", "the first half", "double precision", "triple-quoted" are not ratios;
- **rate**: anything per unit of time written with a slash (``GB/s``, ``GiB/s``, ``TB/s``,
  ``Gbit/s``, ``TFLOP/s``, ``tokens/s``, ``tok/s``, ``it/s``, ``req/s``, ``3/s``, …), the
  compact forms ``TFLOPS``, ``TFLOPs``, ``GFLOPS``, ``FLOPS``, ``TOPS``, ``Gbps``, ``GHz``,
  ``fps``, ``qps``, and a count per unit of time in words (``100 tokens per second``,
  ``220 words a minute``);
- **table**: any number typed in a table column whose header names one of those units
  (``| Eager (µs) |``, ``µs per add``, ``(s)``, ``GB/s``, ``speedup``), or in a row whose first
  cell does (``| first call (s) | 3.2 |``), in pipe tables and in rendered ``<table>`` alike.

Allowed, because they are not measurements: version numbers (``torch 2.11``, ``CUDA 13.0``),
sizes and counts without a unit of time, rate or ratio (``4,096 tokens``, ``60 MB of L2``,
``2^28 elements``, ``called 3 times``), years and decades (``2019``, ``the 2010s``), section and
module numbers, names with digits (``H200``, ``m02``, ``p90``), a product of whole numbers with a
spaced ``×`` (``12 × elements``, ``4 × 4096``), dimensions (``3x3``), and ``= 1×``, which defines
the baseline of a normalised axis (``eager = 1×``) rather than reporting a ratio.
"""

from __future__ import annotations

import ast
import html
import json
import re
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser

from coursekit.page.grammar import PLACEHOLDER, strip_fences  # the one {{ }} grammar, fences included

# --------------------------------------------------------------------------- the rules

MAGNITUDE = r"(?:[kKMGB](?!\w))?"  # 1.5k tokens/s, 2M req/s: a thousand, a million, a billion of the unit
NUMBER = rf"(?<![\w.,])(?P<num>\d(?:[\d,.]*\d)?|\.\d+)(?:[eE][-+\u2212]?\d+)?{MAGNITUDE}"
DECIMAL = r"(?<![\w.,])(?P<num>\d*[.,]\d+)"  # 2.5, not 3: "called 3 times" is a count
WS = r"[^\S\n]*\n?[^\S\n]*"  # spaces, at most one line break: a blank line (or a table cell) separates
SEP = rf"(?P<sep>\+?\)?{WS}(?:[-\u2010\u2011][^\S\n]*)?)"  # 7 ms, 7+ ms, (±0.3) ms, 7\nms, a 7-ms kernel
_TIME_SHORT = r"nsecs?|psecs?|[µμu]secs?|mus|msecs?|(?i:(?:nano|pico|micro|milli)secs?)"  # 12.5 mus: µs typed as "mus"
_TIME_ABBR = rf"ns|ps|[µμu]s|ms|{_TIME_SHORT}|s|secs?|min|mins|h|hrs?"
_TIME_WORDS = r"(?i:(?:nano|pico|micro|milli)?seconds?|minutes?|hours?|(?:clock[^\S\n]+)?cycles?)"
TIME = rf"(?:{_TIME_ABBR}|{_TIME_WORDS})"
PERCENT = r"%|‰|(?i:per[^\S\n]?cent|pct|percentage[^\S\n]+points?)(?!\w)"
RATE_COMPACT = r"[kKMGTPE]?FLOPS|[kKMGTPE]FLOPs|[kKMGTPE]?OPS|[kKMGT]?bps|[kKMGT]?Bps|fps|FPS|qps|QPS|[kKMGT]?Hz"
RATE_SLASH = rf"(?:[A-Za-zµμ]+[^\S\n]*)?/[^\S\n]*{TIME}"
_SPEEDUP_WORDS = r"speed-?ups?|slow-?downs?"
SPEEDUP = rf"(?i:{_SPEEDUP_WORDS})"
COMPARATIVE = (  # after "3 times" / "3x": what makes it a ratio rather than a count
    r"(?i:faster|slower|quicker|longer|shorter|more|less|fewer|larger|smaller|bigger|higher|lower|greater"
    rf"|better|worse|cheaper|costlier|as|the|over|that|{_SPEEDUP_WORDS})|\w+['’]s"
)
_SECOND_AFTER = r"(?:$|\n|[^\w\s]|[^\S\n]+(?:on|at|in|and|or|with|from|for|to|when|while|of|under|over|by|than)\b)"
_LINK = r"(?:of|is|was|were|by|reaches|reached|about|around|roughly|nearly|almost|only|just|=|:|≈|~)"
_PARTICLE = r"[^\S\n]*[-\u2010\u2011]?[^\S\n]*"  # sped up, sped-up
_SPED_UP = rf"(?i:(?:sped|speeds?|speeding){_PARTICLE}up|(?:slowed|slows?|slowing){_PARTICLE}down)"
_HEDGE = r"(?:about|around|roughly|nearly|almost|only|just|some|over|under)"
# A ratio in words: "twice as fast", "half the time", "three times as fast" (digits are the rules above). Only
# before a comparison of speed or time, so that "called twice", "the first half", "double precision" are not.
_NUMBER_WORD = (  # a number written in words, one to ninety-nine: "five", "twelve", "twenty-five" (not "a few
    # hundred", an order of magnitude)
    r"(?i:(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[^\S\n]*[-\u2010\u2011][^\S\n]*"
    r"(?:one|two|three|four|five|six|seven|eight|nine))?"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    r"|seventeen|eighteen|nineteen)(?!\w))"
)
_WORD_RATIO = rf"(?i:{_NUMBER_WORD}[^\S\n]*[-\u2010\u2011]?[^\S\n]*times|twice|thrice|half|double|triple|quadruple)"
_WORDS_BEFORE = r"(?<![\w-])"  # a number word starts a word
_SPEED_COMPARISON = (
    r"(?i:faster|slower|quicker|longer|shorter"
    r"|as[^\S\n]+(?:fast|slow|quick|quickly|slowly|long|short|expensive|costly)"
    r"|the[^\S\n]+(?:time|speed|throughput|latency|run[-\u2010\u2011]?time|wall[-\u2010\u2011]?time|cost|bandwidth"
    r"|rate|duration))"
)

RULES: list[tuple[str, re.Pattern]] = [
    ("time", re.compile(rf"{NUMBER}{SEP}(?P<unit>{TIME})(?!\w)")),
    ("percent", re.compile(rf"{NUMBER}{SEP}(?P<unit>{PERCENT})")),
    ("ratio", re.compile(rf"{NUMBER}(?P<sep>)(?P<unit>[×xX])(?![\w×])")),  # 4x, 3.2×
    ("ratio", re.compile(rf"{NUMBER}(?P<sep>(?=\s){WS})(?P<unit>×)(?!{WS}[\w(])")),  # "3.2 ×." (not 12 × n)
    ("ratio", re.compile(rf"{DECIMAL}(?P<sep>{WS})(?P<unit>[×xX]|(?i:times))(?!\w)")),  # 2.5 × eager
    ("ratio", re.compile(rf"{NUMBER}{SEP}(?P<unit>(?:[×xX]|(?i:times))(?=\s){WS}(?:{COMPARATIVE}))(?!\w)")),
    ("ratio", re.compile(rf"{NUMBER}{SEP}(?P<unit>(?i:fold))(?!\w)")),  # 2.5-fold
    ("ratio", re.compile(rf"(?P<unit>{SPEEDUP})(?:{WS}{_LINK}){{0,3}}{WS}(?P<sep>)[~≈]?{NUMBER}")),  # speedup of 3.2
    ("ratio", re.compile(rf"(?<!\w)(?P<unit>{_SPED_UP}{WS}(?i:by))(?:{WS}{_HEDGE})?{WS}(?P<sep>)[~≈]?{NUMBER}")),
    ("ratio", re.compile(rf"{NUMBER}{SEP}(?P<unit>(?i:speed[-\u2010\u2011 ]?up|slow[-\u2010\u2011 ]?down))(?![\w-])")),
    ("ratio", re.compile(rf"(?<![\w-])(?P<num>{_WORD_RATIO})(?P<sep>{WS})(?P<unit>{_SPEED_COMPARISON})(?![\w-])")),
    # a number in words with a unit of time, a per cent or a fold: "five microseconds", "twelve-fold"
    (
        "time",
        re.compile(
            rf"{_WORDS_BEFORE}(?P<num>{_NUMBER_WORD})(?P<sep>{WS}[-\u2010\u2011]?{WS})(?P<unit>{_TIME_WORDS})(?!\w)"
        ),
    ),
    ("percent", re.compile(rf"{_WORDS_BEFORE}(?P<num>{_NUMBER_WORD})(?P<sep>{WS})(?P<unit>{PERCENT})")),
    (
        "ratio",
        re.compile(
            rf"{_WORDS_BEFORE}(?P<num>{_NUMBER_WORD})(?P<sep>{WS}[-\u2010\u2011]?{WS})(?P<unit>(?i:fold))(?!\w)"
        ),
    ),
    ("rate", re.compile(rf"{NUMBER}{SEP}(?P<unit>{RATE_SLASH})(?!\w)")),
    ("rate", re.compile(rf"{NUMBER}{SEP}(?P<unit>{RATE_COMPACT})(?!\w)")),
    (
        "rate",
        re.compile(
            rf"{NUMBER}{SEP}(?P<unit>(?:[\w/-]+[^\S\n]+){{0,2}}?(?:(?i:per)[^\S\n]+{TIME}(?!\w)"
            rf"|(?i:an?|each|every)[^\S\n]+(?:(?i:(?:nano|micro|milli)?seconds?)(?={_SECOND_AFTER})"
            r"|(?i:minutes?|hours?|(?:nano|micro|milli)seconds?)(?!\w))))"
        ),
    ),
]
# A unit in a table's header cell (or a row's first cell): the numbers under it are measurements.
# "s" and "h" alone only in brackets, "(s)", so that "GPU's" and a column "h" are not units.
HEADER_UNIT = re.compile(
    rf"(?<![\w'’])(?:ns|ps|[µμu]s|ms|{_TIME_SHORT}|secs?|min|mins|hrs?|{_TIME_WORDS}|{SPEEDUP}|(?i:ratio)"
    rf"|{RATE_SLASH}|{RATE_COMPACT}|(?i:percent|per\s?cent|pct))(?![\w'’/])|[%‰×]|[(\[]\s*[sh]\s*[)\]]"
)

_DECADE = re.compile(r"(1[5-9]|20)\d0")


@dataclass(frozen=True)
class Hit:
    """A number that looks measured: the rule it broke, the text, and where (line or context)."""

    rule: str
    text: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text!r} ({self.rule})"


def _exempt(m: re.Match, text: str) -> bool:
    unit = m["unit"]
    if unit == "s" and not m["sep"] and _DECADE.fullmatch(m["num"]):
        return True  # the 1990s
    if unit in ("×", "x", "X") and re.fullmatch(r"1(?:\.0*)?", m["num"]) and text[: m.start()].rstrip().endswith("="):
        return True  # "eager = 1×": the baseline of a normalised axis, by definition
    return False


def normalise(text: str) -> str:
    """NFKC, no zero-width characters or soft hyphens, line ends as \\n."""
    text = unicodedata.normalize("NFKC", text.replace("\r\n", "\n"))
    return re.sub("[\u00ad\u180e\u200b-\u200d\u2060\ufeff]", "", text)


def line_of(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}"


def context_of(text: str, pos: int) -> str:
    return "…" + " ".join(text[max(0, pos - 50) : pos + 30].split()) + "…"


def find_typed(text: str, where=line_of, prefix: str = "") -> list[Hit]:
    """Every measured-looking number in plain text; ``where(text, offset)`` names the place of a
    hit (by default its line), after ``prefix``."""
    text = normalise(text)
    spans: list[tuple[int, int, str]] = []
    for rule, pattern in RULES:
        for m in pattern.finditer(text):
            if not _exempt(m, text):
                spans.append((m.start(), m.end(), rule))
    merged: list[list] = []  # one hit per number, however many rules it breaks
    for start, stop, rule in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop, rule])
    return [Hit(rule, " ".join(text[a:b].split()), prefix + where(text, a)) for a, b, rule in merged]


def table_hits(header: dict[int, str], rows: list[list[tuple[int, str]]], where: str) -> list[Hit]:
    """Numbers typed in a column whose header names a unit (``| Eager (µs) |``), or in a row whose
    first cell does (``| first call (s) | 3.2 |``): what the rules above cannot see in one cell.
    ``rows`` are lists of (column, text); a cell the rules already flag is not repeated."""
    unit_columns = {col for col, text in header.items() if HEADER_UNIT.search(normalise(text))}
    hits = []
    for row in rows:
        row_unit = bool(row) and row[0][0] == 0 and bool(HEADER_UNIT.search(normalise(row[0][1])))
        for col, text in row:
            if (col in unit_columns or (row_unit and col != 0)) and re.search(r"\d", text) and not find_typed(text):
                label = normalise(header.get(col, "")).strip() or f"column {col + 1}"
                hits.append(Hit("table", " ".join(normalise(text).split()), f"{where}under {label!r}"))
    return hits


# --------------------------------------------------------------------------- Markdown source

CONSTANT_OPEN = re.compile(r"""<span\b[^>]*\bclass\s*=\s*["'](?:[^"']*\s)?constant(?:\s[^"']*)?["'][^>]*>""", re.I)
INLINE_TAGS = frozenset(
    "a abbr b bdi bdo big cite data del dfn em font i ins label mark s small span strike strong sub sup time tt u var"
    " wbr".split()
)
PHRASING_TAGS = INLINE_TAGS | {"code", "q", "kbd", "samp", "img", "svg", "math", "br"}  # no block break in HTML
BLOCK_BREAK = re.compile(r"\n[^\S\n]*\n")
HTML_TAG = re.compile(r"</?(?P<name>[A-Za-z][\w-]*)\b[^<>]*>")
TOOLTIP = re.compile(r"""(?<=\s)(?i:title|alt)\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s"'=<>`]+))""")
LINK_TITLE = re.compile(
    r"""\]\((?:<[^>\n]*>|[^\s()]*)[^\S\n]+(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|\((?P<bare>[^()\n]*)\))[^\S\n]*\)"""
)
TABLE_DELIMITER = re.compile(r"^[^\S\n]*\|?[^\S\n]*:?-+:?[^\S\n]*(?:\|[^\S\n]*:?-+:?[^\S\n]*)*\|?[^\S\n]*$")


def _blank(text: str) -> str:
    """What a removed piece leaves behind: its line breaks, so that line numbers still hold."""
    return "\n" * text.count("\n") or " "


_strip_fences = strip_fences  # the grammar's (coursekit/page/grammar.py): one fence rule for every reader


def _within_paragraph(text: str, start: int, stop: int) -> bool:
    return not BLOCK_BREAK.search(text, start, stop)


def _strip_inline(text: str) -> str:
    """Code spans (and raw ``<code>``, ``<pre>``, ``<script>``, ``<style>``), comments, quotations
    and constants, scanned left to right as a Markdown parser meets them (a backtick inside a
    comment does not open a code span, and so on)."""
    opener = re.compile(r"`+|<!--|<(?:q|code|pre|script|style)\b[^>]*>|" + CONSTANT_OPEN.pattern, re.I)
    out, pos = [], 0
    while m := opener.search(text, pos):
        token, end = m.group(0), None
        if token.startswith("`"):
            c = re.compile(rf"(?<!`){token}(?!`)").search(text, m.end())
            if c and _within_paragraph(text, m.end(), c.start()):
                end = c.end()
        elif token == "<!--":
            c = text.find("-->", m.end())
            end = c + 3 if c >= 0 else None
        else:
            name = re.match(r"<(\w+)", token)[1].lower()
            closing = f"</{name}>"
            c = text.lower().find(closing, m.end())
            one_number = name != "span" or len(re.findall(r"\d+(?:[.,]\d+)*", text[m.end() : c])) == 1
            block = name in ("pre", "script", "style")  # may hold blank lines
            if c >= 0 and (block or _within_paragraph(text, m.end(), c)) and one_number:  # a constant: one number
                end = c + len(closing)
        if end is None:  # not closed: literal text, linted
            out.append(text[pos : m.end()])
            pos = m.end()
            continue
        removed = text[m.start() : end]
        out.append(text[pos : m.start()] + ("\n" * removed.count("\n") if token == "<!--" else _blank(removed)))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _strip_tags(text: str) -> str:
    def tag(m: re.Match) -> str:
        name = m["name"].lower()
        return "\n" * m.group(0).count("\n") if name in INLINE_TAGS else _blank(m.group(0))

    return HTML_TAG.sub(tag, text)


def _strip_markdown_syntax(text: str) -> str:
    text = re.sub(r"^[^\S\n]*\[(?!\^)[^\]\n]+\]:[^\S\n]*\S+.*$", "", text, flags=re.M)  # link definitions
    text = re.sub(r"<https?://[^>\s]+>|https?://[^\s)>\]\"']+", " ", text)  # URLs hold digits
    text = re.sub(r"\[\^[^\]\n]+\]:?", "", text)  # footnote marks
    text = re.sub(r"!?\[([^\]\n]*)\](?:\([^)\n]*\)|\[[^\]\n]*\])", r"\1", text)  # links, images: their text
    text = re.sub(r"\{:?[^\S\n]*[#.][^}\n]*\}", " ", text)  # attribute lists
    return text


def _strip_emphasis(text: str) -> str:
    text = re.sub(r"\\([!-/:-@\[-`{-~\n])", r"\1", text)  # backslash escapes, hard line breaks
    text = text.replace("*", "").replace("~~", "")
    return re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)


def _unrendered(markdown: str) -> str:
    """A page less its code, comments, placeholders, quotations and constants."""
    text = _strip_fences(markdown.replace("\r\n", "\n"))
    text = PLACEHOLDER.sub(" ", text).replace("\\{{", "{{")
    return _strip_inline(text)


def markdown_tooltips(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of what a page shows on hover or in place of an image: the ``title`` and ``alt``
    attributes of its hand-written HTML (``<abbr title="...">``) and the titles of its Markdown links
    and images (``[x](url "...")``). A placeholder's own title is not here: placeholders are removed."""
    text, found = _unrendered(markdown), []
    for tag in HTML_TAG.finditer(text):
        found += [(tag.start() + a.start(), a["dq"] or a["sq"] or a["bare"] or "") for a in TOOLTIP.finditer(tag[0])]
    found += [(t.start(), t["dq"] or t["sq"] or t["bare"] or "") for t in LINK_TITLE.finditer(text)]
    return [(text.count("\n", 0, pos) + 1, html.unescape(value)) for pos, value in sorted(found) if value.strip()]


def markdown_prose(markdown: str) -> str:
    """The prose of a Markdown page, as plain text with its line breaks where they were."""
    text = _strip_markdown_syntax(_unrendered(markdown))
    text = _strip_tags(text)
    text = html.unescape(text)
    return _strip_emphasis(text)


def _cells(line: str) -> list[str]:
    line = line.strip()
    return [c.strip() for c in line.removeprefix("|").removesuffix("|").split("|")]


def markdown_tables(prose: str) -> list[Hit]:
    """``table_hits`` for the pipe tables of a page's prose (``markdown_prose`` output)."""
    lines, hits, i = prose.split("\n"), [], 0
    while i + 1 < len(lines):
        if "|" in lines[i] and "|" in lines[i + 1] and TABLE_DELIMITER.match(lines[i + 1]):
            header = dict(enumerate(_cells(lines[i])))
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                rows = [list(enumerate(_cells(lines[j])))]
                hits += table_hits(header, rows, f"line {j + 1}, ")
                j += 1
            i = j
        else:
            i += 1
    return hits


def lint_markdown(markdown: str, prefix: str = "") -> list[Hit]:
    prose = markdown_prose(markdown)
    found = find_typed(prose, prefix=prefix) + [
        Hit(h.rule, h.text, prefix + h.where) for h in markdown_tables(normalise(prose))
    ]
    for line, tooltip in markdown_tooltips(markdown):  # each its own phrase, never joined to the prose around it
        found += find_typed(tooltip, lambda text, pos, line=line: f"line {line + text.count(chr(10), 0, pos)}", prefix)
    return sorted(found, key=lambda h: int(re.search(r"line (\d+)", h.where)[1]))


def lint_notebook(ipynb: str) -> list[Hit]:
    """The Markdown (and raw) cells of a notebook; its code and outputs are code."""
    hits = []
    for number, cell in enumerate(json.loads(ipynb).get("cells", []), 1):
        if cell.get("cell_type") in ("markdown", "raw"):
            source = cell.get("source", "")
            hits += lint_markdown("".join(source) if isinstance(source, list) else source, f"cell {number}, ")
    return hits


# --------------------------------------------------------------------------- figure labels

PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa%]")


class _Strings(ast.NodeVisitor):
    """String literals a figure module types: labels, titles, hover templates. A chain of
    ``+`` is read as one string, its non-literal terms as gaps (they come from data)."""

    def __init__(self):
        self.found: list[tuple[int, str]] = []
        self.skip: set[int] = set()  # docstrings

    def visit(self, node):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                self.skip.add(id(first.value))
        return super().visit(node)

    def _literal(self, node) -> str | None:
        """The typed text of a string expression, " " for each piece that comes from data."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else " " for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._literal(node.left), self._literal(node.right)
            if left is not None or right is not None:
                return (left if left is not None else " ") + (right if right is not None else " ")
        return None

    def _data_parts(self, node):
        """Visit what inside a string expression is not typed text: the formatted expressions."""
        if isinstance(node, ast.JoinedStr):
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    self.visit(v.value)  # its format spec is not text
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and self._literal(node) is not None:
            self._data_parts(node.left)
            self._data_parts(node.right)
        elif not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            self.visit(node)

    def _record(self, node):
        if id(node) not in self.skip:
            self.found.append((node.lineno, self._literal(node)))
        self._data_parts(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            self._record(node)

    def visit_JoinedStr(self, node):
        self._record(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            self.found.append((node.left.lineno, PRINTF_SPEC.sub(" ", node.left.value)))
            self.visit(node.right)
        elif isinstance(node.op, ast.Add) and self._literal(node) is not None:
            self._record(node)
        else:
            self.generic_visit(node)

    def visit_keyword(self, node):
        if not (node.arg or "").lower().endswith("format"):  # tickformat=".2s": a d3 format, not text
            self.visit(node.value)

    def visit_Dict(self, node):
        for key, value in zip(node.keys, node.values):
            if key is not None:
                self.visit(key)
            if not (isinstance(key, ast.Constant) and str(key.value).lower().endswith("format")):
                self.visit(value)


def figure_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string a figure module types, as a reader would see it drawn."""
    visitor = _Strings()
    visitor.visit(ast.parse(source))
    out = []
    for line, value in visitor.found:
        value = re.sub(r"%\{[^}]*\}", " ", value)  # plotly's %{y:.2f}: data
        value = re.sub(r"\{[^{}]*\}", " ", value)  # str.format fields: data
        out.append((line, html.unescape(_strip_tags(value))))
    return out


def lint_python_strings(source: str) -> list[Hit]:
    hits = []
    for line, value in figure_strings(source):
        hits += find_typed(value, lambda text, pos: f"line {line}")
    return hits


# --------------------------------------------------------------------------- the rendered page

SKIP_TAGS = frozenset("code pre script style template q figure svg math textarea".split())
SKIP_CLASSES = frozenset(
    "measured cited constant reading-time provenance hardware-sets scoreboard evidence jp-CodeCell"
    " clipboard-copy-txt".split()
)
VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())


class _Article(HTMLParser):
    """The text of a page's article, less what the module docstring lists, and its tables."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, skipped subtree, is the article)
        self.article = self.skipping = self.articles = 0
        self.parts: list[str] = []
        self.tooltips: list[str] = []  # title and alt attributes: shown on hover, each its own phrase
        self.tables: list[dict] = []
        self.table_hits: list[Hit] = []

    def _gap(self, tag: str):
        if self.article and (tag == "br" or tag not in PHRASING_TAGS):
            self.parts.append("\n" if tag == "br" else "\n\n")  # a block (a table cell too) ends a phrase

    def handle_starttag(self, tag, attrs):
        classes = set((dict(attrs).get("class") or "").split())
        self._gap(tag)
        is_article = tag == "article" and "md-content__inner" in classes
        skip = bool(self.article or is_article) and (tag in SKIP_TAGS or bool(classes & SKIP_CLASSES))
        if self.article and not (self.skipping or skip):
            self.tooltips += [value for name, value in attrs if name in ("title", "alt") and value]
        if tag in VOID_TAGS:
            return
        self.stack.append((tag, skip, is_article))
        self.article += is_article
        self.articles += is_article
        self.skipping += skip
        if self.skipping or not self.article:
            return
        if tag == "table":
            self.tables.append({"header": {}, "row": [], "col": -1, "cell": None, "text": []})
        elif self.tables and tag == "tr":
            self.tables[-1].update(row=[], col=-1)
        elif self.tables and tag in ("td", "th"):
            table = self.tables[-1]
            table.update(col=table["col"] + 1, text=[])
            table["cell"] = (tag, table["col"])

    def handle_startendtag(self, tag, attrs):
        self._gap(tag)
        classes = set((dict(attrs).get("class") or "").split())
        if self.article and not self.skipping and tag not in SKIP_TAGS and not classes & SKIP_CLASSES:
            self.tooltips += [value for name, value in attrs if name in ("title", "alt") and value]

    def _close(self, tag: str):
        if not self.tables or self.skipping or not self.article:
            return
        table = self.tables[-1]
        if tag in ("td", "th") and table["cell"]:
            kind, col = table["cell"]
            text = "".join(table["text"])
            if kind == "th":
                table["header"][col] = text
            else:
                table["row"].append((col, text))
            table["cell"] = None
        elif tag == "tr" and table["row"]:
            self.table_hits += table_hits(table["header"], [table["row"]], "table cell ")
            table["row"] = []
        elif tag == "table":
            self.tables.pop()

    def handle_endtag(self, tag):
        if not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:
            t, skip, is_article = self.stack.pop()
            self.skipping -= skip
            self._close(t)
            self.article -= is_article
            if t == tag:
                break
        self._gap(tag)

    def handle_data(self, data):
        if not self.article or self.skipping:
            return
        if self.tables and self.tables[-1]["cell"]:
            self.tables[-1]["text"].append(data)
        self.parts.append(data)


def article_text(page: str) -> tuple[str, int]:
    """The article's text and how many articles the page has."""
    return _parse(page)[:2]


def _parse(page: str) -> tuple[str, int, list[Hit], list[str]]:
    parser = _Article()
    parser.feed(page)
    parser.close()
    return "".join(parser.parts), parser.articles, parser.table_hits, parser.tooltips


def lint_html(page: str) -> list[Hit]:
    text, _, tables, tooltips = _parse(page)
    hits = find_typed(text, context_of) + tables
    for tooltip in tooltips:
        hits += find_typed(tooltip, lambda text, pos: "attribute " + context_of(text, pos))
    return hits
