"""Figures for module 01, drawn at site-build time from build_results/ (plotly only, no torch)."""

import math

from plotly.subplots import make_subplots

from coursekit.plotting import legend, margin

VARIANTS = {"eager": "PyTorch eager", "torch_compile": "torch.compile", "jax_jit": "jax.jit"}
DASH = {"eager": "solid", "torch_compile": "dash", "jax_jit": "dot"}
COLOR = {"eager": "#3b6fd8", "torch_compile": "#e08a1e", "jax_jit": "#2e9e5f"}  # readable on light and dark


def _configs(d):
    return sorted(d["configs"].values(), key=lambda c: c["hidden"])  # small step first, as in the text


def _title(c):
    return f"hidden {c['hidden']}, batch {c['batch']}"


def train_step(results):
    """Cumulative wall time against the number of training steps: first call + (k-1) × steady step."""
    d = results("m01/train_step")
    configs = _configs(d)
    fig = make_subplots(rows=1, cols=len(configs), subplot_titles=[_title(c) for c in configs], horizontal_spacing=0.14)
    # one range of steps for every panel, so that the panels read alike: every pay-off point with room after it
    paid = [v["steps_to_amortise"] for c in configs for v in c["variants"].values() if v.get("amortises")]
    # and out to a long run (10^5 steps), where a compile that pays for itself is negligible
    last = min(1e7, max([1e5] + [3 * k for k in paid]))
    ks = sorted({round(10 ** (i * math.log10(last) / 80)) for i in range(81)})
    # one time axis for every panel, so that heights compare across them: from a labelled power of
    # ten below the smallest first call to the largest total
    every = [v for c in configs for v in c["variants"].values()]
    lo = min(v["first_call_s"] for v in every)
    hi = max(v["first_call_s"] + (last - 1) * v["step_us"]["median"] * 1e-6 for v in every)
    for col, c in enumerate(configs, start=1):
        vs = c["variants"]
        fig.update_yaxes(range=[math.floor(math.log10(lo)), math.log10(hi) + 0.05], row=1, col=col)
        for name, v in vs.items():
            step_s = v["step_us"]["median"] * 1e-6
            fig.add_scatter(
                x=ks,
                y=[v["first_call_s"] + (k - 1) * step_s for k in ks],
                mode="lines",
                row=1,
                col=col,
                name=VARIANTS[name],
                legendgroup=name,
                showlegend=col == 1,
                line=dict(dash=DASH[name], color=COLOR[name]),
                hovertemplate=(
                    f"{VARIANTS[name]}: first call {v['first_call_s']:.3g} s, "
                    f"then {v['step_us']['median']:,.0f} µs per step<br>"
                    "%{x:,} steps: %{y:.3g} s<extra></extra>"
                ),
            )
            if v.get("amortises"):
                k = v["steps_to_amortise"]
                fig.add_scatter(
                    x=[k],
                    y=[v["first_call_s"] + (k - 1) * step_s],
                    mode="markers+text",
                    text=[f"{k:,.0f} steps"],
                    textposition="bottom right",  # below the compiled line, clear of the others
                    textfont=dict(color=COLOR[name], size=15),
                    row=1,
                    col=col,
                    marker=dict(size=14, symbol="circle-open", line=dict(width=2), color=COLOR[name]),
                    legendgroup=name,
                    showlegend=False,
                    hovertemplate=f"{VARIANTS[name]} overtakes eager after %{{x:,.0f}} steps<extra></extra>",
                )
    # log axes labelled as such, a label only at each power of ten (written out: 1,000, not 1k or
    # a bare 1 under a minor tick), and unlabelled minor ticks between them
    log = dict(type="log", dtick=1, tickformat=",~r", minor=dict(ticks="outside", ticklen=3, showgrid=False))
    fig.update_xaxes(title_text="training steps run (log scale)", range=[0, math.log10(last)], **log)
    fig.update_yaxes(title_text="cumulative wall time (s, log scale)", **log)
    fig.update_layout(
        height=460,
        margin=margin(t=40),
        legend=legend(-0.2, x=0, font=dict(size=15)),
        hovermode="closest",
    )
    return fig


def step_facts(results) -> dict:
    """Numbers the chapter derives from two stored results (computed per process, no measurement).

    - dispatch_share: the small eager step's kernels, each at module 02's host cost of one op that
      records autograd (m02/host_overhead, requires_grad), over the host phases of the step
      (forward and loss, backward, optimizer step, zero_grad): the part of the host's time that
      per-op dispatch alone would explain. Module 02's cost is the median of its processes' medians
      (a separate result, measured in other processes), so the range over this result's processes
      comes from m01 alone.
    - model_compile_cost_us, optimizer_compile_cost_us: the per-round difference, in the same
      interleaved rounds of m01/compile_variants, between compiling the model alone (or the
      optimizer step alone) and eager; its median, with the per-round spread.
    - graphs_saving_us: the same for both compiled minus both with CUDA graphs (reduce-overhead).
    """
    from coursekit.stats import paired

    parts = results("m01/train_step")["configs"]["small_mlp"]["eager_parts"]
    import statistics

    per_op_us = statistics.median(
        results("m02/host_overhead", process=p)["host_us"]["requires_grad"]["median"]
        for p in range(1, results.processes("m02/host_overhead") + 1)
    )
    host_us = sum(parts[p]["median"] for p in ("forward_and_loss", "backward", "optimizer_step", "zero_grad"))
    steps = results("m01/compile_variants")["step_us"]
    return {
        "per_op_us": per_op_us,
        "dispatch_us": parts["kernels_per_step"] * per_op_us,
        "host_us": host_us,
        "dispatch_share": parts["kernels_per_step"] * per_op_us / host_us,
        "model_compile_cost_us": paired(steps["model_only"], steps["eager"]),
        "optimizer_compile_cost_us": paired(steps["optimizer_only"], steps["eager"]),
        # what CUDA graphs take off the compiled step (absent where there is no CUDA)
        **(
            {"graphs_saving_us": paired(steps["both"], steps["both_reduce_overhead"])}
            if "both_reduce_overhead" in steps
            else {}
        ),
    }


def gemm_share(results) -> dict:
    """The large step's rate as a share of the GEMM reference (as the step-time figure's hover gives it):
    each variant's TFLOP/s (exact FLOP count over the step's host-clock time) over the fastest bf16
    matrix product's TFLOP/s on the device clock (methodology/ceilings). No measurement of its own."""
    peak = results("methodology/ceilings")["gemm"]["TFLOPs"]["median"]
    large = results("m01/train_step")["configs"]["large_mlp"]["variants"]
    return {f"{name}_large": v["TFLOPs"]["median"] / peak for name, v in large.items()}


def train_step_time_by_size(results):
    """Steady time per training step, one panel per size, both on one axis from zero; the hover gives
    the share of the GEMM reference each reaches."""
    d = results("m01/train_step")
    gemm = results("methodology/ceilings")["gemm"]
    peak = gemm["TFLOPs"]["median"]
    configs = _configs(d)
    # one scale for both panels, from zero, so that heights compare across them
    top = max(v["step_us"]["p90"] for c in configs for v in c["variants"].values()) * 1.1
    fig = make_subplots(rows=1, cols=len(configs), horizontal_spacing=0.18)
    short = {"eager": "eager", "torch_compile": "torch.compile", "jax_jit": "jax.jit"}
    symbol = {"eager": "circle", "torch_compile": "square", "jax_jit": "diamond"}
    for col, c in enumerate(configs, start=1):
        for name, label in VARIANTS.items():
            v = c["variants"][name]
            s, tf = v["step_us"], v["TFLOPs"]["median"]
            fig.add_scatter(
                x=[short[name]],
                y=[s["median"]],
                mode="markers",
                name=label,
                showlegend=False,  # the axis names each marker
                row=1,
                col=col,
                hovertext=[
                    f"{label}: {s['median']:,.0f} µs per step (p10 {s['p10']:,.0f}, p90 {s['p90']:,.0f})<br>"
                    f"{tf:.3g} TFLOP/s = {tf / peak:.1%} of the fastest {gemm['dtype']} matrix product's rate "
                    f"({peak:.4g}, device clock, methodology page)"
                ],
                hoverinfo="text",
                marker=dict(color=COLOR[name], size=11, symbol=symbol[name]),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[s["p90"] - s["median"]],
                    arrayminus=[s["median"] - s["p10"]],
                    thickness=1.5,
                    width=6,
                ),
            )
        fig.update_yaxes(range=[0, top], row=1, col=col)
        # each panel named under its axis, short enough for a phone (the sizes are in the caption)
        fig.update_xaxes(
            title_text=("small step", "large step")[col - 1] if len(configs) == 2 else _title(c), row=1, col=col
        )
    fig.update_yaxes(title_text="µs per training step", row=1, col=1)
    fig.update_layout(height=380, margin=margin(), hovermode="closest")
    return fig


def gemm_headroom(results) -> dict:
    """What the GEMM reference leaves the large step: 1 minus each variant's share of it (gemm_share),
    the most a compiler could take off the step's time if every FLOP ran at the reference's rate."""
    return {name: 1 - share for name, share in gemm_share(results).items()}
