"""Every claim the pages make ({{ assert A op B }}), checked against one hardware set, all at once.

    python scripts/claims.py                          # the reference set
    python scripts/claims.py --hardware nvidia-h200-rerun

The site build stops at the first claim that fails; this lists them all, with the ranges compared
(coursekit/mdext.py: ``ResultsPreprocessor.claim``), and exits 1 if any fails.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import markdown  # noqa: E402

from coursekit import results as store  # noqa: E402
from coursekit.mdext import PLACEHOLDER, PlaceholderError  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default=store.REFERENCE_HARDWARE)
    args = parser.parse_args()
    md = markdown.Markdown(
        extensions=["coursekit.mdext"], extension_configs={"coursekit.mdext": {"hardware": args.hardware}}
    )
    pre = md.preprocessors["course_results"]
    failed = 0
    for page in sorted(Path("docs").rglob("*.md")):
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in PLACEHOLDER.finditer(line):
                body = m["body"]
                if not body.startswith("assert "):
                    continue
                try:
                    holds, shown = pre.verdict(body.removeprefix("assert ").strip(), m.group(0))
                except PlaceholderError as exc:
                    print(f"ERROR {page}:{n}: {exc}")
                    failed += 1
                    continue
                failed += not holds
                print(f"{'ok  ' if holds else 'FAIL'} {page}:{n}: {shown}")
    print(f"{failed} claim(s) fail on {args.hardware}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
