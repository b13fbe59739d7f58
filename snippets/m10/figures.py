"""Figures, computed values and printouts for module 10: dynamic shapes and recompilation on the H200.

``results(key)`` returns a stored result's data: "m10/sweep" (a compiled MLP block called over two
orders of batch sizes: seconds per call, compiles counted, what Dynamo logged), "m10/controls" (the
controls of dynamic shapes, and the recompile limit), "m10/kernels" (Inductor's static against its
dynamic kernels), "m10/unbacked" (.item() and nonzero) and "m10/bucketing" (a workload of requests
served exactly, bucketed or dynamic), plus "methodology/ceilings" (the copy and GEMM ceilings of the
same build) for the bucketing workload's floor. ``results(key, process=i)`` gives process i's data
(1-based) of the snippets measured in several processes (sweep, controls, unbacked).
``results(key, hardware=RUNS["second"])`` is the build's second forced run of the same snippets at
the same code; ``kernel_runs`` and the kernel figure set the two runs side by side where they
disagree (the small row counts). Each computed-value function reads only the results it needs, so
a number's provenance names only those. Differences of variants timed in the same interleaved
rounds are taken round by round (``coursekit.stats.paired``). Nothing here imports torch.
"""

import re
import textwrap

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, GREEN, ORANGE, RED, RUN_LABELS, RUNS, legend, margin
from coursekit.stats import error_bars, paired, summarize

ORDER_LABELS = {
    "ascending": "ascending from 1: 1, 2, 4, … 256",
    "eight_first": "8, 16, 1, then 2, 4, 32, … 256",
}
WAY_SHORT = {"exact": "exact", "pow2": "powers of two", "ladder": "two per octave", "dynamic": "dynamic=True"}
WAY_LABELS = {
    "exact": "exact lengths, static shapes",
    "pow2": "powers of two",
    "ladder": "two buckets per octave",
    "dynamic": "dynamic=True, no padding",
}
CONTROL_LABELS = {
    "default": "dynamic=None (the default)",
    "dynamic_false": "dynamic=False",
    "dynamic_true": "dynamic=True",
    "mark_dynamic": "mark_dynamic(x, 0)",
    "maybe_mark_dynamic": "maybe_mark_dynamic(x, 0)",
    "mark_unbacked": "mark_unbacked(x, 0)",
}
COLORS = {
    "ascending": BLUE,
    "eight_first": ORANGE,
    "compiled": RED,
    "static": BLUE,
    "dynamic": ORANGE,
    "eager": ORANGE,
    "compiled_position": BLUE,
    "past_the_limit": RED,
    "exact": "#7f7f7f",
    "pow2": BLUE,
    "ladder": GREEN,
    "floor": "grey",
}


# ---------------------------------------------------------------- helpers


def _every_process(results, key: str) -> list:
    """The stored data of ``key`` for each of its processes (1-based), process 1 first."""
    return [results(key, process=i) for i in range(1, results.processes(key) + 1)]


def _shifted(s: dict, by: float, unit: str = "") -> dict:
    """A summary plus a constant (a ratio minus one is the fraction it costs)."""
    return {**{k: s[k] + by for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _order(data: dict, name: str) -> dict:
    return next(o for o in data["orders"] if o["order"] == name)


def _case(data: dict, name: str) -> dict:
    return next(c for c in data["cases"] if c["case"] == name)


def _way(data: dict, name: str) -> dict:
    return next(w for w in data["ways"] if w["way"] == name)


def _sizes_text(sizes: list) -> str:
    return ", ".join(str(s) for s in sizes) if sizes else "none"


def _short(text: str) -> str:
    """A path that a stored message kept in part (cut mid-name by Dynamo's column layout) removed."""
    return re.sub(r"(?<=# )\S*/(?=\w+\.py:)", "", text)


# ---------------------------------------------------------------- computed values


def spike_facts(results) -> dict:
    """The sweep, per order: the graphs, where they were compiled, the compiled calls' seconds, the
    steady calls; ``compile_over_steady_worst``: the fastest compiled call over the 90th percentile
    of the steady calls of the same order (how many steady calls one compile is worth, at the
    least); ``first_use_ms``: in the ascending order, the first calls at the sizes from 16 up, which
    compiled nothing (``small_first_use_ms_hi``: the slowest first call at the new sizes below 16
    that compiled nothing, over every process)."""
    data = results("m10/sweep")
    out = {"orders": {}}
    for o in data["orders"]:
        compiled = [c for c in o["calls"] if c["compiled"]]
        spikes = [c["seconds"] for c in compiled]
        steady_p90_s = o["steady_us"]["p90"] * 1e-6
        out["orders"][o["order"]] = {
            "graphs": o["graphs"],
            "compiled_at": _sizes_text(o["compiled_at"]),
            "compile_call_s_lo": min(spikes),
            "compile_call_s_hi": max(spikes),
            "dynamo_compile_s_lo": min(c["compile_s"] for c in compiled),
            "dynamo_compile_s_hi": max(c["compile_s"] for c in compiled),
            "steady_us": o["steady_us"],
            "compile_over_steady_worst": min(spikes) / steady_p90_s,
            "calls": len(o["calls"]),
        }
    up = _order(data, "ascending")
    first_uses = [c for c in up["calls"] if c["repeat"] == 1 and not c["compiled"] and c["batch"] >= 16]
    out["first_use_ms"] = summarize([c["seconds"] * 1e3 for c in first_uses], "ms", "host")
    eight = _order(data, "eight_first")
    later = [c for c in eight["calls"] if c["repeat"] == 1 and not c["compiled"]]
    out["eight_first_first_use_ms_hi"] = max(c["seconds"] * 1e3 for c in later)
    out["warmup_compile_s"] = data["warmup_compile_s"]
    # over every process and both orders: the compiled calls, Dynamo's own compile times, the steady medians
    every = _every_process(results, "m10/sweep")
    compiled_calls = [c for r in every for o in r["orders"] for c in o["calls"] if c["compiled"]]
    steady = [o["steady_us"]["median"] for r in every for o in r["orders"]]
    firsts = [
        c["seconds"] * 1e3
        for r in every
        for c in _order(r, "ascending")["calls"]
        if c["repeat"] == 1 and not c["compiled"] and c["batch"] >= 16
    ]
    small_firsts = [  # the first calls at the new sizes below 16 that compiled nothing (4 and 8)
        c["seconds"] * 1e3
        for r in every
        for c in _order(r, "ascending")["calls"]
        if c["repeat"] == 1 and not c["compiled"] and c["batch"] < 16
    ]
    out["everywhere"] = {
        "compile_call_s_lo": min(c["seconds"] for c in compiled_calls),
        "compile_call_s_hi": max(c["seconds"] for c in compiled_calls),
        "dynamo_compile_s_lo": min(c["compile_s"] for c in compiled_calls),
        "dynamo_compile_s_hi": max(c["compile_s"] for c in compiled_calls),
        "steady_us_lo": min(steady),
        "steady_us_hi": max(steady),
        "first_use_ms_lo": min(firsts),
        "first_use_ms_hi": max(firsts),
        "small_first_use_ms_hi": max(small_firsts),
        "warmup_compile_s_lo": min(r["warmup_compile_s"] for r in every),
        "warmup_compile_s_hi": max(r["warmup_compile_s"] for r in every),
    }
    return out


def control_facts(results) -> dict:
    """The controls' table as text (where each compiled, x's size in each graph), and the host cost
    per call around the recompile limit, paired by round: a position past the limit minus eager
    (the failed guards), past the limit over eager, and eager over a compiled position."""
    data = results("m10/controls")
    out = {"table": {}}
    for row in data["table"]:
        out["table"][row["control"]] = {
            "graphs": row["graphs"],
            "compiled_at": _sizes_text(row["compiled_at"]),
            "x_in_graph": "; ".join(x.split("]")[0] + "]" for x in row["x_in_graph"]),
        }
    t = data["host_us"]
    out["past_minus_eager_us"] = paired(t["past_the_limit"], t["eager"])
    out["past_over_eager"] = paired(t["past_the_limit"], t["eager"], lambda a, b: a / b, "x")
    out["eager_over_compiled"] = paired(t["eager"], t["compiled_position"], lambda a, b: a / b, "x")
    out["duck"] = {key: x[0].split("]")[0] + "]" for key, x in data["duck_sizing"].items() if key.startswith("rows_")}
    lim = data["limit"]
    out["calls_past_limit"] = len(lim["positions"]) - lim["recompile_limit_in_effect"]
    out["graphs_at_end"] = lim["graphs_after_call"][-1]
    return out


def kernel_costs(results) -> dict:
    """Dynamic over static, as the fraction the dynamic kernel costs (ratio minus one), for every
    point; the range of the medians over the row lengths; and the two kernels' speeds in GB/s on the
    bytes they must move (x read once, y written once), and the time those bytes take at the copy
    ceiling of the same build (``floor_us``)."""
    data = results("m10/kernels")
    copy_Bps = results("methodology/ceilings")["copy"]["GBps"]["median"] * 1e9
    out = {}
    for case in data["cases"]:
        key = "rows" if case["case"] == "rows" else "length"
        entry = {}
        for p in case["points"]:
            moved = 2 * p["mib"] * 2**20  # x read, y written: the same size
            entry[str(p["rows"] if key == "rows" else p["row_length"])] = {
                "extra": _shifted(p["dynamic_over_static"], -1.0),
                "static_GBps": moved / (p["time_us"]["static"]["median"] * 1e3),
                "dynamic_GBps": moved / (p["time_us"]["dynamic"]["median"] * 1e3),
                "floor_us": moved / copy_Bps * 1e6,
            }
        ratios = [p["dynamic_over_static"]["median"] for p in case["points"]]
        entry["ratio_lo"], entry["ratio_hi"] = min(ratios), max(ratios)
        out[case["case"]] = entry
    return out


def kernel_runs(results) -> dict:
    """The row-count case in each of the build's two runs (``RUNS``, read by name): per row count the
    static and the dynamic kernel's median device time and their paired ratio; ``extra_lo``/``hi``:
    what the dynamic kernel costs at the largest size (ratio minus one), over both runs."""
    out = {}
    for run, hardware in RUNS.items():
        rows = _case(results("m10/kernels", hardware=hardware), "rows")
        out[run] = {
            str(p["rows"]): {
                "static_us": p["time_us"]["static"]["median"],
                "dynamic_us": p["time_us"]["dynamic"]["median"],
                "ratio": p["dynamic_over_static"],
            }
            for p in rows["points"]
        }
    largest = str(max(int(k) for k in out["first"]))
    extras = [out[run][largest]["ratio"]["median"] - 1.0 for run in RUNS]
    out["largest_rows"] = int(largest)
    out["extra_lo"], out["extra_hi"] = min(extras), max(extras)
    return out


def unbacked_facts(results) -> dict:
    """The .item() function's host time per call, paired by round: two graphs minus one graph, and
    the one-graph variant minus eager."""
    t = results("m10/unbacked")["host_us"]
    return {
        "two_minus_one_us": paired(t["compiled_two_graphs"], t["compiled_one_graph"]),
        "one_minus_eager_us": paired(t["compiled_one_graph"], t["eager"]),
        "two_minus_eager_us": paired(t["compiled_two_graphs"], t["eager"]),
    }


def _bucket(length: int, buckets: list | None) -> int:
    return length if buckets is None else next(b for b in buckets if b >= length)


def bucket_facts(results) -> dict:
    """The bucketing workload against a floor. The MLP's weights (``params``) are read once per
    request and each token costs 2 FLOPs per weight of the two matrices, so a request of t tokens
    does t FLOPs per byte of bf16 weights: it is bound by the weights below the ridge (the GEMM
    ceiling over the copy ceiling, in tokens) and by the math above it. The floor of a way is the sum
    over its (padded) requests of the larger of the two times; per way also the measured time over
    that floor, the TFLOP/s on the real and on the padded tokens, the requests below the ridge, the
    padding as a fraction, and the time over the dynamic way as a fraction."""
    data = results("m10/bucketing")
    ceilings = results("methodology/ceilings")
    copy_Bps = ceilings["copy"]["GBps"]["median"] * 1e9
    gemm_flops = ceilings["gemm_shapes"]["4096^3"]["TFLOPs"]["median"] * 1e12
    d = data["d_model"]
    matrix_params = 2 * d * 4 * d  # up and down projections: the FLOPs
    params = matrix_params + 4 * d + d + 2 * d  # with the biases and the norm's weight and bias: the bytes
    weight_bytes = 2 * params  # bf16
    lengths = data["workload"]["lengths"]
    out = {
        "params_M": params / 1e6,
        "weights_MB": weight_bytes / 1e6,
        "ridge_tokens": gemm_flops / copy_Bps * weight_bytes / (2 * matrix_params),
        "copy_GBps": copy_Bps / 1e9,
        "gemm_TFLOPs": gemm_flops / 1e12,
        "real_tokens": sum(lengths),
        "ways": {},
    }
    for w in data["ways"]:
        padded = [_bucket(n, w["buckets"]) for n in lengths]
        floor_s = sum(max(2 * matrix_params * t / gemm_flops, weight_bytes / copy_Bps) for t in padded)
        time_s = w["time_us"]["median"] * 1e-6
        out["ways"][w["way"]] = {
            "floor_ms": floor_s * 1e3,
            "over_floor": time_s / floor_s,
            "real_TFLOPs": 2 * matrix_params * sum(lengths) / time_s / 1e12,
            "padded_TFLOPs": 2 * matrix_params * sum(padded) / time_s / 1e12,
            "below_ridge": sum(2 * matrix_params * t / gemm_flops < weight_bytes / copy_Bps for t in padded),
            "waste": w["padding_waste"],
            "extra_time": _shifted(w["time_over_dynamic"], -1.0),
            "graphs": w["graphs"],
        }
    return out


# ---------------------------------------------------------------- printouts of stored facts


def _wrapped(text: str) -> str:
    """A long log line broken before each source comment ("  # ..."), runs of padding spaces cut."""
    lines = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        line = re.sub(r" {2,}# ", "\n" + indent + "# ", line.rstrip())
        lines.append(re.sub(r" (\(user code shown|and \()", "\n" + indent + "  \\1", line))
    return "\n".join(lines)


def _graph_block(title: str, lines: list[str]) -> str:
    return "\n".join([title, *("    " + line for line in lines)])


def sweep_text(results) -> dict:
    """What Dynamo logged during the sweep's second order (8, 16, then 1), as the H200 run stored it:
    each graph's input guards (dispatch keys left out), the symbol it created, the recompile reasons."""
    eight = _order(results("m10/sweep"), "eight_first")
    graphs = []
    for i, (x, guards, at) in enumerate(zip(eight["x_in_graph"], eight["x_guards"], eight["compiled_at"])):
        shown = [re.sub(r"DispatchKeySet\([^)]*\), ", "", g) for g in guards]  # the same for every graph
        graphs.append(_graph_block(f"graph {i}, compiled at batch {at}: x is {x.split(']')[0]}]", shown))
    return {
        "guards": "\n\n".join(graphs),
        "reasons": "\n\n".join(_wrapped(_short(r)) for r in eight["recompile_reasons"]),
        "symbols": "\n".join(eight["symbols"]),
    }


def control_text(results) -> dict:
    """The controls' messages: mark_dynamic's error on a dimension the model fixes, the warning at the
    recompile limit, and the two hard failures past it."""
    con = results("m10/controls")
    mark_error = next(s for s in con["specialised"] if s["control"] == "mark_dynamic")["error"]
    lim = con["limit"]
    warning = _wrapped(_short(lim["warnings"][0]))
    return {
        "mark_dynamic_error": f"{mark_error['type']}: {mark_error['message'].strip()}",
        "limit_warning": warning,
        "limit_errors": "\n".join(
            f"{name}: call {lim[name]['call']} raises {lim[name]['type']}: {lim[name]['message']}"
            for name in ("fail_on_recompile_limit_hit", "fullgraph")
        ),
    }


def unbacked_text(results) -> dict:
    """What torch._dynamo.explain reported for .item() and nonzero: the breaks and the graphs."""
    unb = results("m10/unbacked")

    def graphs_of(key: str) -> str:
        return "\n\n".join(_graph_block(f"graph {i}", g) for i, g in enumerate(unb[key]["graph_code"]))

    def breaks_of(key: str) -> str:
        return "\n".join(
            f"break at: {b['line']}\n  reason: {b['reason']}\n  " + "\n  ".join(b["detail"][:2])
            for b in unb[key]["breaks"]
        )

    error = unb["item_captured_fullgraph_error"]
    return {
        "item_default": breaks_of("item_default") + "\n\n" + graphs_of("item_default"),
        "item_checked": graphs_of("item_checked"),
        "nonzero_default": breaks_of("nonzero_default"),
        "nonzero_captured": graphs_of("nonzero_captured"),
        "fullgraph_error": f"{error['type']}: {error['message']}",
    }


def kernel_text(results) -> dict:
    """The kernels Inductor wrote for each case: the dynamic graph's, and the static graph's at the first
    shape, with their signatures and the sizes written into them."""
    lines = []
    for case in results("m10/kernels")["cases"]:
        dyn = case["dynamic"]["kernels"][0]
        first = case["points"][0]
        static = first["static"]["kernels"][0]
        lines.append(f"{case['case']}: dynamic graph, x is {case['dynamic']['x_in_graph'][0].split(']')[0]}]")
        lines.append(f"  {dyn['signature']}")
        lines.append(f"    sizes written in: {', '.join(dyn['constant_sizes']) or 'none'}")
        lines.append(
            f"{case['case']}: static graph at {first['rows']} x {first['row_length']}, "
            f"x is {first['static']['x_in_graph'][0].split(']')[0]}]"
        )
        lines.append(f"  {static['signature']}")
        lines.append(f"    sizes written in: {', '.join(static['constant_sizes']) or 'none'}")
        lines.append("")
    return {"kernels": "\n".join(lines).rstrip()}


# ---------------------------------------------------------------- figures


def spikes(results) -> go.Figure:
    """Seconds per call over the sequence of calls, one panel per order of batch sizes: the median
    over the processes, whiskers from the fastest to the slowest process; the calls during which
    Dynamo compiled a graph marked. Log scale: a compile and a steady call differ by thousands."""
    runs = _every_process(results, "m10/sweep")
    names = [o["order"] for o in runs[0]["orders"]]
    fig = make_subplots(
        rows=len(names),
        cols=1,
        shared_xaxes=False,
        vertical_spacing=0.22,
        subplot_titles=[ORDER_LABELS.get(n, n) for n in names],
    )
    for row, name in enumerate(names, 1):
        per_process = [_order(r, name)["calls"] for r in runs]
        calls = per_process[0]
        xs = [c["call"] for c in calls]
        samples = [sorted(p[i]["seconds"] for p in per_process) for i in range(len(calls))]
        mids = [s[len(s) // 2] for s in samples]
        lows, highs = [s[0] for s in samples], [s[-1] for s in samples]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=mids,
                mode="lines+markers",
                name="one call (median over the processes)",
                legendgroup="calls",
                showlegend=row == 1,
                line={"color": COLORS[name], "width": 1},
                marker={"size": 6},
                error_y=error_bars(lows, mids, highs),
                customdata=[
                    [c["batch"], c["repeat"], "compiled a graph" if c["compiled"] else "no compile"] for c in calls
                ],
                hovertemplate="call %{x}: batch %{customdata[0]}, call %{customdata[1]} at this size<br>"
                "%{y:.4f} s, %{customdata[2]}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        compiled = [i for i, c in enumerate(calls) if c["compiled"]]
        fig.add_trace(
            go.Scatter(
                x=[xs[i] for i in compiled],
                y=[mids[i] for i in compiled],
                mode="markers+text",
                text=[f"batch {calls[i]['batch']}" for i in compiled],
                textposition="middle right",
                name="Dynamo compiled a graph during this call",
                legendgroup="compiled",
                showlegend=row == 1,
                marker={"color": COLORS["compiled"], "size": 13, "symbol": "star"},
                customdata=[[calls[i]["compile_s"]] for i in compiled],
                hovertemplate="call %{x}: compiled; Dynamo timed the compile at %{customdata[0]:.2f} s"
                " (process 1)<extra></extra>",
            ),
            row=row,
            col=1,
        )
        firsts = [c for c in calls if c["repeat"] == 1]
        fig.update_xaxes(
            tickvals=[c["call"] for c in firsts],
            ticktext=[str(c["batch"]) for c in firsts],
            title_text=f"batch size of the call ({runs[0]['repetitions']} calls at each size, in the order made)",
            row=row,
            col=1,
        )
        fig.update_yaxes(type="log", dtick=1, tickformat="~g", title_text="seconds per call (log)", row=row, col=1)
    fig.update_layout(
        height=700,
        margin=margin(t=40, b=40),
        legend=legend(-0.1, title={"text": "whiskers: fastest to slowest process", "side": "top"}),
        hovermode="closest",
    )
    return fig


def kernel_cost(results) -> go.Figure:
    """The dynamic kernel's device time over the static one's, paired round by round, at each size,
    for the two cases: the number of rows symbolic (the row length fixed by the weights), and the row
    length symbolic (the reduction's length unknown at compile time). Both forced runs of the build
    (``RUNS``), side by side: at the small row counts they disagree."""
    per_run = {run: results("m10/kernels", hardware=hardware) for run, hardware in RUNS.items()}
    first = per_run["first"]
    rows_case, length_case = _case(first, "rows"), _case(first, "row_length")
    width = rows_case["points"][0]["row_length"]
    elements = length_case["points"][0]["rows"] * length_case["points"][0]["row_length"]
    titles = {
        "rows": f"rows vary, rows of {width:,} (the norm has weights)",
        "row_length": f"the row length varies, {elements:,} elements (no weights)",
    }
    xkey = {"rows": "rows", "row_length": "row_length"}
    xtitle = {"rows": "rows (log)", "row_length": "row length: the reduction (log)"}
    styles = {
        "first": {"color": COLORS["dynamic"], "symbol": "circle", "dash": "solid", "shift": 0.97},
        "second": {"color": COLORS["static"], "symbol": "diamond-open", "dash": "dot", "shift": 1.03},
    }
    cases = [c["case"] for c in first["cases"]]
    fig = make_subplots(
        rows=1, cols=len(cases), subplot_titles=[titles.get(c, c) for c in cases], horizontal_spacing=0.1
    )
    for col, name in enumerate(cases, 1):
        for run, data in per_run.items():
            style = styles[run]
            points = sorted(_case(data, name)["points"], key=lambda p: p[xkey[name]])
            r = [p["dynamic_over_static"] for p in points]
            mids = [s["median"] for s in r]
            fig.add_trace(
                go.Scatter(
                    x=[p[xkey[name]] * style["shift"] for p in points],  # nudged apart so the whiskers show
                    y=mids,
                    mode="lines+markers",
                    name=f"dynamic over static, paired by round ({RUN_LABELS[run]})",
                    legendgroup=run,
                    showlegend=col == 1,
                    line={"color": style["color"], "dash": style["dash"]},
                    marker={"size": 9, "symbol": style["symbol"], "color": style["color"]},
                    error_y=error_bars([s["p10"] for s in r], mids, [s["p90"] for s in r]),
                    customdata=[
                        [
                            p[xkey[name]],
                            p["time_us"]["static"]["median"],
                            p["time_us"]["dynamic"]["median"],
                            p["static"]["kernels"][0]["kind"],
                            p["mib"],
                        ]
                        for p in points
                    ],
                    hovertemplate="%{customdata[0]:,}: dynamic/static %{y:.3f}<br>static %{customdata[1]:.1f} µs ("
                    "%{customdata[3]}), dynamic %{customdata[2]:.1f} µs<br>x is %{customdata[4]:.0f} MiB"
                    "<extra>" + RUN_LABELS[run] + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=1.0, line_dash="dash", line_color=COLORS["floor"], row=1, col=col)
        ticks = sorted(p[xkey[name]] for p in _case(first, name)["points"])
        fig.update_xaxes(
            type="log", title_text=xtitle[name], tickvals=ticks, ticktext=[f"{t:,}" for t in ticks], row=1, col=col
        )
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_yaxes(title_text="dynamic time over static time (device)", row=1, col=1)
    fig.update_layout(
        height=460,
        margin=margin(t=40, b=40),
        legend=legend(-0.2, whiskers=True),
        hovermode="closest",
    )
    return fig


def limit_cost(results) -> go.Figure:
    """Host time per call of the decode-style function: at a position with a graph, eager, and at a
    position past the recompile limit (every cached graph's guards fail, then eager). Bars: process
    1's median and 10th to 90th percentile; circles: each process's median."""
    runs = _every_process(results, "m10/controls")
    order = ("compiled_position", "eager", "past_the_limit")
    labels = {
        "compiled_position": "a compiled position",
        "eager": "eager (not compiled)",
        "past_the_limit": "past the limit",
    }
    fig = go.Figure()
    for x, name in enumerate(order):
        s = runs[0]["host_us"][name]
        fig.add_trace(
            go.Bar(
                x=[labels[name]],
                y=[s["median"]],
                name=labels[name],
                marker={"color": COLORS[name]},
                error_y={**error_bars([s["p10"]], [s["median"]], [s["p90"]]), "color": "black"},
                hovertemplate="%{y:.1f} µs per call (process 1)<extra>" + labels[name] + "</extra>",
                showlegend=False,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[labels[name]] * len(runs),
                y=[r["host_us"][name]["median"] for r in runs],
                mode="markers",
                marker={"color": "black", "symbol": "circle-open", "size": 9},
                name="each process's median",
                legendgroup="procs",
                showlegend=x == 0,
                hovertemplate="%{y:.1f} µs<extra>" + labels[name] + "</extra>",
            )
        )
    fig.update_yaxes(title_text="host time per call (µs)", rangemode="tozero")
    fig.update_xaxes(title_text="position of the call")
    fig.update_layout(
        height=380,
        margin=margin(t=10, b=40),
        legend=legend(-0.15, whiskers=True),
        hovermode="closest",
        bargap=0.45,
    )
    return fig


def bucket_tradeoff(results) -> go.Figure:
    """Left: graphs compiled against padding waste, one point per way. Right: the device time of the
    whole workload per way (median, 10th to 90th percentile over the rounds) and its floor."""
    data = results("m10/bucketing")
    facts = bucket_facts(results)
    ways = [w["way"] for w in data["ways"]]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["graphs compiled against padding", "device time of the whole workload"],
        horizontal_spacing=0.14,
    )
    for name in ways:
        w = _way(data, name)
        label = WAY_LABELS.get(name, name)
        fig.add_trace(
            go.Scatter(
                x=[w["graphs"]],
                y=[100 * w["padding_waste"]],
                mode="markers+text",
                text=[
                    WAY_SHORT.get(name, name) + (f" ({w['eager_requests']} ran eagerly)" if w["eager_requests"] else "")
                ],
                textposition="top center",
                marker={"size": 14, "color": COLORS.get(name, COLORS["dynamic"])},
                name=label,
                legendgroup=name,
                customdata=[[w["eager_requests"], w["compile_s"]]],
                hovertemplate="%{x} graphs, padding %{y:.1f} per cent of the real tokens<br>"
                "requests run eagerly: %{customdata[0]}; compile seconds, summed: %{customdata[1]:.1f}"
                "<extra>" + label + "</extra>",
            ),
            row=1,
            col=1,
        )
        t = w["time_us"]
        mid = t["median"] / 1e3
        fig.add_trace(
            go.Bar(
                x=[WAY_SHORT.get(name, name)],
                y=[mid],
                marker={"color": COLORS.get(name, COLORS["dynamic"])},
                error_y={**error_bars([t["p10"] / 1e3], [mid], [t["p90"] / 1e3]), "color": "black"},
                name=label,
                legendgroup=name,
                showlegend=False,
                hovertemplate="%{y:.2f} ms per pass over the workload<extra>" + label + "</extra>",
            ),
            row=1,
            col=2,
        )
    fig.add_trace(
        go.Scatter(
            x=[WAY_SHORT.get(n, n) for n in ways],
            y=[facts["ways"][n]["floor_ms"] for n in ways],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 30, "color": "black", "line": {"width": 3}},
            name="floor: the weights' read or the math, per request",
            hovertemplate="floor %{y:.2f} ms<extra></extra>",
        ),
        row=1,
        col=2,
    )
    most_graphs = max(w["graphs"] for w in data["ways"])
    most_waste = max(100 * w["padding_waste"] for w in data["ways"])
    fig.update_xaxes(title_text="graphs compiled", range=[-1.5, most_graphs + 2.5], row=1, col=1)
    fig.update_yaxes(title_text="padding, in per cent of the real tokens", range=[-4, most_waste * 1.25], row=1, col=1)
    fig.update_yaxes(title_text="ms per pass (device)", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="way of bucketing", row=1, col=2)
    fig.update_layout(
        height=470,
        margin=margin(t=40, b=40),
        legend=legend(-0.22, whiskers=True),
        hovermode="closest",
        showlegend=True,
    )
    return fig


def compile_both_runs(results) -> dict:
    """The sweep's compiling calls (seconds, wall time of the call) over both of the build's runs
    (``RUNS``, read by name), every process and both orders: ``compile_call_s_lo``/``hi``, so that a
    sentence about what a compile costs holds on either run."""
    seconds = [
        c["seconds"]
        for hardware in RUNS.values()
        for i in range(1, results.processes("m10/sweep", hardware=hardware) + 1)
        for o in results("m10/sweep", hardware=hardware, process=i)["orders"]
        for c in o["calls"]
        if c["compiled"]
    ]
    return {"compile_call_s_lo": min(seconds), "compile_call_s_hi": max(seconds)}


# ---------------------------------------------------------------- printouts broken to the page's width


def _fit(text: str, width: int = 76) -> str:
    """Each line longer than ``width`` broken at spaces, continued four columns under its indent."""
    out = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()))
        if len(line) <= width:
            out.append(line)
            continue
        out += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out)


def page_text(results) -> dict:
    """The sweep's and the unbacked snippet's printouts as the page shows them, lines broken to fit:
    ``guards_symbolic`` the symbolic graph's guards alone, ``guards`` every graph's, ``reasons`` the
    recompile reasons with the source lines they quote, ``fullgraph_error`` the unbacked error."""
    sweep = sweep_text(results)
    return {
        "guards_symbolic": _fit(sweep["guards"].split("\n\n")[1]),
        "guards": _fit(sweep["guards"]),
        "reasons": _fit(sweep["reasons"]),
        "fullgraph_error": _fit(unbacked_text(results)["fullgraph_error"]),
    }
