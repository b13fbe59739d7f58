"""A chapter's teaching bars: what its reader meets on the main line, counted.

The main line is everything outside code blocks, collapsed boxes (``??? note "..."`` and the indented
body under it), diagrams and figures, and the ``## Exercises`` section. On it:

- words: every word the reader sees, a measured number counting as one word;
- measured values: ``{{ key:field }}`` placeholders (stored or computed), not cited constants;
- the page's diagrams (``<figure class="course-diagram" ...>``) and figures (``{{ figure ... }}``).

Reading time is the main line's words at ``WORDS_PER_MINUTE`` plus ``SECONDS_PER_VISUAL`` for each
figure or diagram. The limits are ``BARS``; ``scripts/bars.py`` prints every chapter against them, and
``tests/test_teaching.py`` holds every chapter that ``includes/chapters.yml`` marks ``edition: teaching``
to them. Torch-free, plain text in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from coursekit.page.grammar import PLACEHOLDER, is_value, kind_of, strip_fences

WORDS_PER_MINUTE = 200
SECONDS_PER_VISUAL = 20
BARS = {  # name: (comparison, limit)
    "words": ("<=", 2700),
    "values": ("<=", 40),
    "collapsed_words": ("<=", 1500),
    "diagrams": (">=", 2),
    "figures": (">=", 2),
    "minutes": ("<=", 18),
}

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


@dataclass
class Bars:
    words: int
    values: int
    collapsed_words: int
    diagrams: int
    figures: int

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


def measure(markdown_text: str) -> Bars:
    """The teaching bars of one chapter's Markdown source."""
    text = strip_fences(markdown_text)
    text = EXERCISES.split(text, maxsplit=1)[0]
    main, boxed = split_collapsed(text)
    return Bars(
        words=_words(main),
        values=sum(1 for m in PLACEHOLDER.finditer(FIGURE_BLOCK.sub(" ", main)) if is_value(m["body"])),
        collapsed_words=_words(strip_fences(boxed)),
        diagrams=len(DIAGRAM_START.findall(text)),
        figures=sum(1 for m in PLACEHOLDER.finditer(main) if kind_of(m["body"])[0] == "figure"),
    )
