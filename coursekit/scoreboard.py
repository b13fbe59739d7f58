"""The scoreboard: every program the course writes that races a peer, from stored results.

A snippet that races declares it in its data, as a list under ``"races"``; each race is one row:

    {"name": "Triton vector add, 2^28 fp32",   # what the course wrote
     "peer": "torch.add",                       # what it races, timed in the same run
     "ours": <summary>, "theirs": <summary>,    # coursekit.stats summaries, lower is better
     "bar": 0.98,                               # the ratio ours must reach (theirs / ours)
     "chapter": "part-k/07-triton.md"}          # the page that tells the story

``rows()`` reads every result of one hardware set and returns one row per race: the medians,
the ratio ``theirs / ours`` (above 1: ours is faster), its spread and whether the bar is met.
Where both summaries keep their ``rounds`` from the same interleaved rounds
(``coursekit.bench.gpu_us_each``), the ratio is the median of the per-round ratios and
``ratio_p10`` their 10th percentile ("paired"); otherwise the ratio of the medians, and
``ratio_p10`` from ours' slow end and theirs' fast end. A missed bar is a row like any
other, with ``meets`` false: the page and ``scripts/scoreboard.py --json`` report it.

Nothing here imports torch.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path

from coursekit import results as store
from coursekit.stats import paired

# The schema of a race lives with the rest of the schema (coursekit/results.py).
check_race = store.check_race


def rows(hardware: str = store.REFERENCE_HARDWARE, results_dir: Path = store.RESULTS_DIR) -> list[dict]:
    """One row per race stored for ``hardware``, in key order, then in the order stored."""
    out = []
    for path in store.result_files(hardware, results_dir):
        doc = store.load(path)
        for i, race in enumerate(doc["data"].get("races", [])):
            check_race(race, f"{path}: data.races.{i}")
            ours, theirs = race["ours"], race["theirs"]
            ratio, ratio_p10, is_paired = race_ratio(race)
            out.append(
                {
                    "name": reader_label(race["name"]),
                    "peer": reader_label(race["peer"]),
                    "ours": ours["median"],
                    "theirs": theirs["median"],
                    "unit": ours["unit"],
                    "ratio": ratio,
                    "ratio_p10": ratio_p10,
                    "paired": is_paired,
                    "bar": race["bar"],
                    "meets": ratio >= race["bar"],
                    "hardware": hardware,
                    "chapter": race["chapter"],
                    "key": doc["key"],
                    "snippet": doc["snippet"],
                }
            )
    return out


def race_ratio(race: dict) -> tuple[float, float, bool]:
    """(ratio, its 10th percentile, paired) of one race, theirs / ours: see the module's docstring."""
    ours, theirs = race["ours"], race["theirs"]
    if len(ours.get("rounds", [])) == len(theirs.get("rounds", [])) > 0:
        per_round = paired(theirs, ours, operator.truediv, "x")
        return per_round["median"], per_round["p10"], True
    # ours at its slow end, theirs at its fast end
    return theirs["median"] / ours["median"], theirs["p10"] / ours["p90"], False


# Names stored by an earlier edition of a snippet that speak of how the course was made, as the
# reader sees them (stored results are never edited: the snippet's next run stores the new name).
_READER_LABELS = [
    (re.compile(r"\bthe issue's bar, [\d.,]+ us\b"), "a fixed time target"),
    (re.compile(r"\bthe issue's bars?\b"), "the target"),
]


def reader_label(text: str) -> str:
    """A race's stored name or peer as the page shows it."""
    for pattern, label in _READER_LABELS:
        text = pattern.sub(label, text)
    return text
