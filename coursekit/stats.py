"""Summaries of timing samples: the median and spread that build_results/ stores for every timing.

Torch-free on purpose: the figures modules (``snippets/*/figures.py``) run at site-build time
without torch and summarise stored samples (e.g. paired per-round differences) the same way
the snippets summarised them when they measured. ``coursekit/bench.py`` re-exports ``summarize``.
"""

from __future__ import annotations

import operator
import statistics


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 to 1) of already sorted samples: robust for the 10-30
    samples a snippet typically takes, and always one of the samples."""
    if not ordered:
        raise ValueError("no samples")
    n = len(ordered)
    return ordered[min(n - 1, max(0, round(q * (n - 1))))]


CLOCKS = ("host", "device")


def summarize(samples: list[float], unit: str, clock: str | None = None, rounds: bool = False) -> dict:
    """Median and spread of timing samples, as stored in build_results/. ``clock``: "host"
    (``time.perf_counter``) or "device" (CUDA events, replays, the profiler's kernel times).
    ``rounds=True`` keeps the samples in order, as ``"rounds"``: variants timed in the same
    interleaved rounds then compare round by round (``paired``)."""
    if not samples:
        raise ValueError("no samples to summarize")
    if clock is not None and clock not in CLOCKS:
        raise ValueError(f"clock must be one of {CLOCKS}, not {clock!r}")
    ordered = sorted(float(s) for s in samples)
    summary = {
        "median": statistics.median(ordered),
        "p10": percentile(ordered, 0.10),
        "p90": percentile(ordered, 0.90),
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
        "unit": unit,
    }
    if clock is not None:
        summary["clock"] = clock
    if rounds:
        summary["rounds"] = [float(s) for s in samples]
    return summary


# Summaries combined at site-build time (snippets/*/figures.py): a spread for a value computed
# from two measurements timed apart, and error bars for plotly.
def error_bars(lows, mids, highs):
    """Error bars from the 10th to the 90th percentile around the median."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [h - m for m, h in zip(mids, highs)],
        "arrayminus": [m - lo for lo, m in zip(lows, mids)],
    }


def paired(a: dict, b: dict, op=operator.sub, unit: str | None = None) -> dict:
    """op(a_i, b_i) round by round, for two summaries timed in the same interleaved rounds: the
    spread claims are decided on. ``unit`` defaults to a's; the clock is kept where both share it."""
    ra, rb = a.get("rounds"), b.get("rounds")
    if not ra or not rb or len(ra) != len(rb):
        raise ValueError("the two summaries were not timed in the same rounds (no `rounds` of one length)")
    clock = a.get("clock") if a.get("clock") == b.get("clock") else None
    return summarize([op(x, y) for x, y in zip(ra, rb)], a["unit"] if unit is None else unit, clock)


def ratio_spread(a: dict, b: dict, unit: str = "") -> dict:
    """a / b for two summaries timed apart (no pairing): the median of the ratio of medians, and
    a spread that takes the worst case of both, so a claim on it holds only if it holds for every
    combination of the two spreads."""
    return {
        "median": a["median"] / b["median"],
        "p10": a["p10"] / b["p90"],
        "p90": a["p90"] / b["p10"],
        "min": a["min"] / b["max"],
        "max": a["max"] / b["min"],
        "n": min(a["n"], b["n"]),
        "unit": unit,
    }


def difference_spread(a: dict, b: dict) -> dict:
    """a - b for two summaries timed apart, with the worst-case spread (see ratio_spread)."""
    return {
        "median": a["median"] - b["median"],
        "p10": a["p10"] - b["p90"],
        "p90": a["p90"] - b["p10"],
        "min": a["min"] - b["max"],
        "max": a["max"] - b["min"],
        "n": min(a["n"], b["n"]),
        "unit": a["unit"],
    }
