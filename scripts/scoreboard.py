"""Print the scoreboard: every program the course writes that races a peer, from stored results.

    python scripts/scoreboard.py                 # a table, reference hardware
    python scripts/scoreboard.py --json          # the same rows as a JSON list
    python scripts/scoreboard.py --hardware cpu --results-dir .cache/cpu-results

Each row's verdict is "meets" (the ratio's 10th percentile reaches the target), "misses" (its 90th
percentile falls short of it) or "within noise" (the target lies inside the spread, or the race's
median falls on different sides of it in two GPU runs): coursekit/scoreboard.py.
Exits 0 whatever the verdicts: a missed target is a row with "verdict": "misses", never hidden.
Exits 1 only when a stored race is malformed (the message names the file and field).
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coursekit import results as store  # noqa: E402
from coursekit import scoreboard  # noqa: E402

PUBLIC_KEYS = (
    "name", "peer", "ours", "theirs", "unit", "ratio", "ratio_p10", "ratio_p90", "bar", "verdict",
    "hardware", "chapter",
)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    parser.add_argument("--hardware", default=store.REFERENCE_HARDWARE)
    parser.add_argument("--results-dir", type=Path, default=store.RESULTS_DIR)
    args = parser.parse_args()
    try:
        rows = scoreboard.rows(args.hardware, args.results_dir)
    except store.ResultError as exc:
        print(f"scoreboard: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([{k: r[k] for k in PUBLIC_KEYS} for r in rows], indent=1))
        return 0
    if not rows:
        print(f"no races stored for {args.hardware} in {args.results_dir}")
        return 0
    for r in rows:
        verdict = r["verdict"].upper() if r["verdict"] == scoreboard.MISSES else r["verdict"]
        if r["flipped"]:
            verdict += ", runs disagree"
        print(
            f"{r['name']:<44} vs {r['peer']:<28} {r['ours']:10.2f} / {r['theirs']:10.2f} {r['unit']:<4}"
            f" ratio {r['ratio']:5.2f} (p10-p90 {r['ratio_p10']:.2f}-{r['ratio_p90']:.2f};"
            f" target {r['bar']:.2f}: {verdict})  {r['chapter']}"
        )
    counts = {v: sum(r["verdict"] == v for r in rows) for v in scoreboard.VERDICTS}
    print(
        f"{len(rows)} races on {args.hardware}: {counts[scoreboard.MEETS]} meet their target,"
        f" {counts[scoreboard.NOISE]} within noise, {counts[scoreboard.MISSES]} miss it."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
