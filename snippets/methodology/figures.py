"""Figures and computed values for the methodology page: how far a measurement moves when it is
taken again, from stored data alone.

Two kinds of repetition are compared, each for host-side timings (``perf_counter`` around host
work) and device-side ones (CUDA events, graph replay, the profiler's kernel times), as each
timing summary records in its ``clock`` field (coursekit/bench.py):

- between two forced runs of the whole build at one commit: the reference set against the
  re-run stored beside it (``RERUN``), process 1 of each;
- between the fresh processes of one run (``--processes``, the ``runs`` of a result).
"""

import plotly.graph_objects as go

from coursekit.plotting import REFERENCE, RERUN, margin
from coursekit.stats import summarize

CLOCKS = ("host", "device")


def _summaries(node, path=""):
    """(path, summary) for every timing summary inside ``node``; list items by position."""
    if isinstance(node, dict):
        if "median" in node:
            yield path, node
            return
        for k, v in node.items():
            yield from _summaries(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _summaries(v, f"{path}[{i}]")


def _stats(values: list[float]) -> dict:
    """Median, 90th percentile and maximum of absolute percentage changes (coursekit.stats)."""
    if not values:
        return {"n": 0, "median_pct": 0.0, "p90_pct": 0.0, "max_pct": 0.0}
    s = summarize(values, "%")
    return {"n": s["n"], "median_pct": s["median"], "p90_pct": s["p90"], "max_pct": s["max"]}


def drift(results) -> dict:
    """How far each timing summary's median moved: between the two runs, and between processes.

    Between runs, a summary counts if both sets hold it at the same path with the same clock;
    the change is |rerun / reference - 1| in per cent. Between processes, the change is the range
    of a summary's medians over its processes, (max - min) / min, in per cent, beside its own
    10th-90th percentile width within process 1, (p90 - p10) / median; and, to compare like with
    like with the change between runs, the change from process 1 to process 2 alone."""
    sets = results.hardware_sets()
    rows = []
    if RERUN in sets and REFERENCE in sets:
        for key in sorted(set(results.keys(REFERENCE)) & set(results.keys(RERUN))):
            a = dict(_summaries(results(key, hardware=REFERENCE, process=1)))
            b = dict(_summaries(results(key, hardware=RERUN, process=1)))
            for path, s in a.items():
                t = b.get(path)
                clock = s.get("clock")
                if t is None or clock not in CLOCKS or t.get("clock") != clock or s["median"] <= 0:
                    continue
                rows.append(
                    {
                        "key": key,
                        "path": path,
                        "clock": clock,
                        "unit": s["unit"],
                        "reference": s["median"],
                        "rerun": t["median"],
                        "change_pct": abs(t["median"] / s["median"] - 1) * 100,
                    }
                )
    processes = []
    for key in results.keys(REFERENCE) if REFERENCE in sets else []:
        n = results.processes(key, REFERENCE)
        if n < 2:
            continue
        per = [dict(_summaries(results(key, hardware=REFERENCE, process=i))) for i in range(1, n + 1)]
        for path, s in per[0].items():
            medians = [p[path]["median"] for p in per if path in p]
            clock = s.get("clock")
            if len(medians) < n or clock not in CLOCKS or min(medians) <= 0:
                continue
            processes.append(
                {
                    "key": key,
                    "path": path,
                    "clock": clock,
                    "processes": n,
                    "between_pct": (max(medians) / min(medians) - 1) * 100,
                    "first_two_pct": abs(medians[1] / medians[0] - 1) * 100,
                    "within_pct": (s["p90"] - s["p10"]) / s["median"] * 100,
                }
            )
    # One number at a time: does the re-run's first process land inside the range of the
    # reference run's process medians (widened to its processes' 10th-90th percentile bands)?
    for r in rows:
        n = results.processes(r["key"], REFERENCE)
        per = [dict(_summaries(results(r["key"], hardware=REFERENCE, process=i))) for i in range(1, n + 1)]
        lo = min(p[r["path"]]["p10"] for p in per if r["path"] in p)
        hi = max(p[r["path"]]["p90"] for p in per if r["path"] in p)
        r["reference_processes"] = n
        r["inside_reference_spread"] = lo <= r["rerun"] <= hi
    out = {"reference": REFERENCE, "rerun": RERUN, "runs": rows, "processes": processes}
    for clock in CLOCKS:
        out[clock] = {
            "between_runs": _stats([r["change_pct"] for r in rows if r["clock"] == clock]),
            "between_processes": _stats([r["between_pct"] for r in processes if r["clock"] == clock]),
            "between_two_processes": _stats([r["first_two_pct"] for r in processes if r["clock"] == clock]),
            "within_process": _stats([r["within_pct"] for r in processes if r["clock"] == clock]),
        }
        several = [r for r in rows if r["clock"] == clock and r["reference_processes"] > 1]
        inside = sum(r["inside_reference_spread"] for r in several)
        out[clock]["rerun_inside_spread"] = {
            "n": len(several),
            "inside": inside,
            "outside": len(several) - inside,
            "inside_pct": 100 * inside / len(several) if several else 0.0,
        }
    return out


def _jitter(i: int) -> float:
    """A fixed, deterministic vertical spread for a strip plot (no randomness at build time)."""
    return ((i * 0.6180339887) % 1.0 - 0.5) * 0.5


def drift_figure(results):
    d = drift(results)
    fig = go.Figure()
    groups = [
        ("between the two runs", d["runs"], "change_pct"),
        ("between processes of one run", d["processes"], "between_pct"),
        ("within one process (p10 to p90)", d["processes"], "within_pct"),
    ]
    labels = []
    for label, rows, field in groups:
        for clock in CLOCKS:
            y0 = len(labels)
            labels.append(f"{clock}: {label}")
            picked = [r for r in rows if r["clock"] == clock]
            fig.add_trace(
                go.Scatter(
                    x=[float(f"{max(r[field], 0.01):.3g}") for r in picked],  # 3 digits: the page stays light
                    y=[round(y0 + _jitter(i), 2) for i in range(len(picked))],  # a spread within the row, not a value
                    mode="markers",
                    name=labels[-1],
                    marker={"symbol": "circle" if clock == "host" else "diamond", "size": 6, "opacity": 0.7},
                    # the summaries that moved 3 % or more are named; naming every one would weigh down the page
                    text=[f"{r['key']}: {r['path']}" if r[field] >= 3 else "" for r in picked],
                    hovertemplate="%{text}<br>%{x:.3g} %<extra>" + labels[-1] + "</extra>",
                    showlegend=False,
                )
            )
    fig.update_layout(
        xaxis={"type": "log", "title": "change of the median, per cent (log scale)"},
        yaxis={
            "tickvals": list(range(len(labels))),
            "ticktext": labels,
            "autorange": "reversed",
            "title": "clock: what changed",
        },
        height=120 + 45 * len(labels),
        margin=margin(l=280),
    )
    return fig


def _cores(affinity: str) -> int:
    """How many cores a ``cpu_affinity`` such as ``"0-15"`` or ``"0-3,8-11"`` names."""
    count = 0
    for part in str(affinity).split(","):
        lo, _, hi = part.strip().partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def host_sharing(results) -> dict:
    """How each result of the two H200 runs had the host: alone (one build worker, every core), or
    pinned to a share of the cores while other work could run beside it (``workers`` > 1, or an
    affinity narrower than the host, as when two build jobs ran at once, one per GPU). Read from
    each result's provenance; ``host_bound`` are the results measured in several processes."""
    out = {}
    for name, hardware in (("reference", REFERENCE), ("rerun", RERUN)):
        if hardware not in results.hardware_sets():
            continue
        shared, host_bound_shared, n, host_bound = [], [], 0, 0
        for key in results.keys(hardware):
            prov = results.document(key, hardware)["provenance"]
            n += 1
            several = int(prov.get("processes") or 1) > 1
            host_bound += several
            if int(prov.get("workers") or 1) > 1 or _cores(prov["cpu_affinity"]) < int(prov["cpu_count"]):
                shared.append(key)
                if several:
                    host_bound_shared.append(key)
        out[name] = {
            "results": n,
            "alone": n - len(shared),
            "shared": len(shared),
            "host_bound": host_bound,
            "host_bound_shared": len(host_bound_shared),
            "host_bound_shared_keys": ", ".join(host_bound_shared) or "none",
        }
    return out
