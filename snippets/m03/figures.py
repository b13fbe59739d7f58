"""Figures for module 03: what each torch.compile mode buys against batch size, and why.

``results(key)`` returns a stored result's data: "m03/modes" (snippets/m03/modes.py) and
"methodology/ceilings" (copy bandwidth and bf16 GEMM rate, measured in the same build).
The ceilings turn the snippet's FLOPs and bytes into floors; ``derived`` does that once.
"""
import math

import plotly.graph_objects as go

LABELS = {
    "eager": "eager",
    "eager-cudagraph": "eager in a CUDA graph (torch.cuda.graph)",
    "default": "torch.compile (default)",
    "reduce-overhead": 'mode="reduce-overhead" (CUDA graphs)',
    "max-autotune-no-cudagraphs": 'mode="max-autotune-no-cudagraphs"',
}
SHORT = {"CPU overhead": "CPU", "memory traffic": "memory", "compute": "compute"}


def _spread(lows, mids, highs):
    """Error bars from the 10th to the 90th percentile around the median."""
    return {"type": "data", "symmetric": False, "array": [h - m for m, h in zip(mids, highs)],
            "arrayminus": [m - lo for lo, m in zip(lows, mids)]}


def derived(results) -> dict:
    """Floors, the binding overhead and two predictions per batch size, from eager alone.

    Made before compiling, from the eager profile and the ceilings measured in the same build:

    - host removed (CUDA graphs): the forward takes the GPU busy time, less what fusion saves;
    - fusion without graphs (default mode): where the host binds, its time scales with the
      number of launches, and fusion removes one per adjacent pair of elementwise ops (here the
      residual add and the next block's LayerNorm, BLOCKS - 1 pairs); where the GPU binds, the
      forward loses the fused pair's HBM round trip (one T x d tensor written and read back).

    Nothing is predicted below the floors: the FLOPs at the GEMM ceiling, the fused minimum of
    bytes at the copy ceiling.
    """
    modes = results("m03/modes")
    ceilings = results("methodology/ceilings")
    bytes_per_us = ceilings["copy"]["GBps"]["median"] * 1e3    # GB/s -> bytes per us
    flops_per_us = ceilings["gemm"]["TFLOPs"]["median"] * 1e6  # TFLOP/s -> FLOPs per us
    elem = 2 if modes["dtype"] == "bfloat16" else 4
    fusable_pairs = modes["blocks"] - 1
    rows = []
    for p in modes["points"]:
        eager = p["modes"]["eager"]
        eager_us = eager["time_us"]["median"]
        issue_us = eager["issue_us"]["median"]
        busy_us = eager["gpu_busy_us"]["median"]
        kernels = eager["kernels_per_step"]
        compute_floor_us = p["flops"] / flops_per_us
        memory_floor_us = p["bytes_min"] / bytes_per_us
        eager_traffic_us = p["bytes_eager"] / bytes_per_us
        fusion_saves_us = 2 * fusable_pairs * p["tokens"] * modes["d_model"] * elem / bytes_per_us
        floor_us = max(compute_floor_us, memory_floor_us)
        if issue_us > busy_us:
            binds = "CPU overhead"      # the GPU waits for the host
        elif compute_floor_us > eager_traffic_us:
            binds = "compute"           # the matmuls' FLOPs outweigh every byte eager moves
        else:
            binds = "memory traffic"
        graphs_us = max(busy_us - fusion_saves_us, floor_us)
        fused_kernels = kernels - fusable_pairs
        if busy_us <= 0:  # no GPU profile (a CPU run): no prediction
            graphs_us, fusion_us = eager_us, eager_us
        elif binds == "CPU overhead":
            fusion_us = max(eager_us * fused_kernels / kernels, busy_us - fusion_saves_us)
        else:
            fusion_us = max(eager_us - fusion_saves_us, floor_us)
        rows.append({
            "tokens": p["tokens"],
            "binds": binds,
            "eager_us": eager_us,
            "issue_us": issue_us,
            "gpu_busy_us": busy_us,
            "gpu_busy_fraction": busy_us / eager_us,
            "idle_us": eager_us - busy_us,
            "kernels_per_step": kernels,
            "predicted_fused_kernels": fused_kernels,
            "compute_floor_us": compute_floor_us,
            "memory_floor_us": memory_floor_us,
            "eager_traffic_us": eager_traffic_us,
            "fusion_saves_us": fusion_saves_us,
            "achieved_GBps": p["bytes_eager"] / busy_us / 1e3 if busy_us > 0 else 0.0,
            "achieved_TFLOPs": p["flops"] / busy_us / 1e6 if busy_us > 0 else 0.0,
            "compiled_busy_us": p["modes"]["default"]["gpu_busy_us"]["median"],
            "compiled_busy_saving_us": busy_us - p["modes"]["default"]["gpu_busy_us"]["median"],
            "compiled_kernels_per_step": p["modes"]["default"]["kernels_per_step"],
            "predicted_graphs_us": graphs_us,
            "predicted_graphs_speedup": eager_us / graphs_us,
            "predicted_fusion_us": fusion_us,
            "predicted_fusion_speedup": eager_us / fusion_us,
            "measured_speedup": {m: p["modes"][m]["speedup"] for m in modes["modes"]},
            # what the measured modes leave on the table (CUDA runs only)
            **({"graph_excess_per_kernel_us": (p["modes"]["eager-cudagraph"]["time_us"]["median"] - busy_us) / kernels,
                "reduce_overhead_wrapper_us": p["modes"]["reduce-overhead"]["time_us"]["median"]
                - p["modes"]["eager-cudagraph"]["time_us"]["median"]}
               if "reduce-overhead" in p["modes"] else {}),
            "best_mode": max(modes["modes"], key=lambda m: p["modes"][m]["speedup"]),
        })
    wrapper = [r["reduce_overhead_wrapper_us"] for r in rows if "reduce_overhead_wrapper_us" in r]
    return {
        **({"reduce_overhead_wrapper_min_us": min(wrapper), "reduce_overhead_wrapper_max_us": max(wrapper)}
           if wrapper else {}),
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
        runs = [p["modes"][mode] for p in data["points"]]
        eager = [p["modes"]["eager"]["time_us"]["median"] for p in data["points"]]
        # the spread of the mode's own time: eager median over its 90th and 10th percentiles
        fig.add_trace(go.Scatter(
            x=tokens, y=[r["speedup"] for r in runs], mode="lines+markers", name=LABELS[mode],
            error_y=_spread([e / r["time_us"]["p90"] for e, r in zip(eager, runs)], [r["speedup"] for r in runs],
                            [e / r["time_us"]["p10"] for e, r in zip(eager, runs)]),
            customdata=[[r["time_us"]["median"], f"compiled in {r['first_call_s']['median']:.1f} s"
                          if "first_call_s" in r else "captured, not compiled"] for r in runs],
            hovertemplate="%{x} tokens: %{y:.2f}× (%{customdata[0]:.1f} µs per forward, "
                          "%{customdata[1]})<extra>" + LABELS[mode] + "</extra>",
        ))
    for key, name, symbol in (("graphs", "predicted: host removed (CUDA graphs)", "diamond-open"),
                              ("fusion", "predicted: fusion only (default mode)", "square-open")):
        fig.add_trace(go.Scatter(
            x=tokens, y=[r[f"predicted_{key}_speedup"] for r in rows], mode="lines+markers+text",
            line={"dash": "dash"}, marker={"symbol": symbol, "size": 9}, name=name,
            text=[SHORT[r["binds"]] if key == "graphs" else "" for r in rows], textposition="top center",
            customdata=[[r["binds"], r[f"predicted_{key}_us"]] for r in rows],
            hovertemplate="%{x} tokens: predicted %{y:.2f}× (%{customdata[1]:.1f} µs); "
                          "eager binds on %{customdata[0]}<extra>" + name + "</extra>",
        ))
    fig.add_hline(y=1, line_dash="dot")
    # on a log axis an annotation's y is log10 of the value: 0 puts it on the eager line
    fig.add_annotation(x=1, xref="paper", xanchor="right", y=0, yanchor="top", text="eager = 1×", showarrow=False)
    fig.update_xaxes(type="log", title_text="tokens per forward")
    fig.update_yaxes(type="log", title_text="speedup over eager (×, log scale)")
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.2}, hovermode="closest",
                      height=520, margin={"l": 70, "r": 20, "t": 20, "b": 60})
    return fig


def decomposition(results) -> go.Figure:
    """Per batch size: host issue time, GPU busy time and the two floors against eager's wall time."""
    d = derived(results)
    rows = d["points"]
    x = [str(r["tokens"]) for r in rows]
    bars = [
        ("host issue time (CPU overhead)", "issue_us"),
        ("GPU busy time (profiler, kernels)", "gpu_busy_us"),
        (f"eager HBM traffic at {d['copy_GBps']:.0f} GB/s", "eager_traffic_us"),
        ("memory floor: fused bytes at copy bandwidth", "memory_floor_us"),
        (f"compute floor: FLOPs at {d['gemm_TFLOPs']:.0f} TFLOP/s", "compute_floor_us"),
    ]
    points = results("m03/modes")["points"]
    fig = go.Figure()
    for name, key in bars:
        measured = key in ("issue_us", "gpu_busy_us")  # the floors are computed, not sampled
        spread = [p["modes"]["eager"][key] for p in points] if measured else None
        fig.add_trace(go.Bar(
            x=x, y=[r[key] for r in rows], name=name,
            error_y=_spread([s["p10"] for s in spread], [s["median"] for s in spread],
                            [s["p90"] for s in spread]) if measured else None,
            hovertemplate="%{x} tokens: %{y:.1f} µs<extra>" + name + "</extra>",
        ))
    fig.add_trace(go.Scatter(
        x=x, y=[r["eager_us"] for r in rows], mode="markers+text", name="eager wall time per forward",
        error_y=_spread(*([p["modes"]["eager"]["time_us"][q] for p in points] for q in ("p10", "median", "p90"))),
        marker={"symbol": "line-ew-open", "size": 28, "line": {"width": 3}},
        text=[SHORT[r["binds"]] for r in rows], textposition="top center",
        customdata=[[r["binds"], r["kernels_per_step"]] for r in rows],
        hovertemplate="%{x} tokens: eager %{y:.1f} µs, %{customdata[1]} kernels; "
                      "binds: %{customdata[0]}<extra></extra>",
    ))
    positive = [r[k] for r in rows for _, k in bars if r[k] > 0] + [r["eager_us"] for r in rows]
    fig.update_xaxes(type="category", title_text="tokens per forward (log-spaced)")
    fig.update_yaxes(type="log", title_text="time per forward (µs, log scale; bars: 10th–90th pct.)",
                     range=[math.log10(min(positive)) - 0.2, math.log10(max(positive)) + 0.5])
    # The overheads overlap in time (the host issues while the GPU runs): grouped, not stacked.
    fig.update_layout(barmode="group", legend={"orientation": "h", "yanchor": "top", "y": -0.2},
                      hovermode="closest", height=520, margin={"l": 70, "r": 20, "t": 20, "b": 60})
    return fig


RUNGS = {  # short name (usable in a page's placeholder): the name m03/host_cost stores
    "eager": "eager",
    "dynamo": "dynamo (backend=eager)",
    "aot": "dynamo+aot (backend=aot_eager)",
    "inductor": "inductor (default)",
    "max_autotune": "inductor (max-autotune-no-cudagraphs)",
    "reduce_overhead": "inductor (reduce-overhead)",
    "graphed": "eager in a CUDA graph",
}


KERNELS_SHOWN = 7  # one block and the first kernel of the next


def _short_kernel(name: str) -> str:
    """A CUDA kernel's name without return type, namespaces and template arguments."""
    for noise in ("void ", "at::native::", "(anonymous namespace)::"):
        name = name.replace(noise, "")
    return name.split("<")[0].split("(")[0]


def ladder(results) -> dict:
    """m03/host_cost under short names, and one block's kernels per rung as a text table."""
    data = results("m03/host_cost")
    rungs = {short: {"host_us": data["host_us"][name], "kernels": data["kernels_per_forward"][name],
                     "kernel_names": data["kernel_names"][name]}
             for short, name in RUNGS.items() if name in data["host_us"]}
    lines = []
    for short in ("eager", "inductor", "max_autotune", "reduce_overhead"):
        if short in rungs:
            first = [_short_kernel(n) for n in rungs[short]["kernel_names"][:KERNELS_SHOWN]]
            lines.append(f"{RUNGS[short]}: {rungs[short]['kernels']:.0f} kernels per forward; the first {len(first)}:")
            lines += [f"    {n}" for n in first]
    step = {}
    if "graphed" in rungs:
        med = {s: r["host_us"]["median"] for s, r in rungs.items()}
        step = {"dynamo_minus_eager_us": med["dynamo"] - med["eager"], "aot_minus_dynamo_us": med["aot"] - med["dynamo"],
                "aot_minus_inductor_us": med["aot"] - med["inductor"],
                "reduce_overhead_minus_graphed_us": med["reduce_overhead"] - med["graphed"]}
    return {**rungs, **step, "kernel_table": "\n".join(lines)}


def host_ladder(results) -> go.Figure:
    """Host time per forward at one token, adding one layer of torch.compile at a time."""
    rungs = ladder(results)
    names = [s for s in RUNGS if s in rungs]
    med = [rungs[s]["host_us"]["median"] for s in names]
    fig = go.Figure(go.Bar(
        y=[f"{RUNGS[s]} · {rungs[s]['kernels']:.0f} kernels" for s in names], x=med, orientation="h",
        error_x=_spread([rungs[s]["host_us"]["p10"] for s in names], med, [rungs[s]["host_us"]["p90"] for s in names]),
        hovertemplate="%{y}: %{x:.1f} µs per forward (median; whiskers: 10th–90th percentile)<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="µs per forward at one token")
    fig.update_layout(height=380, margin={"l": 300, "r": 20, "t": 20, "b": 60}, showlegend=False)
    return fig
