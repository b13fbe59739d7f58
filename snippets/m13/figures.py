"""Figures and computed values for module 13: the decision procedure applied to one model on the H200.

``results(key)`` returns a stored result's data: "m13/train_step" (a training step profiled by kernel
class, then eager against three compiled variants, one process), "m13/decode_step" (a decode step at
batch 1 and 16, five variants in the same interleaved rounds, three processes), "m13/regional" and
"m13/regional_48" (whole-model against per-block and nested-region compilation, cold and warm, each
case in its own child processes) and "m13/caches" (one cache layer warm at a time). The build ran
twice at the same code (``REFERENCE`` and ``RERUN``); the one-sample quantities (compile seconds) are
read from both by name, so that a claim about them rests on both runs. Two variants timed in the same
interleaved rounds are compared round by round (``coursekit.stats.paired``); values timed apart get
the worst case of both spreads (``coursekit.stats.ratio_spread``, ``difference_spread``). Nothing here
imports torch.
"""

import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, GREEN, ORANGE, PURPLE, RED, REFERENCE, RERUN, RUNS, WHISKERS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import difference_spread, error_bars, paired

GB, MIB = 1e9, 2**20
ANNOTATION = "Optimizer.step#AdamW.step"  # the profiler's range around AdamW.step, recorded on the GPU timeline
FUSED = re.compile(r"^triton_poi_fused_\d+$")  # the compiled decode step's per-layer kernels (no op in the name)

MODES = ["eager", "default", "default+optimizer", "reduce-overhead"]
MODE_LABELS = {
    "eager": "eager",
    "default": "compiled (default)",
    "default+optimizer": "compiled + compiled AdamW",
    "reduce-overhead": "reduce-overhead",
}
CLASS_ORDER = ["gemm", "attention", "memory_bound", "other", "optimizer"]
CLASS_LABELS = {
    "gemm": "GEMM (cuBLAS)",
    "attention": "attention (cuDNN SDPA)",
    "memory_bound": "memory-bound",
    "other": "unclassified (norm backward, sort)",
    "optimizer": "optimizer kernels",
}
CLASS_COLORS = {
    "gemm": BLUE,
    "attention": PURPLE,
    "memory_bound": ORANGE,
    "other": "#b15928",
    "optimizer": GREEN,
}
VARIANTS = ["eager", "default", "reduce-overhead", "graph", "compiled+graph"]
VARIANT_LABELS = {
    "eager": "eager",
    "default": "compiled (default)",
    "reduce-overhead": "reduce-overhead",
    "graph": "eager, captured by hand",
    "compiled+graph": "compiled, captured by hand",
}
VARIANT_COLORS = {
    "eager": "#7f7f7f",
    "default": ORANGE,
    "reduce-overhead": RED,
    "graph": BLUE,
    "compiled+graph": PURPLE,
}
STRATEGY_LABELS = {
    "whole": "whole model",
    "regional": "per block (block.compile())",
    "nested": "nested_compile_region",
}
STRATEGY_COLORS = {"whole": RED, "regional": BLUE, "nested": GREEN}
STRATEGY_SYMBOLS = {"whole": "circle", "regional": "square", "nested": "diamond"}  # told apart without colour
CASES = ["cold", "triton", "triton+autotune", "all"]
CASE_LABELS = {
    "cold": "cold: empty directory",
    "triton": "Triton cache warm",
    "triton+autotune": "+ autotune results",
    "all": "all warm (+ FX graph, AOTAutograd)",
}


# ---------------------------------------------------------------- helpers


def _scaled(s: dict, factor: float, unit: str) -> dict:
    """A summary times a positive constant."""
    return {**{k: s[k] * factor for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _train_point(data: dict, mode: str) -> dict:
    return next(p for p in data["points"] if p["mode"] == mode)


def _decode_point(data: dict, batch: int) -> dict:
    return next(p for p in data["points"] if p["batch"] == batch)


def _regional_points(results, hardware: str) -> list[dict]:
    """regional (4 and 16 layers) and regional_48, one list, from one run."""
    return (
        results("m13/regional", hardware=hardware)["points"] + results("m13/regional_48", hardware=hardware)["points"]
    )


def _case(points: list[dict], layers: int, strategy: str) -> dict | None:
    return next((p for p in points if p["layers"] == layers and p["strategy"] == strategy and "cold" in p), None)


def _annotation_us(profile: dict) -> float:
    """The profiler's AdamW.step range, which the snippet's classifier counted as an optimizer kernel."""
    return sum(k["us_per_step"] for k in profile["top_kernels"] if k["name"] == ANNOTATION)


def _class_us(profile: dict) -> dict:
    """Kernel time per class (medians over the profiles), the annotation taken out of "optimizer"."""
    out = {c: profile["class_us"][c]["median"] for c in CLASS_ORDER}
    out["optimizer"] -= _annotation_us(profile)
    return out


def _k(name: str) -> str:
    """A variant's name as a placeholder path allows it ("default+optimizer" -> "default_optimizer")."""
    return name.replace("+", "_")


def _both(values: list[float]) -> dict:
    """A one-sample quantity over the two runs: each run's value, and the lowest and highest."""
    return {"first": values[0], "second": values[1], "lo": min(values), "hi": max(values)}


# ---------------------------------------------------------------- computed values


def derived(results) -> dict:
    """Every number the page computes from stored ones.

    ``train``: per mode the kernel time by class with the AdamW.step annotation taken out of the
    optimizer class (``class_us``), the annotation itself, memory in GB, and each compiled mode's time
    saved against eager (paired by round); the fused classes' kernel time (memory-bound plus
    unclassified) in eager, which is what fusion can remove; reduce-overhead against default (paired).
    ``decode.<batch>``: what a graph saves per step (paired), the compiled+graph step over the graph
    step, the compiled step's per-layer kernels (median over those in the stored top eight) and the
    bandwidth they would reach if each read and wrote the whole KV cache once. ``perlayer.<batch>``: the
    same step with a KV buffer per layer (m13/perlayer), its compiled+graph step and that over its eager
    graph (paired). ``regional``: per layer
    count, regional's forward minus whole's per block (warm processes, worst case of both spreads) and
    whole's cold compile over regional's. ``caches``: the cold directory's layout in MiB."""
    out = {}

    train = results("m13/train_step")
    eager = _train_point(train, "eager")
    t = {"modes": {}}
    for mode in train["modes"]:
        p = _train_point(train, mode)
        prof = p["profile"]
        t["modes"][_k(mode)] = {
            "class_us": _class_us(prof),
            "kernel_us": sum(_class_us(prof).values()),
            "annotation_us": _annotation_us(prof),
            "step_ms": _scaled(p["step_us"], 1e-3, "ms"),
            "busy_ms": _scaled(prof["busy_us"], 1e-3, "ms"),
            "peak_GB": p["step_peak_bytes"] / GB,
            "reserved_kept_GB": p["reserved_kept_bytes"] / GB,
            "saved_vs_eager_ms": paired(eager["step_us"], p["step_us"], lambda a, b: (a - b) / 1e3, "ms"),
        }
    fused_eager = t["modes"]["eager"]["class_us"]
    fused_default = t["modes"]["default"]["class_us"]
    t["fusable_eager_ms"] = (fused_eager["memory_bound"] + fused_eager["other"]) / 1e3
    t["fusable_default_ms"] = (fused_default["memory_bound"] + fused_default["other"]) / 1e3
    t["fusable_removed_ms"] = t["fusable_eager_ms"] - t["fusable_default_ms"]
    t["optimizer_removed_ms"] = (
        fused_default["optimizer"] - t["modes"]["default_optimizer"]["class_us"]["optimizer"]
    ) / 1e3
    ro, default = _train_point(train, "reduce-overhead"), _train_point(train, "default")
    t["ro_minus_default_us"] = paired(ro["step_us"], default["step_us"], lambda a, b: a - b, "us")
    t["ro_over_default"] = paired(ro["step_us"], default["step_us"], lambda a, b: a / b, "x")
    t["ro_extra_reserved_GB"] = (ro["reserved_kept_bytes"] - default["reserved_kept_bytes"]) / GB
    t["adamw_state_GB"] = train["params"] * 2 * 2 / GB  # two bf16 tensors per weight
    copy_GBps = results("methodology/ceilings")["copy"]["GBps"]["median"]  # bytes read plus written per second
    # AdamW per bf16 weight reads weight, grad and both moments and writes weight and both moments: 7 x 2 bytes
    t["adamw_bytes_GB"] = train["params"] * 7 * 2 / GB
    t["adamw_floor_us"] = train["params"] * 7 * 2 / 1e3 / copy_GBps
    t["adamw_compiled_over_floor"] = t["modes"]["default_optimizer"]["class_us"]["optimizer"] / t["adamw_floor_us"]
    t["eager_busy_us_per_kernel"] = eager["profile"]["busy_us"]["median"] / eager["profile"]["kernels_per_step"]
    # the floor the ledger allows: eager's step less the fusable classes less AdamW down to its byte floor
    t["floor_ms"] = (
        eager["step_us"]["median"] / 1e3
        - t["fusable_eager_ms"]
        - (t["modes"]["eager"]["class_us"]["optimizer"] - t["adamw_floor_us"]) / 1e3
    )
    both = _train_point(train, "default+optimizer")
    t["miss_ms"] = both["step_us"]["median"] / 1e3 - t["floor_ms"]  # how far the measured step stayed above it
    for mode in train["modes"]:  # the timed step (CUDA events) less the profile's busy time: not kernel time
        p = _train_point(train, mode)
        t["modes"][_k(mode)]["outside_kernels_ms"] = (p["step_us"]["median"] - p["profile"]["busy_us"]["median"]) / 1e3
    t["tflops_eager"] = train["step_flops_approx"] / (eager["step_us"]["median"] * 1e-6) / 1e12
    t["tflop_per_step"] = train["step_flops_approx"] / 1e12
    out["train"] = t

    dec = results("m13/decode_step")
    out["decode"] = {
        "step_weight_MB": dec["step_weight_bytes"] / 1e6,
        "step_weight_read_us": dec["step_weight_bytes"] / 1e3 / copy_GBps,  # at the copy peak's byte rate
    }
    for p in dec["points"]:
        v = p["variants"]
        fused = [k["us_per_step"] for k in v["default"]["profile"]["top_kernels"] if FUSED.match(k["name"])]
        fused.sort()
        per_layer = fused[len(fused) // 2] if fused else 0.0
        cache = p["kv_cache_bytes"]
        out["decode"][str(p["batch"])] = {
            "graph_saves_us": paired(v["eager"]["step_us"], v["graph"]["step_us"], lambda a, b: a - b, "us"),
            "compiled_graph_over_graph": paired(
                v["compiled+graph"]["step_us"], v["graph"]["step_us"], lambda a, b: a / b, "x"
            ),
            "compiled_graph_minus_graph_us": paired(
                v["compiled+graph"]["step_us"], v["graph"]["step_us"], lambda a, b: a - b, "us"
            ),
            "default_over_eager_device": v["default"]["profile"]["busy_us"]["median"]
            / v["eager"]["profile"]["busy_us"]["median"],
            "fused_kernels_listed": len(fused),
            "per_layer_kernel_us": per_layer,
            "cache_MB": cache / 1e6,
            "whole_cache_GBps": 2 * cache / 1e3 / per_layer if per_layer else 0.0,
            "whole_cache_copy_us": 2 * cache / 1e3 / copy_GBps,  # the cache read and written once at the copy peak
            "graph_over_busy": v["graph"]["step_us"]["median"] / v["eager"]["profile"]["busy_us"]["median"],
        }

    per = results("m13/perlayer")  # the same decode step with a KV buffer per layer
    out["perlayer"] = {}
    for p in per["points"]:
        v = p["variants"]
        out["perlayer"][str(p["batch"])] = {
            "compiled_graph_us": v["compiled+graph"]["step_us"]["median"],
            "graph_us": v["graph"]["step_us"]["median"],
            "compiled_graph_over_graph": paired(
                v["compiled+graph"]["step_us"], v["graph"]["step_us"], lambda a, b: a / b, "x"
            ),
        }

    regional = {}
    points = results("m13/regional")["points"] + results("m13/regional_48")["points"]
    for layers in sorted({p["layers"] for p in points}):
        whole, block = _case(points, layers, "whole"), _case(points, layers, "regional")
        regional[str(layers)] = {
            "extra_per_block_us": _scaled(
                difference_spread(block["warm"]["forward_us"], whole["warm"]["forward_us"]), 1 / layers, "us"
            ),
            "forward_ms": {
                s: _scaled(c["warm"]["forward_us"], 1e-3, "ms") for s, c in (("whole", whole), ("regional", block))
            },
            "whole_over_regional_cold": whole["cold"]["first_call_s"] / block["cold"]["first_call_s"],
        }
    out["regional"] = regional

    caches = results("m13/caches")
    out["caches"] = {
        "layout_MiB": {  # "<2-char code dirs>" as code_dirs: a placeholder path allows no brackets or spaces
            ("code_dirs" if name.startswith("<") else name): row["bytes"] / MIB
            for name, row in caches["cold_dir_layout"].items()
        },
        "total_MiB": sum(row["bytes"] for row in caches["cold_dir_layout"].values()) / MIB,
    }
    return out


def both_runs(results) -> dict:
    """The one-sample quantities (compile seconds) in both runs, by name, with their lowest and
    highest: ``train.<mode>``, ``decode.<batch>.<variant>`` (process 1, the cold one), ``regional.<layers>.
    <strategy>.<cold|warm>``, ``caches.<case>``; and ratios that compare them (``*_ratio``, lo and hi
    over the runs)."""
    out = {"train": {}, "decode": {}, "regional": {}, "caches": {}}
    docs = {
        name: {run: results(f"m13/{name}", hardware=hw) for run, hw in RUNS.items()}
        for name in ("train_step", "caches")
    }
    for mode in MODES:
        out["train"][_k(mode)] = _both(
            [_train_point(docs["train_step"][run], mode)["first_call_s"]["median"] for run in RUNS]
        )
    # the decode snippet compiles in the default cache directory: cold only in the first run's first
    # process; its other processes, and the second run's, found the compiled graphs on disk
    procs = [results("m13/decode_step", hardware=hw, process=i) for hw in RUNS.values() for i in (1, 2, 3)]
    for batch in (1, 16):
        out["decode"][str(batch)] = {}
        for v in ("default", "reduce-overhead"):
            seconds = [_decode_point(d, batch)["variants"][v]["first_call_s"]["median"] for d in procs]
            out["decode"][str(batch)][_k(v)] = {
                "cold": seconds[0],
                "warm_lo": min(seconds[1:]),
                "warm_hi": max(seconds[1:]),
            }
    # steps until default mode's compile (its first step less eager's) is paid back by its saving per step
    out["train"]["payback_steps"] = _both(
        [
            (
                _train_point(docs["train_step"][run], "default")["first_call_s"]["median"]
                - _train_point(docs["train_step"][run], "eager")["first_call_s"]["median"]
            )
            / (
                (
                    _train_point(docs["train_step"][run], "eager")["step_us"]["median"]
                    - _train_point(docs["train_step"][run], "default")["step_us"]["median"]
                )
                * 1e-6
            )
            for run in RUNS
        ]
    )
    regional = {run: _regional_points(results, hw) for run, hw in RUNS.items()}
    for layers in (4, 16, 48):
        row = {}
        for strategy in ("whole", "regional", "nested"):
            cases = [_case(regional[run], layers, strategy) for run in RUNS]
            if None in cases:
                continue
            row[strategy] = {phase: _both([c[phase]["first_call_s"] for c in cases]) for phase in ("cold", "warm")}
        ratios = [
            _case(regional[run], layers, "whole")["cold"]["first_call_s"]
            / _case(regional[run], layers, "regional")["cold"]["first_call_s"]
            for run in RUNS
        ]
        row["cold_ratio"] = _both(ratios)
        extra = [  # regional's warm forward minus whole's, per block (medians; host wall time)
            (
                _case(regional[run], layers, "regional")["warm"]["forward_us"]["median"]
                - _case(regional[run], layers, "whole")["warm"]["forward_us"]["median"]
            )
            / layers
            for run in RUNS
        ]
        row["extra_per_block_us"] = _both(extra)
        out["regional"][str(layers)] = row
    for case in CASES:
        out["caches"][_k(case)] = _both(
            [
                next(c for c in docs["caches"][run]["cases"] if c["case"] == case)["first_call_s"]["median"]
                for run in RUNS
            ]
        )
    c = out["caches"]
    for name, a, b in (
        ("cold_over_all", "cold", "all"),
        ("cold_over_triton", "cold", "triton"),
        ("triton_over_autotune", "triton", "triton_autotune"),
        ("autotune_over_all", "triton_autotune", "all"),
    ):
        c[name] = _both([c[a][run] / c[b][run] for run in RUNS])
    return out


# ---------------------------------------------------------------- figures


def train_classes(results) -> go.Figure:
    """The training step's kernel time by class for each variant (stacked; the profiler's AdamW.step
    range taken out of the optimizer class), beside the measured step time with its spread."""
    train = results("m13/train_step")
    fig = go.Figure()
    labels = [MODE_LABELS[m] for m in train["modes"]]
    for c in CLASS_ORDER:
        ys = [_class_us(_train_point(train, m)["profile"])[c] / 1e3 for m in train["modes"]]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=ys,
                name=CLASS_LABELS[c],
                marker={"color": CLASS_COLORS[c]},
                offsetgroup="kernels",
                hovertemplate="%{y:.2f} ms per step<extra>" + CLASS_LABELS[c] + "</extra>",
            )
        )
    steps = [_train_point(train, m)["step_us"] for m in train["modes"]]
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=[s["median"] / 1e3 for s in steps],
            mode="markers",
            marker={"color": "black", "symbol": "diamond", "size": 11},
            error_y=error_bars(
                [s["p10"] / 1e3 for s in steps], [s["median"] / 1e3 for s in steps], [s["p90"] / 1e3 for s in steps]
            ),
            name="measured step (CUDA events; " + WHISKERS + ")",
            hovertemplate="%{y:.2f} ms per step<extra>measured step</extra>",
        )
    )
    fig.update_layout(
        barmode="stack",
        height=460,
        yaxis={"title": {"text": "time per training step (ms)"}, "rangemode": "tozero"},
        xaxis={"title": {"text": "variant"}},
        margin=margin(r=10, b=40),
        legend=legend(-0.12),
        hovermode="closest",
    )
    return fig


def decode_variants(results) -> go.Figure:
    """The decode step per variant, one panel per batch: bars are process 1's median host wall time
    per step with its 10th-90th percentile, hollow markers every process's median in both runs, and a
    dash the device-busy time from the profile (what the GPU actually worked)."""
    first = [results("m13/decode_step", hardware=REFERENCE, process=i) for i in (1, 2, 3)]
    second = [results("m13/decode_step", hardware=RERUN, process=i) for i in (1, 2, 3)]
    batches = [p["batch"] for p in first[0]["points"]]
    fig = make_subplots(
        rows=1, cols=len(batches), subplot_titles=[f"batch {b}" for b in batches], horizontal_spacing=0.1
    )
    short = {
        "eager": "eager",
        "default": "compiled",
        "reduce-overhead": "reduce-<br>overhead",
        "graph": "eager<br>+ graph",
        "compiled+graph": "compiled<br>+ graph",
    }
    for col, b in enumerate(batches, 1):
        for x, name in enumerate(VARIANTS):
            v = _decode_point(first[0], b)["variants"][name]
            s = v["step_us"]
            fig.add_trace(
                go.Bar(
                    x=[x],
                    y=[s["median"]],
                    name=VARIANT_LABELS[name],
                    legendgroup=name,
                    showlegend=col == 1,
                    marker={"color": VARIANT_COLORS[name]},
                    error_y=error_bars([s["p10"]], [s["median"]], [s["p90"]]),
                    hovertemplate="%{y:,.0f} µs per step (process 1)<extra>" + VARIANT_LABELS[name] + "</extra>",
                ),
                row=1,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=[x],
                    y=[v["profile"]["busy_us"]["median"]],
                    mode="markers",
                    marker={"color": "black", "symbol": "line-ew-open", "size": 26, "line": {"width": 3}},
                    name="device busy (profile)",
                    legendgroup="busy",
                    showlegend=col == 1 and x == 0,
                    hovertemplate="%{y:,.0f} µs of kernels per step<extra>" + VARIANT_LABELS[name] + "</extra>",
                ),
                row=1,
                col=col,
            )
            for label, procs, symbol, shift in (
                ("each process's median", first, "circle-open", -0.2),
                ("each process's median, second run", second, "diamond-open", 0.2),
            ):
                fig.add_trace(
                    go.Scatter(
                        x=[x + shift] * len(procs),
                        y=[_decode_point(r, b)["variants"][name]["step_us"]["median"] for r in procs],
                        mode="markers",
                        marker={"color": "black", "symbol": symbol, "size": 7},
                        name=label,
                        legendgroup=label,
                        showlegend=col == 1 and x == 0,
                        hovertemplate="%{y:,.0f} µs per step<extra>" + VARIANT_LABELS[name] + ", " + label + "</extra>",
                    ),
                    row=1,
                    col=col,
                )
        fig.update_xaxes(
            tickvals=list(range(len(VARIANTS))),
            ticktext=[short[n] for n in VARIANTS],
            title_text="variant",
            row=1,
            col=col,
        )
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_yaxes(title_text="time per decode step (µs)", row=1, col=1)
    fig.update_layout(
        height=480,
        margin=margin(r=10, t=40),
        legend=legend(-0.2),
        hovermode="closest",
        bargap=0.3,
    )
    return fig


def regional_compile(results) -> go.Figure:
    """Whole-model, per-block and nested-region compilation at 4, 16 and 48 layers: the first call's
    seconds cold and warm (one sample per case per run: filled markers the first run, hollow the
    second), and the steady forward time of the warm process (median, 10th-90th percentile)."""
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=["first call, cold cache", "first call, warm cache", "steady forward (warm process)"],
        horizontal_spacing=0.08,
    )
    for run, hw in RUNS.items():
        points = _regional_points(results, hw)
        hollow = run == "second"
        for strategy in ("whole", "regional", "nested"):
            cases = sorted((p for p in points if p["strategy"] == strategy and "cold" in p), key=lambda p: p["layers"])
            if not cases:
                continue
            xs = [p["layers"] for p in cases]
            label = STRATEGY_LABELS[strategy] + (" (second run)" if hollow else "")
            style = {
                "color": STRATEGY_COLORS[strategy],
                "symbol": STRATEGY_SYMBOLS[strategy] + ("-open" if hollow else ""),
                "size": 10,
                "line": {"width": 2, "color": STRATEGY_COLORS[strategy]},
            }
            line = {"color": STRATEGY_COLORS[strategy], "dash": "dot" if hollow else "solid"}
            for col, phase in ((1, "cold"), (2, "warm")):
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[p[phase]["first_call_s"] for p in cases],
                        mode="lines+markers",
                        marker=style,
                        line=line,
                        name=label,
                        legendgroup=label,
                        showlegend=col == 1,
                        hovertemplate="%{x} layers: %{y:.1f} s<extra>" + label + ", " + phase + "</extra>",
                    ),
                    row=1,
                    col=col,
                )
            fwd = [p["warm"]["forward_us"] for p in cases]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[s["median"] / 1e3 for s in fwd],
                    mode="lines+markers",
                    marker=style,
                    line=line,
                    error_y=error_bars(
                        [s["p10"] / 1e3 for s in fwd], [s["median"] / 1e3 for s in fwd], [s["p90"] / 1e3 for s in fwd]
                    ),
                    name=label,
                    legendgroup=label,
                    showlegend=False,
                    hovertemplate="%{x} layers: %{y:.2f} ms<extra>" + label + ", forward</extra>",
                ),
                row=1,
                col=3,
            )
    for col in (1, 2, 3):
        fig.update_xaxes(title_text="layers", type="log", tickvals=[4, 16, 48], row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_yaxes(title_text="seconds (compile and one forward)", row=1, col=1)
    fig.update_yaxes(title_text="ms per forward", row=1, col=3)  # whiskers: in the page's caption
    fig.update_layout(
        height=460,
        margin=margin(r=10, t=40, b=50),
        legend=legend(-0.2),
        hovermode="closest",
    )
    return fig


def cache_layers(results) -> go.Figure:
    """The first call's seconds of a 2-layer model under max-autotune-no-cudagraphs with one more cache
    layer warm at a time; one sample per case in each run, both runs drawn."""
    fig = go.Figure()
    for run, hw in RUNS.items():
        data = results("m13/caches", hardware=hw)
        cases = {c["case"]: c for c in data["cases"]}
        fig.add_trace(
            go.Bar(
                x=[CASE_LABELS[c] for c in CASES],
                y=[cases[c]["first_call_s"]["median"] for c in CASES],
                name=f"{run} run",
                marker={"color": BLUE if run == "first" else "#9ecae1"},
                customdata=[
                    [cases[c]["gemm_autotunings"], cases[c]["fxgraph_cache_hit"], cases[c]["autograd_cache_hit"]]
                    for c in CASES
                ],
                hovertemplate=(
                    "%{y:.1f} s<br>GEMM autotunings counted: %{customdata[0]}<br>FX graph cache hits: "
                    "%{customdata[1]}<br>AOTAutograd cache hits: %{customdata[2]}<extra>" + run + " run</extra>"
                ),
            )
        )
    fig.update_layout(
        barmode="group",
        height=420,
        yaxis={"title": {"text": "seconds to the first output (compile and one forward)"}, "rangemode": "tozero"},
        xaxis={"title": {"text": "cache layers warm"}},
        margin=margin(r=10, b=40),
        legend=legend(-0.15),
        hovermode="closest",
    )
    return fig


# ---------------------------------------------------------------- the training step's ledger


def ledger(results) -> dict:
    """The training step's ledger, in ms: per row the eager time, what its tool could take off at most,
    and what compiling the model and AdamW took off (eager less ``default+optimizer``, medians).

    Rows: ``gemm`` and ``attention`` (library kernels: no tool takes them off), ``fusable``
    (memory-bound plus unclassified kernels: fusion takes off at most all of it), ``adamw`` (the
    optimizer's kernels, the AdamW.step annotation taken out: a compiled AdamW at most down to its
    byte floor), ``outside`` (the timed step less the kernel classes: idle time and host work between
    kernels) and ``step`` (the whole step; ``at_most`` is what the rows above allow together, ``floor``
    what that leaves). The rows add up to the step in each column."""
    d = derived(results)["train"]
    train = results("m13/train_step")
    eager, both = d["modes"]["eager"]["class_us"], d["modes"]["default_optimizer"]["class_us"]
    step = {m: _train_point(train, m)["step_us"]["median"] / 1e3 for m in ("eager", "default+optimizer")}
    rows = {
        "gemm": (eager["gemm"], both["gemm"], 0.0),
        "attention": (eager["attention"], both["attention"], 0.0),
        "fusable": (
            eager["memory_bound"] + eager["other"],
            both["memory_bound"] + both["other"],
            eager["memory_bound"] + eager["other"],
        ),
        "adamw": (eager["optimizer"], both["optimizer"], eager["optimizer"] - d["adamw_floor_us"]),
    }
    out = {name: {"eager": e / 1e3, "removed": (e - c) / 1e3, "at_most": m / 1e3} for name, (e, c, m) in rows.items()}
    kernels = {run: sum(v[run] for v in rows.values()) / 1e3 for run in (0, 1)}
    out["outside"] = {
        "eager": step["eager"] - kernels[0],
        "removed": (step["eager"] - kernels[0]) - (step["default+optimizer"] - kernels[1]),
    }
    out["outside"]["added"] = -out["outside"]["removed"]  # it grew: the page says by how much
    at_most = sum(r["at_most"] for r in out.values() if "at_most" in r)
    out["step"] = {
        "eager": step["eager"],
        "compiled": step["default+optimizer"],
        "removed": step["eager"] - step["default+optimizer"],
        "at_most": at_most,
        "floor": step["eager"] - at_most,
    }
    return out


def regional_forward(results) -> dict:
    """Per layer count, the per-block model's steady forward over the whole model's (warm processes,
    medians of host wall time) in each run, with the lowest and highest: above 1, per block was slower."""
    out = {}
    points = {run: _regional_points(results, hw) for run, hw in RUNS.items()}
    for layers in (4, 16, 48):
        out[str(layers)] = _both(
            [
                _case(points[run], layers, "regional")["warm"]["forward_us"]["median"]
                / _case(points[run], layers, "whole")["warm"]["forward_us"]["median"]
                for run in RUNS
            ]
        )
    return out
