"""The course's one timing helper: how every snippet times host work and GPU work.

Each function returns a *summary*: a dict with the median, the 10th and 90th percentiles,
min, max, the number of samples and the unit. Stored results keep the spread, not only
the median, so a reader can see how much a number moves between repetitions.

- ``host_us(fn)``: host wall time per call, ``time.perf_counter`` over many calls with a
  device synchronize at both ends (what the CPU spends issuing the work).
- ``gpu_us(fn)``: device time of one call, ``triton.testing.do_bench`` (CUDA events, a warm-up,
  an L2 flush between calls). On a machine without a GPU it falls back to host timing.
- ``graph_us(fn)``: device time of one call with launch gaps removed: ``fn`` is captured many
  times into one CUDA graph and replayed (``triton.testing.do_bench_cudagraph``).

The methodology page of the site explains the choices; see docs/methodology.md.
"""

from __future__ import annotations

import statistics
import time

import torch


def summarize(samples: list[float], unit: str) -> dict:
    """Median and spread of timing samples, as stored in build_results/."""
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(float(s) for s in samples)
    n = len(ordered)

    def pct(q: float) -> float:
        # nearest-rank percentile: robust for the 10-30 samples a snippet typically takes
        return ordered[min(n - 1, max(0, round(q * (n - 1))))]

    return {
        "median": statistics.median(ordered),
        "p10": pct(0.10),
        "p90": pct(0.90),
        "min": ordered[0],
        "max": ordered[-1],
        "n": n,
        "unit": unit,
    }


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _host_sample_us(fn, calls: int) -> float:
    _sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync()
    return (time.perf_counter() - start) / calls * 1e6


def host_us(fn, calls: int = 1000, repeats: int = 30, warmup: int = 100) -> dict:
    """Host microseconds per call of ``fn``: ``calls`` back-to-back calls, timed ``repeats`` times."""
    for _ in range(warmup):
        fn()
    return summarize([_host_sample_us(fn, calls) for _ in range(repeats)], "us")


def host_us_each(variants: dict, calls: int = 1000, repeats: int = 30, warmup: int = 100) -> dict:
    """``host_us`` for several variants, interleaved round by round so that drift in the host's
    speed (frequency, other tenants) lands on every variant alike rather than on whichever ran last.

    ``variants`` maps a name to ``(fn, context_factory)``; each round times ``calls`` calls of
    ``fn`` inside ``context_factory()`` (e.g. ``torch.no_grad``), outside the timed loop's body.
    """
    samples = {name: [] for name in variants}
    for round_ in range(repeats + 1):  # round 0 is the warm-up
        for name, (fn, context) in variants.items():
            with context():
                if round_ == 0:
                    for _ in range(warmup):
                        fn()
                else:
                    samples[name].append(_host_sample_us(fn, calls))
    return {name: summarize(s, "us") for name, s in samples.items()}


def gpu_us(fn, warmup_ms: int = 25, rep_ms: int = 200) -> dict:
    """Device microseconds per call of ``fn`` (do_bench: events, warm-up, L2 flushed between calls)."""
    if not torch.cuda.is_available():
        return host_us(fn, calls=3, repeats=5, warmup=1)
    from triton.testing import do_bench

    times_ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return summarize([t * 1e3 for t in times_ms], "us")


def graph_us(fn, rep_ms: int = 50) -> dict:
    """Device microseconds per call of ``fn`` replayed from a CUDA graph (no launch gaps)."""
    if not torch.cuda.is_available():
        return host_us(fn, calls=10, repeats=5, warmup=1)
    from triton.testing import do_bench_cudagraph

    times_ms = do_bench_cudagraph(fn, rep=rep_ms, return_mode="all")
    return summarize([t * 1e3 for t in times_ms], "us")


def rate(time_us: dict, amount: float, unit: str) -> dict:
    """Turn a time summary into a rate summary (``amount`` per call, e.g. bytes or FLOPs).

    The fast end of the times is the high end of the rate, so the percentiles swap.
    """
    per_s = {k: amount / (time_us[k] * 1e-6) for k in ("median", "p10", "p90", "min", "max")}
    return {
        "median": per_s["median"],
        "p10": per_s["p90"],
        "p90": per_s["p10"],
        "min": per_s["max"],
        "max": per_s["min"],
        "n": time_us["n"],
        "unit": unit,
    }


def device_name() -> str:
    """What the numbers were measured on, for a snippet's printed table."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (small sizes)"
