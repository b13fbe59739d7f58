"""The scoreboard: every program the course writes that races a peer, from stored results.

A snippet that races declares it in its data, as a list under ``"races"``; each race is one row:

    {"name": "Triton vector add, 2^28 fp32",   # what the course wrote
     "peer": "torch.add",                       # what it races, timed in the same run
     "ours": <summary>, "theirs": <summary>,    # coursekit.stats summaries, lower is better
     "bar": 0.98,                               # the course's target for the ratio theirs / ours
     "chapter": "part-k/07-triton.md"}          # the page that tells the story

``rows()`` reads every result of one hardware set and returns one row per race: the medians,
the ratio ``theirs / ours`` (above 1: ours is faster), its spread and the verdict against the
target. Where both summaries keep their ``rounds`` from the same interleaved rounds
(``coursekit.bench.gpu_us_each``), the ratio is the median of the per-round ratios and
``ratio_p10`` / ``ratio_p90`` their 10th and 90th percentiles ("paired"); otherwise the ratio of
the medians, ``ratio_p10`` from ours' slow end and theirs' fast end, ``ratio_p90`` from ours' fast
end and theirs' slow end.

The verdict follows the rule the pages' claims use, on the spread (:func:`verdict`):
``"meets"`` when the 10th percentile reaches the target, ``"misses"`` when the 90th percentile
falls short of it, ``"within noise"`` when the target lies inside the spread. Across runs: where
the same race (result key and race name) is stored in two or more GPU sets and their medians fall
on different sides of the target, the race is ``"within noise"`` in every one of them, whatever
its own spread says (:func:`flipped`). CPU sets never take part. A missed target is a row like
any other: the page and ``scripts/scoreboard.py --json`` report it.

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

MEETS, NOISE, MISSES = "meets", "within noise", "misses"
VERDICTS = (MEETS, NOISE, MISSES)


def rows(hardware: str = store.REFERENCE_HARDWARE, results_dir: Path = store.RESULTS_DIR) -> list[dict]:
    """One row per race stored for ``hardware``, in key order, then in the order stored."""
    out = []
    for doc, race in _races(hardware, results_dir):
        ours, theirs = race["ours"], race["theirs"]
        ratio, ratio_p10, ratio_p90, is_paired = race_ratio(race)
        out.append(
            {
                "name": reader_label(race["name"]),
                "peer": reader_label(race["peer"]),
                "ours": ours["median"],
                "theirs": theirs["median"],
                "unit": ours["unit"],
                "ratio": ratio,
                "ratio_p10": ratio_p10,
                "ratio_p90": ratio_p90,
                "paired": is_paired,
                "bar": race["bar"],
                "hardware": hardware,
                "chapter": race["chapter"],
                "key": doc["key"],
                "snippet": doc["snippet"],
                "_id": race_id(doc["key"], race),
            }
        )
    flips = set()
    if not store.is_cpu_set(hardware):
        medians = {hardware: {r["_id"]: r["ratio"] >= r["bar"] for r in out}}
        for other in store.hardware_sets(results_dir):
            if other != hardware and not store.is_cpu_set(other):
                medians[other] = {
                    race_id(doc["key"], race): median_meets(race) for doc, race in _races(other, results_dir)
                }
        flips = flipped(medians)
    for r in out:
        r["flipped"] = r.pop("_id") in flips
        r["verdict"] = verdict(r["ratio_p10"], r["ratio_p90"], r["bar"], r["flipped"])
    return out


def _races(hardware: str, results_dir: Path):
    """(document, race) for every race stored for ``hardware``, each checked (errors name the file)."""
    for path in store.result_files(hardware, results_dir):
        doc = store.load(path)
        for i, race in enumerate(doc["data"].get("races", [])):
            check_race(race, f"{path}: data.races.{i}")
            yield doc, race


def race_ratio(race: dict) -> tuple[float, float, float, bool]:
    """(ratio, its 10th percentile, its 90th percentile, paired) of one race, theirs / ours: see the
    module's docstring."""
    ours, theirs = race["ours"], race["theirs"]
    if len(ours.get("rounds", [])) == len(theirs.get("rounds", [])) > 0:
        per_round = paired(theirs, ours, operator.truediv, "x")
        return per_round["median"], per_round["p10"], per_round["p90"], True
    # the low end: ours at its slow end, theirs at its fast end; the high end the other way round
    return theirs["median"] / ours["median"], theirs["p10"] / ours["p90"], theirs["p90"] / ours["p10"], False


def median_meets(race: dict) -> bool:
    """Whether the race's median ratio reaches its target (what the cross-run rule compares)."""
    return race_ratio(race)[0] >= race["bar"]


def verdict(p10: float, p90: float, target: float, flipped: bool = False) -> str:
    """``"meets"`` when the ratio's 10th percentile reaches the target, ``"misses"`` when its 90th
    percentile falls short of it, ``"within noise"`` otherwise, or when the race's median falls on
    different sides of the target in two GPU runs (``flipped``)."""
    if flipped:
        return NOISE
    if p10 >= target:
        return MEETS
    if p90 < target:
        return MISSES
    return NOISE


def race_id(key: str, race: dict) -> tuple[str, str]:
    """What names one race across sets: its result key and its stored name."""
    return key, race["name"]


def flipped(medians: dict[str, dict[tuple[str, str], bool]]) -> set[tuple[str, str]]:
    """The races whose median verdicts differ between GPU sets. ``medians`` maps each GPU set (CPU
    sets are the caller's to leave out) to {race id: median reaches the target}; a race stored in one
    set only is never flipped."""
    seen: dict[tuple[str, str], set[bool]] = {}
    for by_race in medians.values():
        for rid, meets in by_race.items():
            seen.setdefault(rid, set()).add(meets)
    return {rid for rid, verdicts in seen.items() if len(verdicts) > 1}


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
