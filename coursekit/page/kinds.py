"""The placeholder kinds: the first word of a ``{{ ... }}`` names one, and its function fills it.

Every kind is ``handler(ctx, rest, placeholder) -> str``: ``ctx`` is the page on its hardware set
(coursekit/page/context.py), ``rest`` what follows the kind's name, ``placeholder`` the whole
``{{ ... }}`` for error messages; it returns what replaces the placeholder (HTML goes through
``ctx.page.stash``). A placeholder whose first word is no kind is a value
(``module/snippet:field | format``, coursekit/page/values.py) or an error.
"""

from __future__ import annotations

from coursekit.page import chapter, claims, evidence, figures, tables, values

KINDS = {
    "figure": figures.figure,
    "provenance": tables.provenance,
    "output": tables.output,
    "cited": values.cited,
    "assert": claims.claim,
    "hardware-sets": tables.hardware_sets,
    "scoreboard": tables.scoreboard,
    "reading-time": tables.reading_time,
    "chapter-box": chapter.chapter_box,
    "evidence": evidence.evidence,
}
