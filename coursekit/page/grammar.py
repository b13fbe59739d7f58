"""The ``{{ ... }}`` grammar, in one place: what a placeholder looks like, where code fences are, how
a value's key, field and format are read. Standard library only: the Markdown extension
(coursekit/mdext.py), the prose lint (coursekit/prose.py), the teaching bars (coursekit/teaching.py)
and scripts/claims.py all read pages through it.

- A placeholder is ``{{ body }}`` on one line, not preceded by a backslash (``\\{{`` is a literal
  brace); its body holds no brace.
- Its first word names its kind (``figure``, ``assert``, ...: coursekit/page/kinds.py); anything
  else must be a value, ``module/snippet:field | format``.
- A fence opens on a line of three or more backticks or tildes (indented or not; a backtick fence's
  info string holds no backtick) and closes on a line of the same character, at least as long, with
  no info string. A fence that never closes is not a fence: its lines are prose (as Python-Markdown
  renders them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"(?<!\\)\{\{\s*(?P<body>[^{}\n]+?)\s*\}\}")
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
VALUE = re.compile(
    r"^(?P<key>[a-z0-9_]+/[a-z0-9_]+)\s*:\s*(?P<field>@?[\w.\-]+(?:\[[^\]]*\][\w.\-]*)*)\s*(?:\|\s*(?P<fmt>[^|]*))?$"
)
KEY = re.compile(r"[a-z0-9_]+/[a-z0-9_]+")
SPACED_BRACES = re.compile(r"(?<![\\{])\{[ \t]+\{|\}[ \t]+\}(?!\})")  # "{ { x } }": a placeholder typed apart


@dataclass(frozen=True)
class ValueRef:
    """``module/snippet:field | format``, read."""

    key: str
    field: str
    fmt: str

    @property
    def text(self) -> str:
        return f"{self.key}:{self.field}"


def parse_value(body: str) -> ValueRef | None:
    """A value placeholder's body (or a claim's operand), or None where it is not one."""
    m = VALUE.match(body.strip())
    if not m:
        return None
    return ValueRef(m["key"], m["field"], (m["fmt"] or "").strip())


def is_value(body: str) -> bool:
    """Whether a placeholder's body is a value (stored or computed), not a kind."""
    return parse_value(body) is not None


def kind_of(body: str) -> tuple[str, str]:
    """(the first word, the rest): ``figure m02/x | caption`` -> ("figure", "m02/x | caption")."""
    head, _, rest = body.strip().partition(" ")
    return head, rest.strip()


def fenced(lines: list[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (its fence lines included)."""
    out, i = [False] * len(lines), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and not (m["fence"][0] == "`" and "`" in m["info"]):
            fence = m["fence"]
            for j in range(i + 1, len(lines)):
                c = FENCE.match(lines[j])
                if c and c["fence"][0] == fence[0] and len(c["fence"]) >= len(fence) and not c["info"].strip():
                    out[i : j + 1] = [True] * (j - i + 1)
                    i = j
                    break
        i += 1
    return out


def strip_fences(text: str) -> str:
    """The text with every fenced block's lines blanked (line numbers hold)."""
    lines = text.split("\n")
    return "\n".join("" if code else line for line, code in zip(lines, fenced(lines)))


def placeholders(text: str):
    """(line number, match) for every placeholder outside code fences, in order."""
    lines = text.split("\n")
    for n, (line, code) in enumerate(zip(lines, fenced(lines)), 1):
        if not code:
            for m in PLACEHOLDER.finditer(line):
                yield n, m
