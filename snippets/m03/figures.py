"""Figures for module 03: what each torch.compile mode buys against batch size, and why.

``results(key)`` returns a stored result's data: "m03/modes" (snippets/m03/modes.py) and
"methodology/ceilings" (copy bandwidth and bf16 GEMM rate, measured in the same build).
The ceilings turn the snippet's FLOPs and bytes into floors; ``derived`` does that once.
"""

import math

import plotly.graph_objects as go

from coursekit.plotting import RUNS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import (
    difference_spread,
    error_bars,
    ratio_spread,
    summarize,
)

LABELS = {
    "eager": "eager",
    "eager-cudagraph": "eager in a CUDA graph (torch.cuda.graph)",
    "default": "torch.compile (default)",
    "reduce-overhead": 'mode="reduce-overhead" (CUDA graphs)',
    "max-autotune-no-cudagraphs": 'mode="max-autotune-no-cudagraphs"',
}
SHORT = {"host overhead": "host", "memory traffic": "memory", "compute": "compute"}
OPS_PER_BLOCK = 5  # ops the host dispatches per block: LayerNorm, addmm, GELU, addmm, add
GPU_BOUND_FRACTION = 0.8  # busy for less of the wall time than this: the host binds (a CUDA graph of
# the same kernels, with no host in the way, kept the GPU busier at every size)
POINTWISE_ELEMENTS_PER_TOKEN = 13  # per block and model width: LayerNorm 2, GELU 8, add 3 (eager_bytes)


def _scaled(amount: float, time_us: dict, unit: str) -> dict:
    """amount per call over a time summary: a rate summary (the fast end of the times is the
    high end of the rate)."""
    return {
        "median": amount / time_us["median"],
        "p10": amount / time_us["p90"],
        "p90": amount / time_us["p10"],
        "min": amount / time_us["max"],
        "max": amount / time_us["min"],
        "n": time_us["n"],
        "unit": unit,
    }


def derived(results) -> dict:
    """Floors, the binding overhead and two predictions per batch size, from eager alone, and
    what the other variants' profiles say against them.

    Made before compiling, from the eager profile and the ceilings measured in the same build.
    The host binds where the GPU is busy for less than GPU_BOUND_FRACTION of eager's wall time.

    - host removed (a CUDA graph of the eager kernels): the forward takes the GPU busy time;
    - fusion without graphs (default mode): pointwise ops fuse into a neighbouring pointwise or
      reduction kernel, and here the only such neighbours are a block's residual add and the
      next block's LayerNorm (BLOCKS - 1 pairs; the matmuls in between are cuBLAS calls).
      Where the host binds, its time scales with the ops it dispatches, OPS_PER_BLOCK per block,
      one fewer per pair; where the GPU binds, each pair saves one read of a tokens x width tensor.

    The floors, shown for reference and not used as bounds (the model's matmuls, timed by the
    profiler with their inputs in L2, can run faster than the reference GEMMs timed by do_bench
    with L2 flushed): the FLOPs at that rate, the fused minimum of bytes at copy bandwidth.

    Values that combine two measurements carry a worst-case spread (coursekit.stats.ratio_spread,
    difference_spread), so that a
    claim on them rests on the spreads, not on the medians alone.
    """
    modes = results("m03/modes")
    ceilings = results("methodology/ceilings")
    bytes_per_us = ceilings["copy"]["GBps"]["median"] * 1e3  # GB/s -> bytes per us
    flops_per_us = ceilings["gemm"]["TFLOPs"]["median"] * 1e6  # TFLOP/s -> FLOPs per us
    elem = 2 if modes["dtype"] == "bfloat16" else 4
    blocks, d = modes["blocks"], modes["d_model"]
    pairs, ops = blocks - 1, OPS_PER_BLOCK * blocks
    rows = []
    for p in modes["points"]:
        t = p["tokens"]
        by_mode = p["modes"]
        eager = by_mode["eager"]
        eager_us = eager["time_us"]["median"]
        busy_us = eager["gpu_busy_us"]["median"]
        gemm_us = eager["gemm_busy_us"]["median"]
        other_us = busy_us - gemm_us
        pointwise_bytes = blocks * (POINTWISE_ELEMENTS_PER_TOKEN * t * d + 2 * d) * elem  # LN, GELU, add
        fusion_saves_us = pairs * t * d * elem / bytes_per_us
        if busy_us < GPU_BOUND_FRACTION * eager_us:
            binds = "host overhead"  # the GPU idles, waiting for the host
        elif gemm_us > other_us:
            binds = "compute"  # most of the busy time is matrix multiplication
        else:
            binds = "memory traffic"
        graphs_us = busy_us
        if busy_us <= 0:  # no GPU profile (a CPU run): no prediction
            graphs_us = fusion_us = eager_us
        elif binds == "host overhead":
            fusion_us = max(eager_us * (ops - pairs) / ops, busy_us - fusion_saves_us)
        else:
            fusion_us = eager_us - fusion_saves_us
        row = {
            "tokens": t,
            "binds": binds,
            "eager_us": eager_us,
            "gpu_busy_us": busy_us,
            "gemm_busy_us": gemm_us,
            "other_busy_us": other_us,
            "idle_us": eager_us - busy_us,
            "gpu_busy_fraction": ratio_spread(eager["gpu_busy_us"], eager["time_us"]),
            "gemm_fraction_of_busy": gemm_us / busy_us if busy_us > 0 else 0.0,
            "kernels_per_step": eager["kernels_per_step"],
            "ops_per_forward": ops,
            "fused_ops_per_forward": ops - pairs,
            "compute_floor_us": p["flops"] / flops_per_us,
            "memory_floor_us": p["bytes_min"] / bytes_per_us,
            "eager_traffic_us": p["bytes_eager"] / bytes_per_us,
            "pointwise_traffic_us": pointwise_bytes / bytes_per_us,
            "fusion_saves_us": fusion_saves_us,
            "achieved_GBps": p["bytes_eager"] / busy_us / 1e3 if busy_us > 0 else 0.0,
            "predicted_graphs_us": graphs_us,
            "predicted_graphs_speedup": eager_us / graphs_us,
            "predicted_fusion_us": fusion_us,
            "predicted_fusion_speedup": eager_us / fusion_us,
            "compiled_busy_saving_us": difference_spread(eager["gpu_busy_us"], by_mode["default"]["gpu_busy_us"]),
            "best_mode": max(by_mode, key=lambda m: by_mode[m]["speedup"]["median"]),
        }
        if gemm_us > 0:
            row["gemm_TFLOPs"] = _scaled(p["flops"] / 1e6, eager["gemm_busy_us"], "TFLOP/s")
        if "eager-cudagraph" in by_mode:  # CUDA runs: what a graph of the eager kernels leaves
            graph = by_mode["eager-cudagraph"]
            row["graph_excess_us"] = difference_spread(graph["time_us"], graph["gpu_busy_us"])  # replay above busy
            row["graph_gaps_us"] = difference_spread(graph["span_us"], graph["gpu_busy_us"])  # idle between its kernels
            row["graph_between_us"] = difference_spread(graph["time_us"], graph["span_us"])  # replay to replay
            # the host-removed rule corrected: eager's wall time over busy time plus the replay's gaps
            gaps_us = graph["span_us"]["median"] - graph["gpu_busy_us"]["median"]
            row["corrected_graphs_speedup"] = eager_us / (busy_us + gaps_us)
            row["corrected_graphs_miss"] = graph["speedup"]["median"] / row["corrected_graphs_speedup"]
            row["graph_busy_fraction"] = ratio_spread(graph["gpu_busy_us"], graph["time_us"])
        if "reduce-overhead" in by_mode:  # is reduce-overhead itself still host-bound here?
            ro = by_mode["reduce-overhead"]
            row["reduce_overhead_busy_fraction"] = ratio_spread(ro["gpu_busy_us"], ro["time_us"])
        rows.append(row)
    return {
        "copy_GBps": ceilings["copy"]["GBps"]["median"],
        "gemm_TFLOPs": ceilings["gemm"]["TFLOPs"]["median"],
        "points": rows,
        "by_tokens": {str(r["tokens"]): r for r in rows},
    }


def speedup(results) -> go.Figure:
    """Speedup over eager of each compile mode, with the predicted speedup and binding overhead."""
    data = results("m03/modes")
    rows = derived(results)["points"]
    tokens = [p["tokens"] for p in data["points"]]
    fig = go.Figure()
    for mode in data["modes"]:
        if mode == "eager":
            continue
        points = [p for p in data["points"] if mode in p["modes"]]  # max-autotune: two sizes only
        runs = [p["modes"][mode] for p in points]
        # the speedup is taken round by round (eager and the mode timed back to back); whiskers
        # span the 10th to 90th percentile of those per-round ratios
        fig.add_trace(
            go.Scatter(
                x=[p["tokens"] for p in points],
                y=[r["speedup"]["median"] for r in runs],
                # measured at every size: a solid line; at two sizes only: markers, no line between
                mode="markers" if len(points) < len(data["points"]) else "lines+markers",
                line={"dash": "solid"},
                # points alone: larger markers, so that they are not lost among the lines
                **({"marker": {"size": 11}} if len(points) < len(data["points"]) else {}),
                name=LABELS[mode],
                error_y=error_bars(*([r["speedup"][q] for r in runs] for q in ("p10", "median", "p90"))),
                customdata=[[r["time_us"]["median"], r["gpu_busy_us"]["median"]] for r in runs],
                hovertemplate="%{x} tokens: %{y:.2f}× (%{customdata[0]:.1f} µs per forward; "
                "its kernels busy for %{customdata[1]:.1f} µs)<extra>" + LABELS[mode] + "</extra>",
            )
        )
    for key, name, symbol in (
        ("graphs", "predicted: host removed (GPU busy time of eager)", "diamond-open"),
        ("fusion", "predicted: fusion only (default mode)", "square-open"),
    ):
        fig.add_trace(
            go.Scatter(
                x=tokens,
                y=[r[f"predicted_{key}_speedup"] for r in rows],
                mode="lines+markers",
                line={"dash": "dash"},
                marker={"symbol": symbol, "size": 9},
                name=name,
                customdata=[[r["binds"], r[f"predicted_{key}_us"]] for r in rows],
                hovertemplate="%{x} tokens: predicted %{y:.2f}× (%{customdata[1]:.1f} µs); "
                "eager binds on %{customdata[0]}<extra>" + name + "</extra>",
            )
        )
    # the predicted binding overhead, as shaded spans of batch sizes
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i]["binds"] != rows[start]["binds"]:
            lo = tokens[start] / 2 if start == 0 else (tokens[start - 1] * tokens[start]) ** 0.5
            hi = tokens[i - 1] * 2 if i == len(rows) else (tokens[i - 1] * tokens[i]) ** 0.5
            fig.add_vrect(
                x0=lo,
                x1=hi,
                fillcolor="grey" if rows[start]["binds"] == "host overhead" else "orange",
                opacity=0.08,
                line_width=0,
            )
            # annotations on a log axis take log10 of the position
            fig.add_annotation(
                x=math.log10((lo * hi) ** 0.5),
                y=1,
                yref="paper",
                yanchor="bottom",
                text=f"{SHORT[rows[start]['binds']]} binds",
                showarrow=False,
            )
            start = i
    fig.add_hline(y=1, line_dash="dot")
    # on a log axis an annotation's y is log10 of the value: 0 puts it on the eager line
    fig.add_annotation(x=0, xref="paper", xanchor="left", y=0, yanchor="top", text="eager = 1×", showarrow=False)
    # ticks at the measured sizes only
    fig.update_xaxes(type="log", title_text="tokens per forward", tickvals=tokens, ticktext=[f"{t:,}" for t in tokens])
    fig.update_yaxes(
        type="log",
        title_text="speedup over eager (×, log scale)",
        tickvals=[0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10],
        ticktext=["0.5", "0.7", "1", "1.5", "2", "3", "5", "7", "10"],
    )
    fig.update_layout(
        legend=legend(-0.2),
        hovermode="closest",
        height=520,
        margin=margin(t=30),
    )
    return fig


def decomposition(results) -> go.Figure:
    """Eager's wall time per forward, split by what the GPU did: matmul kernels, the other
    kernels, and idle (waiting for the host); the floors as markers."""
    d = derived(results)
    rows = d["points"]
    x = [f"{r['tokens']:,}" for r in rows]  # category labels, written with separators
    fig = go.Figure()
    for name, key in (
        ("GPU: matmul kernels (cuBLAS)", "gemm_busy_us"),
        ("GPU: LayerNorm, GELU, add kernels", "other_busy_us"),
        ("GPU idle: waiting for the host, or between kernels", "idle_us"),
    ):
        fig.add_trace(
            go.Bar(
                x=x,
                y=[max(r[key], 0.0) for r in rows],
                name=name,
                hovertemplate="%{x} tokens: %{y:.1f} µs<extra>" + name + "</extra>",
            )
        )
    for name, key, symbol in (
        (f"compute reference: FLOPs at {d['gemm_TFLOPs']:.0f} TFLOP/s", "compute_floor_us", "triangle-up"),
        ("memory floor: fused bytes at copy bandwidth", "memory_floor_us", "circle-open"),
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r[key] for r in rows],
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 11, "line": {"width": 2}},
                hovertemplate="%{x} tokens: %{y:.1f} µs<extra>" + name + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r["eager_us"] * 1.08 for r in rows],
            mode="text",
            showlegend=False,
            hoverinfo="skip",
            text=[SHORT[r["binds"]] for r in rows],
            textposition="top center",
        )
    )
    fig.update_xaxes(type="category", title_text="tokens per forward")
    fig.update_yaxes(
        title_text="eager, µs per forward",
        range=[0, max(r["eager_us"] for r in rows) * 1.2],
    )
    # The stack is eager's wall time: busy kernels plus the GPU's idle time, which is the host's.
    fig.update_layout(
        barmode="stack",
        legend=legend(-0.2),
        hovermode="closest",
        height=540,
        margin=margin(),
    )
    return fig


RUNGS = {  # short name (usable in a page's placeholder): the name m03/host_cost stores
    "eager": "eager",
    "dynamo": "dynamo (backend=eager)",
    "aot": "dynamo+aot (backend=aot_eager)",
    "inductor": "inductor (default)",
    "cpp_wrapper": "inductor (cpp_wrapper)",
    "max_autotune": "inductor (max-autotune-no-cudagraphs)",
    "reduce_overhead": "inductor (reduce-overhead)",
    "graphed": "eager in a CUDA graph",
}


RUNG_LABELS = {  # short name: the figure's label, short enough for a phone
    "eager": "eager",
    "dynamo": "Dynamo only",
    "aot": "aot_eager",
    "inductor": "default mode",
    "cpp_wrapper": "cpp_wrapper",
    "max_autotune": "max-autotune<br>(no graphs)",
    "reduce_overhead": "reduce-overhead",
    "graphed": "graph.replay()",
}
KERNELS_SHOWN = 7  # one block and the first kernel of the next


def _short_kernel(name: str) -> str:
    """A CUDA kernel's name without return type, namespaces and template arguments."""
    for noise in ("void ", "at::native::", "(anonymous namespace)::", "cublasLt::"):
        name = name.replace(noise, "")
    return name.split("<")[0].split("(")[0]


def _paired(a: list, b: list, unit: str = "us") -> dict:
    """Median and spread of a - b, sample by sample (the samples taken in the same rounds)."""
    return summarize([x - y for x, y in zip(a, b)], unit)


def ladder(results) -> dict:
    """m03/host_cost under short names, differences between rungs taken round by round, and
    the first kernels of each rung as a text table."""
    data = results("m03/host_cost")
    rungs = {
        short: {
            "host_us": data["host_us"][name],
            "issue_us": data["issue_us"][name],
            "gpu_busy_us": data["gpu_busy_us"][name],
            "span_us": data["span_us"][name],
            "kernels": data["kernels_per_forward"][name],
            "kernel_names": data["kernel_names"][name],
            **({"kernel_gap_us": data["kernel_gap_us"][name]} if name in data["kernel_gap_us"] else {}),
        }
        for short, name in RUNGS.items()
        if name in data["host_us"]
    }
    lines = []
    for short in ("eager", "inductor", "max_autotune", "reduce_overhead"):
        if short in rungs:
            first = [_short_kernel(n) for n in rungs[short]["kernel_names"][:KERNELS_SHOWN]]
            lines.append(f"{RUNGS[short]}: {rungs[short]['kernels']:.0f} kernels per forward; the first {len(first)}:")
            lines += [f"    {n}" for n in first]
    rounds = {short: data["rounds_us"][name] for short, name in RUNGS.items() if name in data["rounds_us"]}
    steps = {
        "eager_minus_dynamo_us": _paired(rounds["eager"], rounds["dynamo"]),
        "aot_minus_dynamo_us": _paired(rounds["aot"], rounds["dynamo"]),
        "aot_minus_inductor_us": _paired(rounds["aot"], rounds["inductor"]),
        "inductor_minus_eager_us": _paired(rounds["inductor"], rounds["eager"]),
        "inductor_minus_cpp_wrapper_us": _paired(rounds["inductor"], rounds["cpp_wrapper"]),
        "cpp_wrapper_fraction_saved": summarize(
            [(i - c) / i for i, c in zip(rounds["inductor"], rounds["cpp_wrapper"])], ""
        ),
        "eager_kernels_per_block": rungs["eager"]["kernels"] / data["blocks"],
        # what three of eager's op calls cost, at eager's average host time per op call
        "three_op_calls_us": 3 * rungs["eager"]["host_us"]["median"] / (OPS_PER_BLOCK * data["blocks"]),
        # the host time per kernel of the default mode's forward (host-bound: all of it is host work)
        "inductor_host_us_per_kernel": rungs["inductor"]["host_us"]["median"] / rungs["inductor"]["kernels"],
        # per call from the wrapper: cuBLAS launches its split-K reductions itself, inside addmm
        "inductor_wrapper_calls": rungs["inductor"]["kernels"]
        - sum("splitKreduce" in n for n in rungs["inductor"]["kernel_names"]),
        "eager_host_us_per_op": rungs["eager"]["host_us"]["median"] / (OPS_PER_BLOCK * data["blocks"]),
    }
    steps["inductor_host_us_per_call"] = rungs["inductor"]["host_us"]["median"] / steps["inductor_wrapper_calls"]
    steps["per_call_over_per_op"] = steps["inductor_host_us_per_call"] / steps["eager_host_us_per_op"]
    if "graphed" in rungs:  # CUDA runs
        steps["eager_minus_max_autotune_us"] = _paired(rounds["eager"], rounds["max_autotune"])
        steps["inductor_minus_max_autotune_us"] = _paired(rounds["inductor"], rounds["max_autotune"])
        steps["cpp_wrapper_minus_max_autotune_us"] = _paired(rounds["cpp_wrapper"], rounds["max_autotune"])
        steps["cpp_wrapper_minus_reduce_overhead_us"] = _paired(rounds["cpp_wrapper"], rounds["reduce_overhead"])
        steps["reduce_overhead_minus_graphed_us"] = _paired(rounds["reduce_overhead"], rounds["graphed"])
        # how much of reduce-overhead's back-to-back time its GPU is busy (the rest is host work)
        ro = rungs["reduce_overhead"]
        steps["reduce_overhead_busy_fraction"] = _scaled(ro["gpu_busy_us"], ro["host_us"], "")
        # the replay's GPU side: its kernels' busy time plus the idle gaps at each kernel boundary
        gaps = rungs["graphed"]["kernel_gap_us"]["median"] * (rungs["graphed"]["kernels"] - 1)
        steps["graphed_gaps_total_us"] = gaps
        steps["graphed_busy_plus_gaps_us"] = rungs["graphed"]["gpu_busy_us"] + gaps
        # the kernels max-autotune launches fewer than the default mode, and how many of them
        # were cuBLAS split-K reductions
        fewer = rungs["inductor"]["kernels"] - rungs["max_autotune"]["kernels"]
        steps["max_autotune_fewer_kernels"] = fewer
        steps["max_autotune_fewer_kernels_us"] = fewer * steps["inductor_host_us_per_kernel"]
        steps["split_k_kernels_removed"] = sum("splitKreduce" in n for n in rungs["inductor"]["kernel_names"]) - sum(
            "splitKreduce" in n for n in rungs["max_autotune"]["kernel_names"]
        )
    return {**rungs, **steps, "kernel_table": "\n".join(lines)}


def kernels_4096(results) -> dict:
    """The kernels of one forward at 4,096 tokens, per variant, with their device times (the
    profile in m03/modes): a text table of the first block of each, and the sums that settle
    where each variant's GPU time goes."""
    point = next(p for p in results("m03/modes")["points"] if p["tokens"] == 4096)
    out, lines = {}, []
    for mode in ("eager", "default", "max-autotune-no-cudagraphs", "reduce-overhead", "eager-cudagraph"):
        kernels = point["modes"][mode]["kernels"]
        if mode != "eager-cudagraph":  # the table: eager-cudagraph runs eager's kernels
            lines.append(f"{LABELS[mode]}: {len(kernels)} kernels per forward; the first {KERNELS_SHOWN}, µs each:")
            lines += [f"    {t:6.1f}  {_short_kernel(n)}" for n, t in kernels[:KERNELS_SHOWN]]
        out[mode] = {
            "copy_in_us": sum(t for n, t in kernels if "multi_tensor_apply" in n),  # reduce-overhead's input copy
            "template_us": sum(t for n, t in kernels if n.startswith("triton_tem")),
            "cublas_us": sum(t for n, t in kernels if "nvjet" in n or "gemm" in n),
            # every LayerNorm and residual-add kernel: eager's apart, Inductor's fused in pairs
            # (add + next LayerNorm) plus the last block's add on its own
            "norm_add_us": sum(
                t
                for n, t in kernels
                if not n.startswith("triton_tem") and ("layer_norm" in n or "CUDAFunctor_add" in n or "fused_add" in n)
            ),
            "gelu_us": sum(t for n, t in kernels if not n.startswith("triton_tem") and "gelu" in n.lower()),
        }
        # the same LayerNorm and add kernels in three groups: block one's LayerNorm (nothing to fuse
        # it with), the three block boundaries (eager: an add and a LayerNorm; Inductor: one fused
        # kernel each) and the last block's add on its own
        norm_add = [
            (n, t)
            for n, t in kernels
            if not n.startswith("triton_tem") and ("layer_norm" in n or "CUDAFunctor_add" in n or "fused_add" in n)
        ]
        out[mode]["first_norm_us"] = norm_add[0][1]
        out[mode]["last_add_us"] = norm_add[-1][1]
        out[mode]["boundaries_us"] = sum(t for _, t in norm_add[1:-1])
        # each boundary on its own: eager's add and LayerNorm summed, Inductor's one fused kernel
        bounds = norm_add[1:-1]
        step = len(bounds) // 3 if len(bounds) >= 3 else 1
        out[mode]["boundary_us"] = {
            str(i + 1): sum(t for _, t in bounds[i * step : (i + 1) * step]) for i in range(len(bounds) // step)
        }
        out[mode]["memsets"] = sum(n.startswith("Memset") for n, _ in kernels)
    # Inductor's last add on its own against eager's (it reads the whole residual stream again)
    out["default"]["last_add_over_eager"] = out["default"]["last_add_us"] / out["eager"]["last_add_us"]
    out["kernel_table"] = "\n".join(lines)
    return out


def host_ladder(results) -> go.Figure:
    """Per rung at one token: time per forward back to back, and the GPU busy time of its kernels."""
    rungs = ladder(results)
    names = [s for s in RUNGS if s in rungs]
    labels = [f"{RUNG_LABELS[s]}<br>{rungs[s]['kernels']:.0f} kernels" for s in names]
    med = [rungs[s]["host_us"]["median"] for s in names]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=labels,
            x=med,
            orientation="h",
            name="per forward, back to back",
            error_x=error_bars(
                [rungs[s]["host_us"]["p10"] for s in names], med, [rungs[s]["host_us"]["p90"] for s in names]
            ),
            hovertemplate="%{y}: %{x:.1f} µs (median; whiskers: 10th–90th percentile of the rounds)<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[rungs[s]["gpu_busy_us"] for s in names],
            mode="markers",
            name="GPU busy time (profiler)",
            marker={"symbol": "line-ns-open", "size": 22, "line": {"width": 3}},
            hovertemplate="%{y}: GPU busy %{x:.1f} µs<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title_text="rung")
    fig.update_xaxes(title_text="µs per forward, one token", dtick=100)
    fig.update_layout(
        height=560,
        margin=margin(l=170),
        legend=legend(-0.15),
    )
    return fig


ISSUE_RUNGS = {"reduce_overhead": "reduce-overhead", "inductor": "default", "graphed": "replay"}


def issue_runs(results) -> dict:
    """Issue from idle against back-to-back time per forward, for every process of both H200 runs,
    as a text table. The two are timed in separate phases of one process, so a host that changes
    speed between the phases moves one and not the other: a host-bound call from idle should take
    no longer than one back to back, and where it does, the phases ran at different host speeds."""
    names = {hardware: run for run, hardware in RUNS.items()}
    widths = (15, 9, 8)  # narrow enough for a phone
    lines = [
        "issue / back to back, µs (medians)",
        f"{'run':9s}" + "".join(f"{label:>{w}s}" for label, w in zip(ISSUE_RUNGS.values(), widths)),
    ]
    for hw, run_name in names.items():
        if hw not in results.hardware_sets():
            continue
        for process in range(1, results.processes("m03/host_cost", hardware=hw) + 1):
            data = results("m03/host_cost", hardware=hw, process=process)
            cells = "".join(
                f"{data['issue_us'][RUNGS[s]]['median']:.0f}/{data['host_us'][RUNGS[s]]['median']:.0f}".rjust(w)
                for s, w in zip(ISSUE_RUNGS, widths)
            )
            lines.append(f"{run_name + ' ' + str(process):9s}{cells}")
    return {"table": "\n".join(lines)}


def misses(results) -> dict:
    """How far each measurement landed from its prediction: measured speedup over predicted
    speedup (1 = the prediction was exact), per batch size, for the two simple rules of derived()."""
    modes = {p["tokens"]: p["modes"] for p in results("m03/modes")["points"]}
    out = {}
    for row in derived(results)["points"]:
        by_mode = modes[row["tokens"]]
        miss = {"fusion": by_mode["default"]["speedup"]["median"] / row["predicted_fusion_speedup"]}
        if "eager-cudagraph" in by_mode:  # CUDA runs only
            miss["graphs"] = by_mode["eager-cudagraph"]["speedup"]["median"] / row["predicted_graphs_speedup"]
            miss["reduce_overhead"] = by_mode["reduce-overhead"]["speedup"]["median"] / row["predicted_graphs_speedup"]
        out[str(row["tokens"])] = miss
    return {"by_tokens": out}
