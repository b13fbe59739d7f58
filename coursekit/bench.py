"""The course's one timing helper: how every snippet times host work and GPU work.

Each timing function returns a *summary*: a dict with the median, the 10th and 90th
percentiles, min, max, the number of samples, the unit and the clock that took the samples
("host" or "device"; ``summarize``, from the torch-free ``coursekit/stats.py``). Stored results
keep the spread, not only the median, so a reader can see how much a number moves between
repetitions.

- ``host_us(fn)``: host wall time per call, ``time.perf_counter`` over many calls with a
  device synchronize at both ends (what the CPU spends issuing the work).
- ``host_us_each(variants)``: ``host_us`` for several variants, interleaved round by round;
  ``host_us_rounds(variants)`` returns the same rounds' raw samples, for per-round ratios or
  differences between variants, and optionally ``issue`` samples taken in the same rounds.
- ``issue_us(fn)``: host time for one call to return, starting from an idle GPU.
- ``gpu_us(fn)``: device time of one call, ``triton.testing.do_bench`` (CUDA events, a warm-up,
  an L2 flush between calls). On a machine without a GPU it falls back to host timing.
- ``gpu_us_each(variants)``: ``gpu_us`` for several variants, interleaved round by round, so that
  drift in the GPU's clocks (power, heat over a long run) lands on every variant alike; sample ``i``
  of each comes from round ``i`` (kept as ``"rounds"``, for paired ratios between variants).
- ``graph_us(fn)``: device time of one call with launch gaps removed: ``fn`` is captured many
  times into one CUDA graph and replayed (``triton.testing.do_bench_cudagraph``).

The methodology page of the site explains the choices; see docs/methodology.md.
"""

from __future__ import annotations

import contextlib
import time

import torch

from coursekit.stats import summarize

__all__ = [
    "device_name",
    "gpu_us",
    "gpu_us_each",
    "graph_us",
    "host_us",
    "host_us_each",
    "host_us_rounds",
    "issue_us",
    "rate",
    "summarize",
]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _host_sample_us(fn, calls: int) -> float:
    """Microseconds per call over ``calls`` back-to-back calls, the device idle at both ends."""
    _sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync()
    return (time.perf_counter() - start) / calls * 1e6


def _issue_sample_us(fn) -> float:
    """Microseconds for one call to return, from an idle device; the device drained afterwards."""
    _sync()
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    _sync()
    return elapsed * 1e6


def host_us_rounds(
    variants: dict, calls: int = 1000, repeats: int = 30, warmup: int = 100, issue_per_round: int = 0
) -> dict:
    """The raw samples behind ``host_us_each``: ``{"host_us": {name: [us per call, one per round]},
    "issue_us": {name: [us, issue_per_round per round]}}``.

    ``variants`` maps a name to ``(fn, context_factory)``. A warm-up round first runs ``warmup``
    calls of each variant; then each of ``repeats`` rounds times ``calls`` back-to-back calls of
    every variant in turn, each inside ``context_factory()`` (e.g. ``torch.no_grad``), so that
    drift in the host's speed (frequency, other tenants) lands on every variant alike rather
    than on whichever ran last. Sample ``i`` of every variant comes from the same round, so
    ``a[i] / b[i]`` is a paired ratio. With ``issue_per_round``, each round then also takes that
    many ``issue_us`` samples of every variant (one call from an idle device).
    """
    host = {name: [] for name in variants}
    issue = {name: [] for name in variants}
    for fn, context in variants.values():  # the warm-up round
        with context():
            for _ in range(warmup):
                fn()
    for _ in range(repeats):
        for name, (fn, context) in variants.items():
            with context():
                host[name].append(_host_sample_us(fn, calls))
        for name, (fn, context) in variants.items():
            with context():
                issue[name] += [_issue_sample_us(fn) for _ in range(issue_per_round)]
    return {"host_us": host, "issue_us": issue}


def host_us_each(variants: dict, calls: int = 1000, repeats: int = 30, warmup: int = 100) -> dict:
    """``host_us`` for several variants, interleaved round by round (see ``host_us_rounds``):
    ``{name: summary}``, each summary keeping its per-round samples in order (``"rounds"``)."""
    rounds = host_us_rounds(variants, calls=calls, repeats=repeats, warmup=warmup)["host_us"]
    return {name: summarize(samples, "us", "host", rounds=True) for name, samples in rounds.items()}


def host_us(fn, calls: int = 1000, repeats: int = 30, warmup: int = 100) -> dict:
    """Host microseconds per call of ``fn``: ``calls`` back-to-back calls, timed ``repeats`` times."""
    return host_us_each({"fn": (fn, contextlib.nullcontext)}, calls=calls, repeats=repeats, warmup=warmup)["fn"]


def issue_us(fn, repeats: int = 30, warmup: int = 3) -> dict:
    """Host microseconds for one call of ``fn`` to return, starting from an idle GPU: the queue
    never fills, so this is the time to issue the call's kernels, not to run them."""
    for _ in range(warmup):
        fn()
    return summarize([_issue_sample_us(fn) for _ in range(repeats)], "us", "host")


def gpu_us(fn, warmup_ms: int = 25, rep_ms: int = 200) -> dict:
    """Device microseconds per call of ``fn`` (do_bench: events, warm-up, L2 flushed between calls)."""
    if not torch.cuda.is_available():
        return host_us(fn, calls=3, repeats=5, warmup=1)
    from triton.testing import do_bench

    times_ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
    return summarize([t * 1e3 for t in times_ms], "us", "device")


def gpu_us_each(variants: dict, rounds: int = 15, warmup_ms: int = 100, rep_ms: int = 25) -> dict:
    """``{name: summary}`` of device microseconds per call for each ``fn`` in ``variants`` (name to
    fn), timed in turn round after round: each round takes one sample per variant, the median of a
    short ``do_bench`` (events, L2 flushed between calls); the summaries keep their ``rounds``.
    Warm-up: ``warmup_ms`` of each variant before the first round."""
    if not torch.cuda.is_available():
        return {name: host_us(fn, calls=3, repeats=3, warmup=1) for name, fn in variants.items()}
    from triton.testing import do_bench

    for fn in variants.values():
        do_bench(fn, warmup=warmup_ms, rep=1)
    samples = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            samples[name].append(do_bench(fn, warmup=0, rep=rep_ms, return_mode="median") * 1e3)
    return {name: summarize(s, "us", "device", rounds=True) for name, s in samples.items()}


def graph_us(fn, rep_ms: int = 50) -> dict:
    """Device microseconds per call of ``fn`` replayed from a CUDA graph (no launch gaps)."""
    if not torch.cuda.is_available():
        return host_us(fn, calls=10, repeats=5, warmup=1)
    from triton.testing import do_bench_cudagraph

    times_ms = do_bench_cudagraph(fn, rep=rep_ms, return_mode="all")
    return summarize([t * 1e3 for t in times_ms], "us", "device")


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
        **({"clock": time_us["clock"]} if "clock" in time_us else {}),
    }


def device_name() -> str:
    """What the numbers were measured on, for a snippet's printed table."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (small sizes)"
