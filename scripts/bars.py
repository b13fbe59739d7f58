"""Every chapter against the teaching bars (coursekit/teaching.py): words, measured values and
collapsed words on the main line, diagrams, figures, reading time, and the code listings shown on
the main line (the longest, and all of them together, in non-blank lines).

    python scripts/bars.py                       # every chapter, one line each, misses named
    python scripts/bars.py docs/part-j/01-*.md   # the chapters named

Exits 1 when a named chapter misses a bar (with no argument it only reports).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit import teaching  # noqa: E402


def main(argv: list[str]) -> int:
    named = [Path(a) for a in argv]
    pages = named or sorted((ROOT / "docs").glob("part-*/[0-9][0-9]-*.md"))
    head = f"{'chapter':34} {'words':>6} {'values':>6} {'boxed':>6} {'diagr':>5} {'figs':>4} {'min':>5}"
    head += f" {'code':>4} {'long':>4}"
    print(head)
    failed = 0
    for page in pages:
        if not page.is_file():
            print(f"{page}: no such chapter file", file=sys.stderr)
            return 2
        b = teaching.measure(page.read_text())
        misses = b.misses()
        failed += bool(misses)
        print(
            f"{page.name[:34]:34} {b.words:6} {b.values:6} {b.collapsed_words:6} {b.diagrams:5} {b.figures:4} "
            f"{b.minutes:5.1f} {b.listing_lines:4} {b.longest_listing:4}"
            + (f"   misses: {'; '.join(misses)}" if misses else "   ok")
        )
    limits = ", ".join(f"{k} {op} {v}" for k, (op, v) in teaching.BARS.items())
    print(
        f"bars: {limits} (reading time: {teaching.WORDS_PER_MINUTE} words a minute, "
        f"{teaching.SECONDS_PER_VISUAL} s per figure or diagram)"
    )
    return 1 if (named and failed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
