"""Figures and computed values for module 06: what Inductor's scheduler fused, the bytes it counts
against the least the math needs, and the rate it reached against the copy ceiling.

``results(key)`` returns a stored result's data: "m06/norm_block" (snippets/m06/norm_block.py),
"m06/token_shift" (snippets/m06/token_shift.py) and "methodology/ceilings" (the copy bandwidth
measured in the same build). The floor of a block is its minimum bytes at that copy bandwidth;
``derived`` computes every ratio against it once, with a worst-case spread where two
measurements are combined. ``runs`` sets the two forced runs of the build side by side
(``REFERENCE`` and ``RERUN``), for the numbers that moved between them.
"""

import re

import plotly.graph_objects as go

from coursekit.plotting import BLUE, GREEN, GREY, REFERENCE, RERUN, legend, margin, number
from coursekit.stats import difference_spread, ratio_spread

BAR = 0.5  # the module's bar: a fix must close at least this fraction of the gap it shows

VARIANTS = {  # short name: label
    "norm_eager": "norm block, eager",
    "norm_compiled": "norm block, torch.compile",
    "shift_original": "token shift, torch.compile",
    "shift_rewritten": "token shift rewritten, torch.compile",
    "shift_triton": "token shift, hand-written Triton",
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
        "shift_triton": {
            "time_us": shift["variants"]["triton"]["time_us"],
            "bytes": triton_bytes(shift),
            "min_bytes": shift["min_bytes"],
            "tensor_bytes": shift["tensor_bytes"],
            "kernels": shift["variants"]["triton"]["kernel_count"],
        },
    }


def triton_bytes(shift: dict) -> int:
    """The hand-written kernel's bytes, counted from its code (Inductor does not see it): x read
    once, plus the row before each program's first row (one program per ROWS rows), y written
    once, and w, b and mu read once, as Inductor counts parameters."""
    s = shift["shape"]
    rows = s["batch"] * s["seq"]
    row_bytes = shift["tensor_bytes"] // rows
    programs = -(-rows // shift["variants"]["triton"]["config"]["ROWS"])
    params = shift["min_bytes"] - 2 * shift["tensor_bytes"]
    return 2 * shift["tensor_bytes"] + programs * row_bytes + params


def derived(results) -> dict:
    """Every variant against its floor (the minimum bytes at the copy bandwidth of
    methodology/ceilings), and the two token-shift fixes against the module's bar.

    Per variant: ``floor_us``; ``of_copy_peak``, the floor over the measured time (equal to the
    rate on the minimum bytes over the copy bandwidth: 1 means the block ran as fast as a copy of
    its least bytes); ``counted_GBps`` and ``counted_of_copy_peak``, the rate on the bytes its
    kernels move as counted (Inductor's metric; eager's and the hand-written kernel's counted from
    their code), over the same copy bandwidth; ``tensors``, those bytes in tensors of x's size.

    ``shift``: ``gap_us``, the original compiled block's time above its floor; for each fix
    (``rewrite``, ``triton``) ``gap_closed``, (original - fix) / (original - floor), with the
    worst case of the three spreads, ``meets_bar`` (whether that worst case reaches BAR) and
    ``bar_us``, the time a fix must reach to close BAR of the gap. The rewrite also has
    ``bytes_gap_closed`` (the fraction of the counted excess bytes it removes; exact, both counts
    are deterministic) and ``predicted_us``, its counted bytes at the rate the original's two
    kernels moved theirs: what a cost model that counts bytes expects.
    """
    copy = results("methodology/ceilings")["copy"]["GBps"]
    norm, shift = results("m06/norm_block"), results("m06/token_shift")
    out = {
        "copy_GBps": copy,
        "copy_same_size_GBps": norm["GBps"]["copy"],  # the snippet's own copy of x, 128 MiB
        "copy_same_size_of_peak": ratio_spread(norm["GBps"]["copy"], copy),
    }
    for name, v in _variants(results).items():
        floor = _over(v["min_bytes"] / 1e3, copy, "us")  # bytes / (GB/s * 1e3) = us
        counted = _over(v["bytes"] / 1e3, v["time_us"], "GB/s")
        out[name] = {
            "label": VARIANTS[name],
            "kernels": v["kernels"],
            "time_us": v["time_us"],
            "floor_us": floor,
            "time_over_floor": ratio_spread(v["time_us"], floor),
            "of_copy_peak": ratio_spread(floor, v["time_us"]),
            "GBps": _over(v["min_bytes"] / 1e3, v["time_us"], "GB/s"),
            "counted_GBps": counted,
            "counted_of_copy_peak": ratio_spread(counted, copy),
            "bytes_MB": v["bytes"] / 1e6,
            "min_MB": v["min_bytes"] / 1e6,
            "bytes_MiB": v["bytes"] / 2**20,
            "min_MiB": v["min_bytes"] / 2**20,
            "tensors": v["bytes"] / v["tensor_bytes"],
            "min_tensors": v["min_bytes"] / v["tensor_bytes"],
            "excess_bytes": v["bytes"] - v["min_bytes"],
        }
    out["norm_speedup"] = ratio_spread(norm["time_us"]["eager"], norm["time_us"]["compiled"])
    out["norm_saved_us"] = difference_spread(norm["time_us"]["eager"], norm["time_us"]["compiled"])

    original, rewritten = shift["variants"]["original"], shift["variants"]["rewritten"]
    triton = shift["variants"]["triton"]
    floor = out["shift_original"]["floor_us"]
    gap = difference_spread(original["time_us"], floor)

    def fix(time_us: dict) -> dict:
        """A fix against the gap: the time it removes and the fraction of the gap that is, with
        the worst case of the three spreads (original, fix, floor), and whether it meets BAR."""
        closed = difference_spread(original["time_us"], time_us)
        fraction = _quotient(closed, gap)
        return {
            "closed_us": closed,
            "gap_closed": fraction,
            "meets_bar": "meets" if fraction["p10"] >= BAR else "does not meet",
            "bar_us": difference_spread(original["time_us"], _times(gap, BAR, "us")),
        }

    predicted = _times(original["time_us"], rewritten["inductor_bytes"] / original["inductor_bytes"], "us")
    out["shift"] = {
        "gap_us": gap,
        "bar": BAR,
        "bar_pct": BAR * 100,
        "rewrite": {
            **fix(rewritten["time_us"]),
            "cost_us": difference_spread(rewritten["time_us"], original["time_us"]),
            "bytes_gap_closed": (original["inductor_bytes"] - rewritten["inductor_bytes"])
            / (original["inductor_bytes"] - shift["min_bytes"]),
            "saved_MB": (original["inductor_bytes"] - rewritten["inductor_bytes"]) / 1e6,
            "predicted_us": predicted,
            "predicted_gap_closed": _quotient(difference_spread(original["time_us"], predicted), gap),
            "memory_deps_refusals": rewritten["refusal_reasons"].get("memory deps did not match", 0),
        },
        "triton": {
            **fix(triton["time_us"]),
            "speedup": ratio_spread(original["time_us"], triton["time_us"]),
            "eager_speedup": ratio_spread(shift["eager_time_us"], triton["time_us"]),
            "extra_rows_pct": 100 / triton["config"]["ROWS"],
            "programs": -(-shift["shape"]["batch"] * shift["shape"]["seq"] // triton["config"]["ROWS"]),
            "gap_left_us": difference_spread(triton["time_us"], floor),
        },
        "eager_speedup": ratio_spread(shift["eager_time_us"], original["time_us"]),
        # two results, two processes (norm_block and token_shift), same number of rows
        "rewritten_over_norm_kernel": ratio_spread(rewritten["time_us"], norm["time_us"]["compiled"]),
        "memory_deps_refusals": original["refusal_reasons"].get("memory deps did not match", 0),
    }
    return out


def runs(results) -> dict:
    """The numbers of the token shift in the two forced runs of the build, side by side, and their
    envelope: ``lo`` the smallest 10th percentile and ``hi`` the largest 90th over both runs (for
    a fraction of the gap, each run's worst case), ``median_lo`` and ``median_hi`` the two
    medians. A claim that holds on the envelope holds on both runs."""
    per_run = {}
    for name, hardware in (("reference", REFERENCE), ("rerun", RERUN)):
        d = derived(lambda key, hardware=hardware: results(key, hardware=hardware))
        per_run[name] = {
            "original_us": d["shift_original"]["time_us"],
            "rewritten_us": d["shift_rewritten"]["time_us"],
            "triton_us": d["shift_triton"]["time_us"],
            "eager_us": results("m06/token_shift", hardware=hardware)["eager_time_us"],
            "rewrite_cost_us": d["shift"]["rewrite"]["cost_us"],
            "rewrite_gap_closed": d["shift"]["rewrite"]["gap_closed"],
            "rewritten_over_norm_kernel": d["shift"]["rewritten_over_norm_kernel"],
            "triton_gap_closed": d["shift"]["triton"]["gap_closed"],
            "triton_of_copy_peak": d["shift_triton"]["of_copy_peak"],
        }
    out = dict(per_run)
    for key in per_run["reference"]:
        values = [per_run[r][key] for r in per_run]
        out[key] = {
            "lo": min(v["p10"] for v in values),
            "hi": max(v["p90"] for v in values),
            "median_lo": min(v["median"] for v in values),
            "median_hi": max(v["median"] for v in values),
        }
    # how far each variant's median moved from the first run to the second, in per cent
    moved = {
        key.removesuffix("_us"): abs(per_run["rerun"][key]["median"] / per_run["reference"][key]["median"] - 1) * 100
        for key in ("original_us", "rewritten_us", "triton_us", "eager_us")
    }
    moved["others_max"] = max(v for k, v in moved.items() if k != "rewritten")
    out["moved_pct"] = moved
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
    decorator = kind.group(1) if kind else "?"
    lines = [f"# @triton_heuristics.{decorator}: size_hints={size_hints.group(1) if size_hints else '?'}"]
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
            or "welford" in line
            and "=" in line
            and "_next" not in line
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
        if "sources" not in v:  # the hand-written kernel: its source is the snippet itself
            continue
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
            x=[d[n]["bytes_MiB"] for n in names],
            orientation="h",
            name="bytes moved, as counted (Inductor's metric; eager, Triton: from the code)",
            customdata=[[d[n]["tensors"]] for n in names],
            hovertemplate="%{y}: %{x:,.0f} MiB, %{customdata[0]:.2f} tensors of x's size<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[d[n]["min_MiB"] for n in names],
            mode="markers",
            name="the minimum: x read once, y written once",
            marker={"symbol": "diamond", "size": 14},
            hovertemplate="%{y}: minimum %{x:,.0f} MiB<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="variant · kernels per call")
    fig.update_xaxes(title_text="MiB per call", rangemode="tozero")
    fig.update_layout(
        height=380,
        margin=margin(l=10),
        legend=legend(-0.25),
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
        ("GBps", "effective rate: the minimum bytes over the time"),
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
        (d["copy_GBps"], "copy ceiling (a large copy)", "solid"),
        (d["copy_same_size_GBps"], "a copy of x alone (the blocks' tensor size)", "dot"),
    ):
        fig.add_vline(x=s["median"], line_dash=dash, line_width=2, line_color=GREY)
        fig.add_trace(  # the line's legend entry: a vertical line cannot have one
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                line={"dash": dash, "width": 2, "color": GREY},
                name=f"{name}: {number(s['median'])} GB/s",
            )
        )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="variant · kernels per call")
    fig.update_xaxes(title_text="GB/s (whiskers: 10th–90th percentile)", range=[0, 1.06 * d["copy_GBps"]["median"]])
    fig.update_layout(
        barmode="group",
        height=460,
        margin=margin(l=10, t=20, b=70),
        legend=legend(-0.2),
    )
    return fig


def shift_fix(results) -> go.Figure:
    """The token shift before and after each fix, in both forced runs of the build: device time per
    call against the floor and against the target (the time that closes half of the gap), and what a
    cost model that counts bytes predicts for the rewrite."""
    names = (
        ("shift_original", "original<br>Inductor, two kernels"),
        ("shift_rewritten", "rewritten<br>Inductor, one kernel"),
        ("shift_triton", "hand-written<br>Triton, one kernel"),
    )
    fig = go.Figure()
    reference = None
    every = []  # each run's derived numbers, first run first
    for run, hardware in (("first run (the page's numbers)", REFERENCE), ("second run", RERUN)):
        d = derived(lambda key, hardware=hardware: results(key, hardware=hardware))
        every.append(d)
        reference = reference or d
        closed = {
            "shift_original": None,
            "shift_rewritten": d["shift"]["rewrite"],
            "shift_triton": d["shift"]["triton"],
        }
        summaries = [d[n]["time_us"] for n, _ in names]
        fig.add_trace(
            go.Bar(
                x=[label for _, label in names],
                y=[t["median"] for t in summaries],
                error_y=_err(summaries),
                name=run,
                customdata=[
                    [d[n]["tensors"], closed[n]["gap_closed"]["median"] if closed[n] else 0.0] for n, _ in names
                ],
                hovertemplate="%{x}: %{y:.1f} µs; moves %{customdata[0]:.2f} tensors of x's size; "
                "closes %{customdata[1]:.0%} of the gap<extra>" + run + "</extra>",
            )
        )
    s = reference["shift"]
    shifts = [d["shift"] for d in every]
    fig.add_trace(
        go.Scatter(
            x=[names[1][1]],
            y=[s["rewrite"]["predicted_us"]["median"]],
            mode="markers",
            marker={"symbol": "diamond", "size": 18},
            name="rewrite predicted from bytes: its counted bytes at the original's rate",
            hovertemplate="predicted %{y:.1f} µs<extra></extra>",
        )
    )
    for y, text, dash in (
        (reference["shift_original"]["floor_us"]["median"], "floor: the minimum bytes at the copy ceiling", "dash"),
        (s["triton"]["bar_us"]["median"], f"the target: {BAR:.0%} of the gap closed", "dot"),
    ):
        fig.add_hline(y=y, line_dash=dash, line_color=GREY)
        fig.add_trace(  # the line's legend entry, so that no label sits on the bars
            go.Scatter(x=[None], y=[None], mode="lines", line={"dash": dash, "color": GREY}, name=text)
        )
    for n, label in names[1:]:
        fix = "rewrite" if n == "shift_rewritten" else "triton"
        closed = [runs_d[fix]["gap_closed"]["median"] for runs_d in shifts]
        fig.add_annotation(
            x=label,
            y=max(d[n]["time_us"]["p90"] for d in every),
            yanchor="bottom",
            yshift=4,
            text=f"gap closed: {closed[0]:.0%}, {closed[1]:.0%}",
            showarrow=False,
        )
    fig.update_yaxes(title_text="µs per call (whiskers: 10th–90th percentile)", rangemode="tozero")
    fig.update_xaxes(tickangle=0, title_text="token shift: variant")
    fig.update_layout(
        barmode="group",
        height=520,
        margin=margin(t=30),
        legend=legend(-0.18),
        bargap=0.3,
    )
    return fig


# ---------------------------------------------------------------- loop ordering after fusion

REORDER_CASES = {  # case in m06/loop_order: label
    "sum_and_t": "x.sum(-1) beside x.t().contiguous()",
    "out_and_add_t": "b = y * 3 an output, x + b.t()",
}


def reordering(results) -> dict:
    """m06/loop_order by case, each case's two settings under ``on`` (loop ordering after fusion,
    the default) and ``off``: ``kernels``, ``MiB`` (the bytes Inductor counts), ``time_us``. Per
    case: ``saved_MiB`` (off minus on, exact) and ``time_ratio``, on over off with the worst case
    of both spreads (1 within it: the same time)."""
    lo = results("m06/loop_order")
    out = {"n": lo["n"], "tensor_MiB": lo["tensor_bytes"] / 2**20}
    for case in REORDER_CASES:
        c = {}
        for setting, name in (("on", "reorder"), ("off", "no_reorder")):
            v = lo["cases"][f"{case}/{name}"]
            c[setting] = {"kernels": v["kernel_count"], "MiB": v["inductor_bytes"] / 2**20, "time_us": v["time_us"]}
        c["saved_MiB"] = c["off"]["MiB"] - c["on"]["MiB"]
        c["time_ratio"] = _quotient(c["on"]["time_us"], c["off"]["time_us"])
        out[case] = c
    return out


def loop_reorder(results) -> go.Figure:
    """Per case and setting: the bytes Inductor counts (top) and the device time per call (bottom),
    each bar labelled with its kernel count."""
    from plotly.subplots import make_subplots

    d = reordering(results)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.25)
    for setting, name, colour in (("off", "loop ordering after fusion off", BLUE), ("on", "on (the default)", GREEN)):
        labels = [REORDER_CASES[c] for c in REORDER_CASES]
        kernels = [d[c][setting]["kernels"] for c in REORDER_CASES]
        text = [f"{setting}: {k} kernel{'s' if k != 1 else ''}" for k in kernels]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[d[c][setting]["MiB"] for c in REORDER_CASES],
                orientation="h",
                name=name,
                legendgroup=setting,
                marker={"color": colour},
                text=text,
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate="%{y}, " + name + ": %{x:,.0f} MiB counted, %{text}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        summaries = [d[c][setting]["time_us"] for c in REORDER_CASES]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[s["median"] for s in summaries],
                orientation="h",
                name=name,
                legendgroup=setting,
                showlegend=False,
                marker={"color": colour},
                error_x=_err(summaries),
                text=text,
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate="%{y}, " + name + ": %{x:.1f} µs per call, %{text}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="case")
    fig.update_xaxes(rangemode="tozero")
    fig.update_xaxes(title_text="MiB per call, as Inductor counts them", row=1, col=1)
    fig.update_xaxes(title_text="device µs per call", row=2, col=1)
    fig.update_layout(barmode="group", height=480, margin=margin(l=10, t=20), legend=legend(-0.14, whiskers=True))
    return fig


def norm_outline(results) -> dict:
    """The norm block's kernel as its loops, loads, Welford steps and store (``text``): the outline
    of the kernel that ``kernels()`` prints whole."""
    return {"text": _kernel_text(results("m06/norm_block")["sources"][0], memory_only=True)}
