"""Figures for module 02, drawn at site-build time from build_results/ (plotly only, no torch)."""

import math

import plotly.graph_objects as go

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
    fig = go.Figure()
    for name in reversed(list(LABELS)):
        s = host[name]
        fig.add_bar(
            y=[LABELS[name]],
            x=[s["median"]],
            orientation="h",
            name=LABELS[name],
            error_x=_err(s),
            showlegend=False,
            marker_color="#1f5fbf" if name != "python_call" else "#888",
            hovertemplate="%{y}: %{x:.2f} µs host per op<extra></extra>",
        )
    fig.add_bar(
        y=["GPU: the add kernel itself (graph replay)"],
        x=[kernel["median"]],
        orientation="h",
        error_x=_err(kernel),
        marker_color="#e07b00",
        showlegend=False,
        hovertemplate="kernel: %{x:.2f} µs of GPU time<extra></extra>",
    )
    fig.update_layout(
        xaxis_title="µs per torch.add of 1,024 floats (whiskers: 10th–90th percentile)",
        height=440,
        margin=dict(l=10, r=20, t=20, b=60),
        bargap=0.3,
    )
    fig.update_yaxes(automargin=True, title_text="how torch.add is called")
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
    # Shade the sizes served from L2: their kernel moved bytes faster than HBM sustains at 2^28.
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
            text="shaded: served from L2<br>(faster than HBM allows)",
        )
    fig.update_xaxes(
        type="log",
        title="elements per tensor (log scale; float32, bytes moved = 12 × elements)",
        exponentformat="power",
        dtick=1,
    )
    fig.update_yaxes(type="log", title="µs per op (log scale; whiskers: 10th–90th percentile)")
    fig.update_layout(
        height=520, margin=dict(l=60, r=20, t=20, b=60), legend=dict(orientation="h", x=0, y=-0.18, yanchor="top")
    )
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
