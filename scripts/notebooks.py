"""The notebooks under docs/notebooks/ (coursekit/notebooks.py): one per module, generated from its
chapter, and the results notebook; each executed on the CPU, its outputs committed.

    python scripts/notebooks.py               # regenerate every module's notebook and execute all
    python scripts/notebooks.py m02 m07       # only these modules (and not the results notebook)
    python scripts/notebooks.py --check       # exit 1 naming each notebook whose cells differ from
                                              # what its chapter, snippets, figures.py and stored
                                              # results give now
    python scripts/notebooks.py --hardware X  # the figures from build_results/X/ (your own GPU's)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coursekit import chapters, notebooks  # noqa: E402
from coursekit import results as store  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="mNN (default: every module, and the results notebook)")
    parser.add_argument("--check", action="store_true", help="only compare the committed notebooks' cells")
    parser.add_argument("--hardware", default=store.REFERENCE_HARDWARE, help="the set the figures are drawn from")
    args = parser.parse_args(argv)
    known = list(chapters.chapters())
    unknown = [m for m in args.modules if m not in known]
    if unknown:
        parser.error(f"no module {', '.join(unknown)}; the modules are {', '.join(known)}")
    if args.hardware not in store.hardware_sets():
        parser.error(f"no set {args.hardware!r}; build_results/ holds {', '.join(store.hardware_sets())}")
    modules = args.modules or known
    if args.check:
        stale = notebooks.check(modules)
        for line in stale:
            print(line)
        if stale:
            print(" ".join(["regenerate them: python scripts/notebooks.py", *args.modules]))
        return 1 if stale else 0
    notebooks.regenerate(modules, results_notebook=not args.modules, hardware=args.hardware)
    return 0


if __name__ == "__main__":
    sys.exit(main())
