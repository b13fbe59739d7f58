"""Figures for module 02, drawn at site-build time from build_results/ (plotly only, no torch)."""

import math
import re

import plotly.graph_objects as go

from coursekit.plotting import BLUE, GREEN, ORANGE, legend, margin
from coursekit.stats import paired

LABELS = {
    "requires_grad": "torch.add, inputs require grad",
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
    "out_no_alloc": "inference_mode + out= (no allocation)",
    "aten_op_direct": "torch.ops.aten.add.Tensor",
    "cpu_tensors": "CPU tensors (no launch)",
    "python_call": "empty Python call",
}


def _err(s):
    return dict(type="data", symmetric=False, array=[s["p90"] - s["median"]], arrayminus=[s["median"] - s["p10"]])


def host_overhead(results):
    host = results("m02/host_overhead")["host_us"]
    kernel = results("m02/kernel_time")["add_us"]["graph_replay"]
    launch = results("m02/launch_floor")["host_us"]["bare_launch"]
    fig = go.Figure()
    # Timed in its own snippet, not in these rounds: the piece the text calls the largest.
    fig.add_bar(
        y=["bare launch: torch.cuda._sleep(0)"],
        x=[launch["median"]],
        orientation="h",
        error_x=_err(launch),
        marker_color=GREEN,
        showlegend=False,
        text=[f"{launch['median']:.1f}"],
        textposition="inside",
        insidetextanchor="start",
        textangle=0,
        hovertemplate="bare launch: %{x:.2f} µs host per call<extra></extra>",
    )
    for name in reversed(list(LABELS)):
        s = host[name]
        fig.add_bar(
            y=[LABELS[name]],
            x=[s["median"]],
            orientation="h",
            name=LABELS[name],
            error_x=_err(s),
            showlegend=False,
            marker_color=BLUE if name != "python_call" else "#888",
            # the value at the bar's base, clear of the whiskers; a bar too short for it gets it outside
            text=[f"{s['median']:.2f}" if s["median"] < 1 else f"{s['median']:.1f}"],
            textposition="inside" if s["median"] >= 2 else "outside",
            insidetextanchor="start",
            textangle=0,
            hovertemplate="%{y}: %{x:.2f} µs host per op<extra></extra>",
        )
    fig.add_bar(
        y=["GPU: add kernel + gap to the next (graph replay)"],
        x=[kernel["median"]],
        orientation="h",
        error_x=_err(kernel),
        marker_color=ORANGE,
        showlegend=False,
        text=[f"{kernel['median']:.2f}"],
        textposition="outside",
        hovertemplate="kernel: %{x:.2f} µs of GPU time per kernel in a graph replay<extra></extra>",
    )
    fig.update_layout(
        xaxis_title="µs per call (host) or per kernel (GPU), 1,024 floats; whiskers: 10th–90th pct.",
        height=480,
        margin=margin(l=10),
        bargap=0.3,
        uniformtext=dict(minsize=11, mode="show"),
    )
    fig.update_xaxes(dtick=2, rangemode="tozero")
    fig.update_yaxes(automargin=True, title_text="what is timed")
    return fig


def crossover(results):
    d = results("m02/crossover")
    pts = d["points"]
    numel = [p["numel"] for p in pts]
    fig = go.Figure()
    for key, label in (
        ("eager_us", "eager torch.add, back to back (host-bound where flat)"),
        ("kernel_us", "the kernel alone (CUDA-graph replay)"),
    ):
        fig.add_scatter(
            x=numel,
            y=[p[key]["median"] for p in pts],
            mode="lines+markers",
            name=label,
            error_y=dict(
                type="data",
                symmetric=False,
                array=[p[key]["p90"] - p[key]["median"] for p in pts],
                arrayminus=[p[key]["median"] - p[key]["p10"] for p in pts],
            ),
            customdata=[p["bytes"] / 1e6 for p in pts],
            hovertemplate="%{x:.3s} elements (%{customdata:.3g} MB moved): %{y:.3g} µs<extra></extra>",
        )
    bw = d["bandwidth_GBps"] * 1e9
    fig.add_scatter(
        x=numel,
        y=[max(d["floor_us"], 12 * n / bw * 1e6) for n in numel],
        mode="lines",
        line=dict(dash="dot"),
        name=f"model: max(floor {d['floor_us']:.1f} µs, bytes / {bw / 1e12:.2f} TB/s)",
        hoverinfo="skip",
    )
    if d["crossover_numel"] > 0:
        fig.add_vline(x=d["crossover_numel"], line_dash="dash", line_width=1)
        fig.add_annotation(
            x=math.log10(d["crossover_numel"]),
            y=1,
            yref="paper",
            xanchor="right",
            showarrow=False,
            text=f"crossover, interpolated: ≈ {d['crossover_numel'] / 1e6:.1f} M ",
        )
    # Shade the sizes whose working set stays in L2: up to the largest whose kernel moved bytes faster
    # than HBM sustains at 2^28. Only the sizes next to the step beat HBM; below, the kernel is latency-bound.
    cached = [
        p["numel"] for p in pts if p["bytes"] / (p["kernel_us"]["median"] * 1e-6) > 1.15 * bw and p["numel"] >= 2**16
    ]
    if cached:
        fig.add_vrect(x0=1, x1=max(cached), opacity=0.07, line_width=0, fillcolor="gray")
        fig.add_annotation(
            x=0,
            y=0.55,
            yref="paper",
            xanchor="left",
            showarrow=False,
            text="shaded: working set<br>stays in L2",
        )
    # Mark the kernel's jump at the L2 edge, between 2^21 and 2^22 elements.
    by_numel = {p["numel"]: p["kernel_us"]["median"] for p in pts}
    if 2**21 in by_numel and 2**22 in by_numel:
        fig.add_annotation(
            x=math.log10(2**21.5),
            y=math.log10(math.sqrt(by_numel[2**21] * by_numel[2**22])),
            ax=-15,
            ay=-110,
            showarrow=True,
            arrowhead=2,
            xanchor="right",
            text="L2 edge: the<br>kernel's time<br>jumps",
        )
    fig.update_xaxes(
        type="log",
        title="elements per tensor (log scale; float32, bytes moved = 12 × elements)",
        exponentformat="power",
        dtick=1,
        # fixed, so that the annotations never widen the axis on a narrow figure
        range=[-0.3, math.log10(max(numel)) + 0.3],
    )
    fig.update_yaxes(type="log", title="µs per op (log scale)")
    fig.update_layout(height=520, margin=margin(l=60), legend=legend(-0.18, x=0))
    return fig


def layers(results) -> dict:
    """What two layers cost, as per-round differences of variants timed in the same interleaved rounds
    (coursekit.stats.paired): autograd recording (inputs that require grad, less ``no_grad``) and the
    output's allocation (``inference_mode``, less the same add with ``out=``)."""
    host = results("m02/host_overhead")["host_us"]
    return {
        "autograd_recording_us": paired(host["requires_grad"], host["no_grad"]),
        "allocation_us": paired(host["inference_mode"], host["out_no_alloc"]),
    }


def launch_share(results) -> dict:
    """How much of an add the launch is, unprofiled. ``of_lean_add``: a bare launch from Python
    (``torch.cuda._sleep(0)``) over the ``out=`` add under ``inference_mode``, round by round (both
    timed in the same interleaved rounds of m02/launch_floor). ``rest_of_lean_add_us``: that add less
    the bare launch, round by round. ``of_full_add``: the bare launch's median over the full eager
    add's (inputs that require grad, m02/kernel_time), one value per process: the two were timed apart."""
    launch = results("m02/launch_floor")["host_us"]
    full = results("m02/kernel_time")["add_us"]["full_eager"]
    return {
        "of_lean_add": paired(launch["bare_launch"], launch["add_inference_out"], op=lambda x, y: x / y, unit=""),
        "rest_of_lean_add_us": paired(launch["add_inference_out"], launch["bare_launch"]),
        "of_full_add": launch["bare_launch"]["median"] / full["median"],
    }


def autograd_over_allocation(results) -> dict:
    """Autograd recording less allocation (the two differences of ``layers``), round by round.
    ``median_us``: the median of that per-round value, one number per process (which layer leans
    larger there); ``us``: its summary, with the spread the course's test reads."""
    from coursekit.stats import summarize

    host = results("m02/host_overhead")["host_us"]
    rounds = zip(*(host[v]["rounds"] for v in ("requires_grad", "no_grad", "inference_mode", "out_no_alloc")))
    diff = summarize([(rg - ng) - (im - out) for rg, ng, im, out in rounds], "us", "host")
    return {"median_us": diff["median"], "us": diff}


def crossover_sizes(results) -> dict:
    """From m02/crossover, per process: the kernel's rate in GB/s (bytes moved over its graph-replay
    median) at 2^18 to 2^22 elements, either side of the L2 step (keys e18 to e22), and what eager adds
    to the kernel at the largest size (the difference of two medians timed apart, in µs and as a share
    of the kernel's time)."""
    d = results("m02/crossover")
    by_numel = {p["numel"]: p for p in d["points"]}
    rate = {
        f"e{e}": by_numel[2**e]["bytes"] / (by_numel[2**e]["kernel_us"]["median"] * 1e-6) / 1e9 for e in range(18, 23)
    }
    big = d["points"][-1]
    gap = big["eager_us"]["median"] - big["kernel_us"]["median"]
    return {
        "rate_GBps": rate,
        "large_end_gap_us": gap,
        "large_end_gap_share": gap / big["kernel_us"]["median"],
    }


def chain_prediction(results) -> dict:
    """Exercise 1's check, one value per process: the chain's eager time per op (m02/kernel_time)
    against the single ``inference_mode`` add that allocates (m02/host_overhead; the two snippets ran
    apart, so host drift between them is in the ratio), and the predictions from single-add numbers:
    the chain's kernels times that add's host time, and times the graph-replay cost per kernel."""
    kernel = results("m02/kernel_time")
    add = results("m02/host_overhead")["host_us"]["inference_mode"]["median"]
    chain = kernel["chain"]
    per_op = chain["eager_us"]["median"] / chain["kernels"]
    return {
        "per_op_us": per_op,
        "per_op_over_add": per_op / add,
        "predicted_eager_us": chain["kernels"] * add,
        "predicted_graph_us": chain["kernels"] * kernel["add_us"]["graph_replay"]["median"],
    }


def half_floor(results) -> dict:
    """Exercise 2's check, one value per process: where the kernel curve of m02/crossover would cross a
    floor half as large as the measured one (log-interpolated between the two sizes either side, as
    crossover.py interpolates the measured crossover), against the model's crossing at half the floor."""
    d = results("m02/crossover")
    half = d["floor_us"] / 2
    crossing = -1.0
    for lo, hi in zip(d["points"], d["points"][1:]):
        t0, t1 = lo["kernel_us"]["median"], hi["kernel_us"]["median"]
        if t0 < half <= t1:
            f = (math.log(half) - math.log(t0)) / (math.log(t1) - math.log(t0))
            crossing = 2 ** (math.log2(lo["numel"]) + f * (math.log2(hi["numel"]) - math.log2(lo["numel"])))
            break
    model_half = d["model_crossover_numel"] / 2
    return {
        "floor_us": half,
        "crossover_numel": crossing,
        "model_crossover_numel": model_half,
        # How far the measured crossing lands above the model's at half the floor, and how far (in
        # octaves of size) it moves when the floor halves; the model moves exactly one octave.
        "over_model": crossing / model_half,
        "octaves_moved": math.log2(d["crossover_numel"] / crossing),
    }


def large_end_fill(results) -> dict:
    """What the first launch of each eager sample at the largest size of m02/crossover adds per op:
    one floor, paid before the GPU starts, over the sample's calls (crossover.py's rule for the number
    of calls, with its 2^31 bytes budget: at 2^28 floats, its minimum of 8)."""
    d = results("m02/crossover")
    big = d["points"][-1]
    calls = max(8, min(2000, 2**31 // big["bytes"]))
    return {"calls": calls, "first_launch_us_per_op": d["floor_us"] / calls}


def profile_table(results) -> dict:
    """m02/profile_breakdown's stored table with only the columns the page reads (host and device time
    per call, calls), so that it fits a reading column. The profiler's own column names are kept;
    the name column is cut to its widest entry, at most 37 characters. Columns the stored table
    lacks (a CPU run's device columns) are left out."""
    text = results("m02/profile_breakdown")["table"]
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("-"))
    name_end = lines[rule].index(" ")  # the name column: the first run of dashes
    # Past the name, a header is split at two or more spaces and a row at any space: values have none.
    header = ["Name", *re.split(r"\s{2,}", lines[rule + 1][name_end:].strip())]
    wanted = ("Name", "CPU time avg", "CUDA time avg", "# of Calls")
    keep = [i for i, h in enumerate(header) if h in wanted]
    rows, tail = [header], []
    for line in lines[rule + 2 :]:
        if line.startswith("-"):
            continue
        cells = [line[:name_end].strip(), *line[name_end:].split()]
        if len(cells) != len(header):  # the totals under the table
            tail.append(line)
            continue
        rows.append(cells)
    rows = [[r[i] for i in keep] for r in rows]
    for r in rows:  # a long kernel name, cut shorter than the profiler cuts it
        r[0] = r[0] if len(r[0]) <= 37 else r[0][:34].rstrip(".") + "..."
    widths = [max(len(r[c]) for r in rows) for c in range(len(keep))]
    out = ["  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))) for r in rows]
    ruler = "  ".join("-" * w for w in widths)
    return {"table": "\n".join([ruler, out[0], ruler, *out[1:], ruler, *tail])}
