"""A chapter's teaching bars: what its reader meets on the main line, counted.

The main line is everything outside code blocks, collapsed boxes (``??? note "..."`` and the indented
body under it), diagrams and figures, and the ``## Exercises`` section. On it:

- words: every word the reader sees, a measured number counting as one word;
- measured values: ``{{ key:field }}`` placeholders (stored or computed), not cited constants;
- the page's diagrams (``<figure class="course-diagram" ...>``) and figures (``{{ figure ... }}``);
- its code listings: the non-blank lines of each fenced block on the main line, an include
  (``--8<-- "snippets/m08/x.py:section"``) counted as the lines it shows. Readers read listings too,
  and the main line's word count leaves them out: every listing stays within ``LONGEST_LISTING``
  lines (longer code is the download), and all of them together within ``listing_lines``.

Reading time is the main line's words at ``WORDS_PER_MINUTE`` plus ``SECONDS_PER_VISUAL`` for each
figure or diagram. The limits are ``BARS``; ``scripts/bars.py`` prints every chapter against them, and
``tests/test_teaching.py`` holds every chapter that ``includes/chapters.yml`` marks ``edition: teaching``
to them. Torch-free, plain text in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from coursekit.page.grammar import FENCE, PLACEHOLDER, fenced, is_value, kind_of, strip_fences

WORDS_PER_MINUTE = 200
SECONDS_PER_VISUAL = 20
BARS = {  # name: (comparison, limit)
    "words": ("<=", 2700),
    "values": ("<=", 40),
    "collapsed_words": ("<=", 1500),
    "diagrams": (">=", 2),
    "figures": (">=", 2),
    "minutes": ("<=", 18),
    "longest_listing": ("<=", 30),
    "listing_lines": ("<=", 90),
}
ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[^"]+))?"\s*$')
SECTION_MARK = re.compile(r"--8<--\s*\[(?P<edge>start|end):(?P<name>[^\]]+)\]")

EXERCISES = re.compile(r"^## Exercises[ \t]*$", re.M)
COLLAPSED = re.compile(r"^(?P<indent>[ \t]*)\?\?\?(?!\+)[ \t]+\w")  # ??? closed; ???+ opens expanded: main line
DIAGRAM_START = re.compile(r"""<figure\b[^>]*\bclass=["'][^"']*\bcourse-diagram\b""")
FIGURE_BLOCK = re.compile(r"<figure\b.*?</figure>", re.S)
ADMONITION = re.compile(r"^[ \t]*(?:\?\?\?\+?|!!!)[ \t]+[\w-]+(?:[ \t]+inline(?:[ \t]+end)?)?", re.M)
WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t").expandtabs(4)) if line.strip() else -1


def split_collapsed(text: str) -> tuple[str, str]:
    """(the text outside collapsed boxes, the text inside them); line counts are kept in the first."""
    main, boxed, lines, i = [], [], text.split("\n"), 0
    while i < len(lines):
        m = COLLAPSED.match(lines[i])
        if not m:
            main.append(lines[i])
            i += 1
            continue
        depth = len(m["indent"].expandtabs(4))
        boxed.append(lines[i])
        main.append("")
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > depth):
            boxed.append(lines[i])
            main.append("")
            i += 1
    return "\n".join(main), "\n".join(boxed)


def _words(text: str) -> int:
    text = FIGURE_BLOCK.sub(" ", text)
    text = ADMONITION.sub(" ", text)  # the box's type word is not shown; its title is
    text = PLACEHOLDER.sub(lambda m: " 0 " if is_value(m["body"]) else " ", text)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?>", " ", text)  # tags, not a lone "<"
    text = re.sub(r"\]\([^)]*\)", "] ", text)  # a link's address is not read
    text = re.sub(r"^--8<--.*$", " ", text, flags=re.M)
    text = re.sub(r"^\*\[[^\]]+\]:.*$", " ", text, flags=re.M)  # abbreviation definitions
    return len(WORD.findall(text))


def _included(line: str, root: Path) -> list[str]:
    """The lines an include line shows: a file's section between its ``[start:name]`` and
    ``[end:name]`` markers, or the whole file; marker lines are not shown. ValueError names a
    missing file or section."""
    m = INCLUDE.match(line)
    path = root / m["path"]
    if not path.is_file():
        raise ValueError(f"{line.strip()}: no file {path}")
    lines, out, inside = path.read_text().splitlines(), [], m["section"] is None
    found = inside
    for ln in lines:
        mark = SECTION_MARK.search(ln)
        if mark:
            if mark["name"] == m["section"]:
                inside, found = mark["edge"] == "start", True
            continue
        if inside:
            out.append(ln)
    if not found:
        raise ValueError(f"{line.strip()}: {path} has no section {m['section']!r}")
    return out


def listings(main: str, root: Path = ROOT) -> list[int]:
    """The non-blank lines each fenced block of ``main`` shows, includes expanded, in order."""
    lines = main.split("\n")
    sizes, shown, inside = [], 0, False
    for line, code in zip(lines, fenced(lines)):
        if code and not inside:  # the opening fence
            inside, shown = True, 0
        elif code and inside and (fence := FENCE.match(line)) and not fence["info"].strip():  # the closing fence
            inside = False
            sizes.append(shown)
        elif code:
            shown += sum(1 for ln in _included(line, root) if ln.strip()) if INCLUDE.match(line) else bool(line.strip())
    return sizes


@dataclass
class Bars:
    words: int
    values: int
    collapsed_words: int
    diagrams: int
    figures: int
    listing_sizes: tuple[int, ...] = ()

    @property
    def longest_listing(self) -> int:
        return max(self.listing_sizes, default=0)

    @property
    def listing_lines(self) -> int:
        return sum(self.listing_sizes)

    @property
    def minutes(self) -> float:
        return self.words / WORDS_PER_MINUTE + (self.diagrams + self.figures) * SECONDS_PER_VISUAL / 60

    @property
    def reading_minutes(self) -> int:
        """What the page's counter shows: whole minutes, rounded up."""
        return max(1, math.ceil(self.minutes - 1e-9))

    def misses(self) -> list[str]:
        """Each bar this chapter does not meet, said in words."""
        out = []
        for name, (op, limit) in BARS.items():
            value = getattr(self, name)
            ok = value <= limit if op == "<=" else value >= limit
            if not ok:
                shown = f"{value:.1f}" if isinstance(value, float) else str(value)
                out.append(f"{name} {shown}, the bar is {op} {limit}")
        return out


def measure(markdown_text: str, root: Path = ROOT) -> Bars:
    """The teaching bars of one chapter's Markdown source (includes read under ``root``)."""
    raw_main, _ = split_collapsed(EXERCISES.split(markdown_text, maxsplit=1)[0])
    text = strip_fences(markdown_text)
    text = EXERCISES.split(text, maxsplit=1)[0]
    main, boxed = split_collapsed(text)
    return Bars(
        listing_sizes=tuple(listings(raw_main, root)),
        words=_words(main),
        values=sum(1 for m in PLACEHOLDER.finditer(FIGURE_BLOCK.sub(" ", main)) if is_value(m["body"])),
        collapsed_words=_words(strip_fences(boxed)),
        diagrams=len(DIAGRAM_START.findall(text)),
        figures=sum(1 for m in PLACEHOLDER.finditer(main) if kind_of(m["body"])[0] == "figure"),
    )
