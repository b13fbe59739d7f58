"""Every claim the pages make ({{ assert A op B }}), checked against one hardware set, all at once.

    python scripts/claims.py                          # the reference set
    python scripts/claims.py --hardware nvidia-h200-rerun

The site build stops at the first claim that fails; this lists them all, each decided on the set
asked for and on its numbers only (coursekit/page/claims.py: ``check``): "ok", "FAIL", or "MISSING"
where the set lacks an operand (it is never decided on the reference's numbers instead). Claims
inside code fences are not claims. Exits 1 if any fails or is written wrong, 2 for an unknown set.
It runs from any working directory.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coursekit import results as store  # noqa: E402
from coursekit.page import claims  # noqa: E402

DOCS, SNIPPETS = ROOT / "docs", ROOT / "snippets"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default=store.REFERENCE_HARDWARE)
    args = parser.parse_args(argv)
    known = store.hardware_sets(store.RESULTS_DIR)
    if args.hardware not in known:
        print(f"no hardware set {args.hardware!r} in {store.RESULTS_DIR}; the sets are: {', '.join(known)}")
        return 2
    counts = {"ok": 0, "FAIL": 0, "MISSING": 0, "ERROR": 0}
    for page in sorted(DOCS.rglob("*.md")):
        for c in claims.check(page, args.hardware, store.RESULTS_DIR, SNIPPETS, DOCS):
            where = f"{page.relative_to(ROOT)}:{c.line}"
            if c.error:
                word, said = "ERROR", c.error
            else:
                word = {True: "ok", False: "FAIL", None: "MISSING"}[c.verdict.holds]
                said = c.verdict.shown
            counts[word] += 1
            print(f"{word:7} {where}: {said}")
    print(
        f"{counts['ok']} claim(s) hold, {counts['FAIL']} fail, {counts['MISSING']} cannot be decided "
        f"(missing on {args.hardware}), {counts['ERROR']} written wrong"
    )
    return 1 if counts["FAIL"] or counts["ERROR"] else 0


if __name__ == "__main__":
    sys.exit(main())
