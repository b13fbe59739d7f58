"""Figures and computed values for module 06: what Inductor's scheduler fused, the bytes it counts
against the least the math needs, and the rate it reached against the copy ceiling.

``results(key)`` returns a stored result's data: "m06/norm_block" (snippets/m06/norm_block.py),
"m06/token_shift" (snippets/m06/token_shift.py) and "methodology/ceilings" (the copy bandwidth
measured in the same build). The floor of a block is its minimum bytes at that copy bandwidth;
``derived`` computes every ratio against it once, with a worst-case spread where two
measurements taken apart are combined.
"""

import re

import plotly.graph_objects as go

BAR = 0.5  # the module's bar: a fix must close at least this fraction of the gap it shows

VARIANTS = {  # short name: label
    "norm_eager": "norm block, eager",
    "norm_compiled": "norm block, torch.compile",
    "shift_original": "token shift, torch.compile",
    "shift_rewritten": "token shift rewritten, torch.compile",
}


def _ratio(a: dict, b: dict, unit: str = "") -> dict:
    """a / b for two positive summaries timed apart (no pairing): the ratio of the medians, and
    a spread that takes the worst case of both, so that a claim on it holds only if it holds for
    every combination of the two spreads."""
    return {
        "median": a["median"] / b["median"],
        "p10": a["p10"] / b["p90"],
        "p90": a["p90"] / b["p10"],
        "min": a["min"] / b["max"],
        "max": a["max"] / b["min"],
        "n": min(a["n"], b["n"]),
        "unit": unit,
    }


def _minus(a: dict, b: dict) -> dict:
    """a - b for two summaries timed apart, with the worst-case spread (see _ratio)."""
    return {
        "median": a["median"] - b["median"],
        "p10": a["p10"] - b["p90"],
        "p90": a["p90"] - b["p10"],
        "min": a["min"] - b["max"],
        "max": a["max"] - b["min"],
        "n": min(a["n"], b["n"]),
        "unit": a["unit"],
    }


def _quotient(a: dict, b: dict, unit: str = "") -> dict:
    """a / b where a may be negative and b is positive: the worst case over both spreads' ends
    (a negative numerator turns the corners that _ratio assumes)."""
    out = {"median": a["median"] / b["median"], "n": min(a["n"], b["n"]), "unit": unit}
    for lo, hi in (("p10", "p90"), ("min", "max")):
        corners = [x / y for x in (a[lo], a[hi]) for y in (b[lo], b[hi])]
        out[lo], out[hi] = min(corners), max(corners)
    return out


def _over(amount: float, s: dict, unit: str) -> dict:
    """amount / s for a positive summary s: the percentiles swap (the fast end of a time is the
    high end of a rate, the high end of a rate the short end of a floor)."""
    return {
        "median": amount / s["median"],
        "p10": amount / s["p90"],
        "p90": amount / s["p10"],
        "min": amount / s["max"],
        "max": amount / s["min"],
        "n": s["n"],
        "unit": unit,
    }


def _times(s: dict, factor: float, unit: str) -> dict:
    """A summary scaled by a positive constant."""
    return {**{k: s[k] * factor for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _variants(results) -> dict:
    """Each variant's time, the bytes its kernels move as counted, the minimum and x's size."""
    norm, shift = results("m06/norm_block"), results("m06/token_shift")
    original, rewritten = shift["variants"]["original"], shift["variants"]["rewritten"]
    return {
        "norm_eager": {
            "time_us": norm["time_us"]["eager"],
            "bytes": norm["eager_bytes"],  # eager's kernels: layer_norm, gelu, add, counted by hand
            "min_bytes": norm["min_bytes"],
            "tensor_bytes": norm["tensor_bytes"],
            "kernels": 3,  # eager launches one kernel per op: layer_norm, gelu, add
        },
        "norm_compiled": {
            "time_us": norm["time_us"]["compiled"],
            "bytes": norm["inductor_bytes"],
            "min_bytes": norm["min_bytes"],
            "tensor_bytes": norm["tensor_bytes"],
            "kernels": norm["kernel_count"],
        },
        "shift_original": {
            "time_us": original["time_us"],
            "bytes": original["inductor_bytes"],
            "min_bytes": shift["min_bytes"],
            "tensor_bytes": shift["tensor_bytes"],
            "kernels": original["kernel_count"],
        },
        "shift_rewritten": {
            "time_us": rewritten["time_us"],
            "bytes": rewritten["inductor_bytes"],
            "min_bytes": shift["min_bytes"],
            "tensor_bytes": shift["tensor_bytes"],
            "kernels": rewritten["kernel_count"],
        },
    }


def derived(results) -> dict:
    """Every variant against its floor (the minimum bytes at the copy bandwidth of
    methodology/ceilings), and the token-shift rewrite against the module's bar.

    Per variant: ``floor_us``; ``of_copy_peak``, the floor over the measured time (equal to the
    rate on the minimum bytes over the copy bandwidth: 1 means the block ran as fast as a copy of
    its least bytes); ``counted_GBps`` and ``counted_of_copy_peak``, the rate on the bytes its
    kernels move as counted (Inductor's metric, or eager's by hand), over the same copy bandwidth;
    ``tensors``, those bytes in tensors of x's size.

    The rewrite: ``bytes_gap_closed``, the fraction of the counted bytes above the minimum that it
    removes (exact: both counts are deterministic), and ``time_gap_closed``, the fraction of the
    time above the floor that it removes, (original - rewritten) / (original - floor), with the
    worst case of the three spreads. ``meets_bar``: whether the worst case of the time fraction
    reaches BAR. ``predicted_us``: the rewritten variant's counted bytes at the rate the
    original's two kernels moved theirs, what a cost model that counts bytes would expect.
    """
    copy = results("methodology/ceilings")["copy"]["GBps"]
    norm, shift = results("m06/norm_block"), results("m06/token_shift")
    out = {
        "copy_GBps": copy,
        "copy_same_size_GBps": norm["GBps"]["copy"],  # the snippet's own copy of x, 128 MiB
        "copy_same_size_of_peak": _ratio(norm["GBps"]["copy"], copy),
    }
    for name, v in _variants(results).items():
        floor = _over(v["min_bytes"] / 1e3, copy, "us")  # bytes / (GB/s * 1e3) = us
        counted = _over(v["bytes"] / 1e3, v["time_us"], "GB/s")
        out[name] = {
            "label": VARIANTS[name],
            "kernels": v["kernels"],
            "floor_us": floor,
            "time_over_floor": _ratio(v["time_us"], floor),
            "of_copy_peak": _ratio(floor, v["time_us"]),
            "GBps": _over(v["min_bytes"] / 1e3, v["time_us"], "GB/s"),
            "counted_GBps": counted,
            "counted_of_copy_peak": _ratio(counted, copy),
            "bytes_MB": v["bytes"] / 1e6,
            "min_MB": v["min_bytes"] / 1e6,
            "tensors": v["bytes"] / v["tensor_bytes"],
            "min_tensors": v["min_bytes"] / v["tensor_bytes"],
            "excess_bytes": v["bytes"] - v["min_bytes"],
        }
    out["norm_speedup"] = _ratio(norm["time_us"]["eager"], norm["time_us"]["compiled"])
    out["norm_saved_us"] = _minus(norm["time_us"]["eager"], norm["time_us"]["compiled"])

    original, rewritten = shift["variants"]["original"], shift["variants"]["rewritten"]
    floor = out["shift_original"]["floor_us"]
    gap = _minus(original["time_us"], floor)
    closed = _minus(original["time_us"], rewritten["time_us"])
    fraction = _quotient(closed, gap)
    bytes_fraction = (original["inductor_bytes"] - rewritten["inductor_bytes"]) / (
        original["inductor_bytes"] - shift["min_bytes"]
    )
    predicted = _times(original["time_us"], rewritten["inductor_bytes"] / original["inductor_bytes"], "us")
    out["shift"] = {
        "gap_us": gap,
        "rewritten_gap_us": _minus(rewritten["time_us"], floor),
        "closed_us": closed,
        "rewrite_cost_us": _minus(rewritten["time_us"], original["time_us"]),
        "time_gap_closed": fraction,
        "bytes_gap_closed": bytes_fraction,
        "bar": BAR,
        "meets_bar": "meets" if fraction["p10"] >= BAR else "does not meet",
        "predicted_us": predicted,
        "predicted_gap_closed": _quotient(_minus(original["time_us"], predicted), gap),
        "eager_speedup": _ratio(shift["eager_time_us"], original["time_us"]),
        "memory_deps_refusals": original["refusal_reasons"].get("memory deps did not match", 0),
        "rewritten_memory_deps_refusals": rewritten["refusal_reasons"].get("memory deps did not match", 0),
        "rewritten_over_norm_kernel": _ratio(rewritten["time_us"], norm["time_us"]["compiled"]),
        "saved_MB": (original["inductor_bytes"] - rewritten["inductor_bytes"]) / 1e6,
    }
    return out


# ---------------------------------------------------------------- printouts of stored code

NOISE = re.compile(
    r"^\s*(rnumel = r0_numel|RBLOCK: tl\.constexpr = R0_BLOCK|roffset = r0_offset|rindex = r0_index|rbase = r0_base)$"
)
META = ("num_load", "num_store", "num_reduction", "tiling_scores")


def _kernel_text(src: str, memory_only: bool = False) -> str:
    """A generated kernel as stored, without the import lines, the launch metadata (a few of its
    fields kept in a comment) and the lines that only rename an index. memory_only keeps the
    signature, the loops and the loads and stores."""
    head, _, body = src.partition("@triton.jit\n")
    size_hints = re.search(r"size_hints=(\{[^}]*\})", head)
    hint = re.search(r"reduction_hint=(\w+\.\w+)", head)
    kind = re.search(r"@triton_heuristics\.(\w+)\(", head)
    meta = {k: m.group(1) for k in META if (m := re.search(rf"'{k}': (\{{[^}}]*\}}|\d+)", head))}
    lines = [f"# @triton_heuristics.{kind.group(1) if kind else '?'}: size_hints={size_hints.group(1) if size_hints else '?'}"]
    if hint:
        lines[0] += f", {hint.group(1)}"
    lines.append("# inductor_meta: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
    for line in body.strip("\n").splitlines():
        if NOISE.match(line):
            continue
        if memory_only and not (
            line.startswith("def ")
            or "tl.load(" in line
            or "tl.store(" in line
            or line.strip().startswith("for ")
            or "welford" in line and "=" in line and "_next" not in line
        ):
            continue
        lines.append(line)
    return "\n".join(lines)


def kernels(results) -> dict:
    """The generated kernels as text blocks: the norm block's kernel whole, the token shift's
    (original and rewritten) as their loads and stores, and each variant's fusion refusals."""
    norm, shift = results("m06/norm_block"), results("m06/token_shift")
    out = {"norm_kernel": _kernel_text(norm["sources"][0])}
    for name, v in shift["variants"].items():
        out[f"{name}_memory"] = "\n\n".join(_kernel_text(s, memory_only=True) for s in v["sources"])
        out[f"{name}_refused"] = "\n".join(v["refused"]) or "(none)"
    out["norm_refused"] = "\n".join(norm["refused"]) or "(none)"
    return out


# ---------------------------------------------------------------- figures


def _err(summaries: list[dict]) -> dict:
    """Error bars from the 10th to the 90th percentile around the median."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [s["p90"] - s["median"] for s in summaries],
        "arrayminus": [s["median"] - s["p10"] for s in summaries],
    }


def bytes_moved(results) -> go.Figure:
    """Per variant: the bytes its kernels move as counted, against the minimum the math needs."""
    d = derived(results)
    names = list(VARIANTS)
    labels = [f"{VARIANTS[n]} · {d[n]['kernels']} kernel{'s' if d[n]['kernels'] != 1 else ''}" for n in names]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=labels,
            x=[d[n]["bytes_MB"] for n in names],
            orientation="h",
            name="bytes its kernels read and write, as counted",
            customdata=[[d[n]["tensors"]] for n in names],
            hovertemplate="%{y}: %{x:,.0f} MB, %{customdata[0]:.2f} tensors of x's size<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[d[n]["min_MB"] for n in names],
            mode="markers",
            name="the minimum: x read once, y written once, parameters once",
            marker={"symbol": "line-ns-open", "size": 26, "line": {"width": 3}},
            hovertemplate="%{y}: minimum %{x:,.0f} MB<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(title_text="MB per call (bar: counted; mark: minimum)", rangemode="tozero")
    fig.update_layout(
        height=380,
        margin={"l": 10, "r": 20, "t": 20, "b": 60},
        legend={"orientation": "h", "yanchor": "top", "y": -0.25},
        bargap=0.35,
    )
    return fig


def bandwidth(results) -> go.Figure:
    """Per variant: the rate on the minimum bytes and on the bytes its kernels move, against the
    copy bandwidth of the same build."""
    d = derived(results)
    names = list(VARIANTS)
    labels = [f"{VARIANTS[n]} · {d[n]['kernels']} kernel{'s' if d[n]['kernels'] != 1 else ''}" for n in names]
    fig = go.Figure()
    for key, name in (
        ("GBps", "on the minimum bytes (what the block achieves)"),
        ("counted_GBps", "on the bytes its kernels move, as counted"),
    ):
        summaries = [d[n][key] for n in names]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[s["median"] for s in summaries],
                orientation="h",
                name=name,
                error_x=_err(summaries),
                customdata=[[s["median"] / d["copy_GBps"]["median"]] for s in summaries],
                hovertemplate="%{y}: %{x:,.0f} GB/s, %{customdata[0]:.0%} of the copy ceiling<extra>"
                + name
                + "</extra>",
            )
        )
    for s, name, dash in (
        (d["copy_GBps"], "copy ceiling (methodology/ceilings)", "solid"),
        (d["copy_same_size_GBps"], "copy of x alone (same size as the blocks' tensors)", "dot"),
    ):
        fig.add_vline(x=s["median"], line_dash=dash, line_width=2)
        fig.add_annotation(
            x=s["median"],
            y=1.01 if dash == "solid" else 1.08,
            yref="paper",
            yanchor="bottom",
            xanchor="right",
            text=f"{name} ({'solid' if dash == 'solid' else 'dotted'} line)",
            showarrow=False,
        )
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(title_text="GB/s (median; whiskers: 10th–90th percentile)", rangemode="tozero")
    fig.update_layout(
        barmode="group",
        height=460,
        margin={"l": 10, "r": 20, "t": 70, "b": 70},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2},
    )
    return fig


def shift_fix(results) -> go.Figure:
    """The token shift before and after the rewrite: measured time per call, the floor, and what
    a cost model that counts bytes predicts for the rewrite."""
    d = derived(results)
    s = d["shift"]
    floor = d["shift_original"]["floor_us"]
    rows = [
        ("original: two kernels", d["shift_original"], results("m06/token_shift")["variants"]["original"]["time_us"]),
        ("rewritten: one kernel", d["shift_rewritten"], results("m06/token_shift")["variants"]["rewritten"]["time_us"]),
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=[r[0] for r in rows],
            y=[r[2]["median"] for r in rows],
            error_y=_err([r[2] for r in rows]),
            name="measured (device time per call)",
            customdata=[[r[1]["tensors"]] for r in rows],
            hovertemplate="%{x}: %{y:.1f} µs; its kernels move %{customdata[0]:.2f} tensors of x's size"
            "<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[rows[1][0]],
            y=[s["predicted_us"]["median"]],
            mode="markers",
            marker={"symbol": "diamond-open", "size": 14, "line": {"width": 2}},
            name="predicted from bytes: its counted bytes at the original's rate",
            hovertemplate="predicted %{y:.1f} µs<extra></extra>",
        )
    )
    fig.add_hline(y=floor["median"], line_dash="dash")
    fig.add_annotation(
        x=0.5,
        xref="paper",
        y=floor["median"],
        yanchor="bottom",
        text="floor: the minimum bytes at the copy ceiling",
        showarrow=False,
    )
    fig.add_annotation(
        x=rows[1][0],
        y=rows[1][2]["median"],
        yanchor="bottom",
        yshift=18,
        text=f"gap closed: {s['time_gap_closed']['median']:.0%} (bar: {BAR:.0%})",
        showarrow=False,
    )
    fig.update_yaxes(title_text="µs per call", rangemode="tozero")
    fig.update_layout(
        height=440,
        margin={"l": 70, "r": 20, "t": 20, "b": 60},
        legend={"orientation": "h", "yanchor": "top", "y": -0.12},
        bargap=0.5,
    )
    return fig
