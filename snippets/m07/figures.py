"""Figures and computed values for module 07: Triton kernels against their peers and the ceilings.

``results(key)`` returns a stored result's data: "m07/vector_add", "m07/softmax", "m07/matmul",
"m07/artifacts" (snippets/m07/*.py) and "methodology/ceilings" (copy bandwidth and the bf16 GEMM
rate, measured in the same build). Everything here reads the stored data generically: a matmul
step, a config field or a compiled fact added to a snippet shows up without a change here.
"""

import math
import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, BROWN, GREEN, ORANGE, PURPLE, REFERENCE, RERUN, legend, margin, number

# torch-free: figures run at site-build time without torch
from coursekit.stats import (
    error_bars,
    ratio_spread,
    summarize,
)

STEP_LABELS = {  # the matmul's steps, in the order the snippet runs them; an unknown step keeps its own name
    "tutorial": "tutorial",
    "persistent": "persistent",
    "tma": "TMA descriptors",
    "warp_specialized": "warp specialisation",
}
VARIANT_LABELS = {
    "triton": "Triton (this chapter's kernel)",
    "torch_eager": "torch.softmax (eager)",
    "torch_compile": "torch.compile(torch.softmax)",
    "torch_compile_max_autotune": "torch.compile, max-autotune",
    "liger": "Liger Kernel's softmax",
}
# One colour per series across subplots (plotly's colorway would cycle per trace); the light palette
# of docs/assets/javascripts/figures.js, legible on the dark one too.
COLORS = {
    "triton": BLUE,
    "torch_eager": ORANGE,
    "torch_compile": GREEN,
    "torch_compile_max_autotune": PURPLE,
    "liger": BROWN,
    "cublas": ORANGE,
}
DTYPE_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
TILE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")


def _time_ratio(slow: dict, fast: dict) -> dict:
    """slow / fast for two time summaries (above 1: ``fast`` is faster). Timed in the same
    interleaved rounds (both keep ``rounds`` of one length), the ratio is taken round by round;
    otherwise the worst-case spread of ``_ratio``."""
    a, b = slow.get("rounds"), fast.get("rounds")
    if a and b and len(a) == len(b):
        return summarize([x / y for x, y in zip(a, b)], "")
    return ratio_spread(slow, fast)


def _yes(flag) -> str:
    return "yes" if flag else "no"


def _step_label(step: str) -> str:
    return STEP_LABELS.get(step, step.replace("_", " "))


def _tile_text(cfg: dict) -> str:
    """A matmul config in one line: tile, stages, warps, then any other field the snippet stores."""
    tile = f"{cfg['BLOCK_M']}×{cfg['BLOCK_N']}×{cfg['BLOCK_K']}"
    text = f"{tile} tile, {cfg['num_stages']} stages, {cfg['num_warps']} warps"
    extra = [f"GROUP_M={cfg['GROUP_M']}"] if "GROUP_M" in cfg else []
    extra += [f"{k}={v}" for k, v in cfg.items() if k not in TILE_KEYS and k != "autotune_ms"]
    return text + (", " + ", ".join(extra) if extra else "")


# ---------------------------------------------------------------- vector add


def vector_add_facts(results) -> dict:
    """The vector add against torch.add and the two copies: the one timed in the same run (same
    bytes) and the ceiling of methodology/ceilings."""
    data = results("m07/vector_add")
    ceiling = results("methodology/ceilings")["copy"]["GBps"]
    rows = data["triton"]
    tutorial = next((r for r in rows if r.get("tutorial")), rows[0])
    others = [r for r in rows if r is not tutorial]
    return {
        # above 1: the Triton kernel is faster (torch.add's time over ours)
        "vs_torch_add": _time_ratio(data["torch_add"]["time_us"], tutorial["time_us"]),
        "tutorial_of_copy": ratio_spread(tutorial["GBps"], data["copy"]["GBps"]),
        "tutorial_of_ceiling": ratio_spread(tutorial["GBps"], ceiling),
        "torch_add_of_copy": ratio_spread(data["torch_add"]["GBps"], data["copy"]["GBps"]),
        "largest_slowdown_vs_tutorial": max(
            (r["time_us"]["median"] / tutorial["time_us"]["median"] - 1 for r in others), default=0.0
        ),
        "tensor_gib": data["numel"] * 4 / 2**30,
        "matches_torch": _yes(data["matches_torch"]),
    }


def vector_add_roofline(results) -> go.Figure:
    """GB/s of torch.add and of each BLOCK_SIZE / num_warps pair, against the copy of the same bytes
    in the same run and the build's copy ceiling. Dots with whiskers rather than bars: the
    differences are a few per cent, and an axis that does not start at zero would make bars lie."""
    data = results("m07/vector_add")
    ceiling = results("methodology/ceilings")["copy"]["GBps"]
    names = ["torch.add"]
    rates = [data["torch_add"]["GBps"]]
    for r in data["triton"]:
        tag = " (tutorial)" if r.get("tutorial") else ""
        names.append(f"Triton, BLOCK_SIZE {r['block_size']}, {r['num_warps']} warps{tag}")
        rates.append(r["GBps"])
    mids = [g["median"] for g in rates]
    fig = go.Figure(
        go.Scatter(
            y=names,
            x=mids,
            mode="markers",
            marker={"size": 11, "color": COLORS["triton"]},
            error_x=error_bars([g["p10"] for g in rates], mids, [g["p90"] for g in rates]),
            hovertemplate="%{y}: %{x:,.0f} GB/s (median; whiskers: 10th–90th percentile)<extra></extra>",
            name="vector add: bytes read + written per second",
        )
    )
    for value, text, dash, color in (
        (data["copy"]["GBps"]["median"], "copy of the same bytes, this run", "dash", COLORS["torch_eager"]),
        (ceiling["median"], "copy ceiling (methodology)", "dot", "grey"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[value, value],
                y=[names[0], names[-1]],
                mode="lines",
                line={"dash": dash, "color": color, "width": 2},
                name=f"{text}: {number(value)} GB/s",
                hoverinfo="skip",
            )
        )
    fig.update_yaxes(autorange="reversed", title_text="kernel and configuration")
    lo = min([g["p10"] for g in rates] + [data["copy"]["GBps"]["median"], ceiling["median"]])
    hi = max([g["p90"] for g in rates] + [data["copy"]["GBps"]["median"], ceiling["median"]])
    pad = (hi - lo) * 0.15
    fig.update_xaxes(
        title_text=f"GB/s (bytes read + written; the axis starts at {number(lo - pad)}, not at 0)",
        range=[lo - pad, hi + pad],
    )
    fig.update_layout(
        height=360,
        margin=margin(l=290),
        legend=legend(-0.25),
    )
    return fig


# ---------------------------------------------------------------- softmax


def _way(cfg: dict) -> str:
    if cfg.get("ONLINE"):
        return f"online, chunks of {cfg['CHUNK']}"
    rows = cfg.get("ROWS", 1)
    if rows == 1:
        return "one pass, 1 row per program" + (" (1-D)" if cfg.get("FLAT") else " ([1, N] block)")
    return f"one pass, {rows} rows per program"


def _row_block(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def softmax_facts(results) -> dict:
    """Per dtype and row length (key like fp32_8192): each variant's share of the copy ceiling,
    the autotuner's choice in words, and the values each thread holds in one pass; and the
    choices as a text table."""
    data = results("m07/softmax")
    ceiling = results("methodology/ceilings")["copy"]["GBps"]
    by, lines = {}, []
    lines.append(f"{'dtype':<9} {'N':>6}  {'the autotuner kept':<34} {'warps':>5} {'values/thread':>13}")
    for p in data["points"]:
        cfg = p["config"]
        key = f"{DTYPE_SHORT.get(p['dtype'], p['dtype'])}_{p['n_cols']}"
        per_thread = cfg.get("ROWS", 1) * _row_block(p["n_cols"]) // (32 * cfg["num_warps"])
        if cfg.get("ONLINE"):
            per_thread = cfg["CHUNK"] // (32 * cfg["num_warps"])
        entry = {
            "way": _way(cfg),
            "num_warps": cfg["num_warps"],
            "values_per_thread": per_thread,
            "candidates": len(cfg.get("candidates", [])),
            "n_rows": p["n_rows"],
        }
        for name, v in p["variants"].items():
            entry[f"{name}_of_ceiling"] = ratio_spread(v["GBps"], ceiling)
            # against the same variant at the shortest rows of this dtype (where whole rows fit)
            first = next(q for q in data["points"] if q["dtype"] == p["dtype"])
            entry[f"{name}_vs_{first['n_cols']}"] = ratio_spread(v["GBps"], first["variants"][name]["GBps"])
        by[key] = entry
        lines.append(f"{p['dtype']:<9} {p['n_cols']:>6}  {entry['way']:<34} {cfg['num_warps']:>5} {per_thread:>13}")
    # The races (the snippet's per-round ratios, the peer's time over ours: above 1, ours is faster):
    # those lost at the median, and the closest of those won.
    peers = {
        "vs_eager": "torch.softmax",
        "vs_compile": "torch.compile",
        "vs_max_autotune": "max-autotune",
        "vs_liger": "Liger Kernel",
    }
    races = [
        (ratio, f"{p['dtype']}, N = {p['n_cols']:,}, against {peers.get(name, name)}")
        for p in data["points"]
        for name, ratio in p.get("speedup", {}).items()
    ]
    won = [r for r in races if r[0]["median"] >= 1]
    closest = min(won, key=lambda r: r[0]["median"]) if won else None
    liger = [p["speedup"]["vs_liger"]["median"] for p in data["points"] if "vs_liger" in p.get("speedup", {})]
    # one row in one pass, as a [1, N] block over the same row as a 1-D block, at the same warps, in the
    # autotuner's own single timings (GPU sets only: the CPU has no timings): above 1, the 1-D form is faster
    flat_long, flat_short = [], []  # long: 32 or more values per thread
    for p in data["points"]:
        tuned = [c for c in p["config"].get("candidates", []) if c.get("autotune_ms") and c["ROWS"] == 1]
        for c in (c for c in tuned if not c["ONLINE"] and not c.get("FLAT", False)):
            twin = next((u for u in tuned if u.get("FLAT") and u["num_warps"] == c["num_warps"]), None)
            if twin:
                per_thread = _row_block(p["n_cols"]) // (32 * c["num_warps"])
                (flat_long if per_thread >= 32 else flat_short).append(c["autotune_ms"] / twin["autotune_ms"])
    return {
        "by": by,
        "config_table": "\n".join(lines),
        "copy_ceiling_GBps": ceiling,
        "races": len(races),
        "races_won": len(won),
        "races_lost": "; ".join(label for ratio, label in races if ratio["median"] < 1) or "none",
        "closest_win": {"ratio": closest[0], "label": closest[1]} if closest else {},
        # against Liger Kernel's softmax, where it was raced: shapes raced and won (median), the largest lead
        "liger": {"raced": len(liger), "won": sum(r >= 1 for r in liger), "best": max(liger)} if liger else {},
        "flat_gain_long": {"lowest": min(flat_long), "highest": max(flat_long)} if flat_long else {},
        "flat_gain_short": {"lowest": min(flat_short), "highest": max(flat_short)} if flat_short else {},
    }


def softmax_bandwidth(results) -> go.Figure:
    """GB/s (one read and one write of the tensor) against the row length N, per dtype: the Triton
    kernel, torch.softmax eager and compiled, and the copy ceiling."""
    data = results("m07/softmax")
    ceiling = results("methodology/ceilings")["copy"]["GBps"]["median"]
    dtypes = list(dict.fromkeys(p["dtype"] for p in data["points"]))
    fig = make_subplots(rows=1, cols=len(dtypes), shared_yaxes=True, subplot_titles=dtypes, horizontal_spacing=0.05)
    symbols = {
        "triton": "circle",
        "torch_eager": "square",
        "torch_compile": "diamond",
        "torch_compile_max_autotune": "x",
        "liger": "triangle-up",
    }
    for col, dtype in enumerate(dtypes, 1):
        points = [p for p in data["points"] if p["dtype"] == dtype]
        ns = [p["n_cols"] for p in points]
        for name in points[0]["variants"]:
            rates = [p["variants"][name]["GBps"] for p in points]
            mids = [g["median"] for g in rates]
            label = VARIANT_LABELS.get(name, name)
            fig.add_trace(
                go.Scatter(
                    x=ns,
                    y=mids,
                    mode="lines+markers",
                    name=label,
                    legendgroup=name,
                    showlegend=col == 1,
                    marker={"symbol": symbols.get(name, "circle"), "size": 8, "color": COLORS.get(name)},
                    line={"color": COLORS.get(name)},
                    error_y=error_bars([g["p10"] for g in rates], mids, [g["p90"] for g in rates]),
                    customdata=[[p["n_rows"], _way(p["config"]), p["config"]["num_warps"]] for p in points],
                    hovertemplate="N = %{x}, %{customdata[0]} rows: %{y:,.0f} GB/s"
                    + (" (%{customdata[1]}, %{customdata[2]} warps)" if name == "triton" else "")
                    + "<extra>"
                    + label
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_trace(
            go.Scatter(
                x=[ns[0], ns[-1]],
                y=[ceiling, ceiling],
                mode="lines",
                line={"dash": "dot", "color": "grey"},
                name=f"copy ceiling: {number(ceiling)} GB/s",
                legendgroup="ceiling",
                showlegend=col == 1,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(
            type="log",
            tickvals=ns,
            ticktext=[f"{n // 1024}k" for n in ns],
            title_text="row length N (elements)",
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="GB/s (one read + one write of the tensor)", rangemode="tozero", row=1, col=1)
    fig.update_layout(
        height=480,
        margin=margin(t=40),
        legend=legend(-0.2),
        hovermode="closest",
    )
    return fig


# ---------------------------------------------------------------- matmul


def _pipeline_bytes(cfg: dict, elem: int) -> int:
    """Shared memory for num_stages copies of one A tile and one B tile in flight."""
    return cfg["num_stages"] * (cfg["BLOCK_M"] * cfg["BLOCK_K"] + cfg["BLOCK_K"] * cfg["BLOCK_N"]) * elem


def _nvjet(names: list) -> dict:
    """The cuBLAS kernel a point ran (its profiler name) and the fields its name spells, read as
    nvjet names read: tile M x N, K step x stages, cluster (not documented by NVIDIA; empty if the
    name has another form)."""
    name = next((n for n in names if "gemm" in n or "nvjet" in n), names[0] if names else "")
    m = re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_", name)
    if not m:
        return {"name": name}
    tm, tn, bk, stages, cm, cn = (int(g) for g in m.groups())
    return {"name": name, "tile": f"{tm} × {tn}", "k_step": bk, "stages": stages, "cluster": f"{cm} × {cn}"}


def matmul_facts(results) -> dict:
    """Per size (key "4096") and step: the rate, its ratio to cuBLAS, to the step before and to the
    GEMM ceiling, the autotuned config in words, and the compiled facts next to the arithmetic that
    reads them (the shared memory a pipeline of num_stages tiles needs, the accumulator's registers).
    Text tables: the steps, and every candidate the autotuner timed."""
    data = results("m07/matmul")
    ceiling = results("methodology/ceilings")["gemm"]
    elem = 2 if data["dtype"] in ("bfloat16", "float16") else 4
    by_size, step_lines, tune_lines = {}, [], []
    for p in data["points"]:
        size, cublas = p["size"], p["cublas"]
        entry = {
            "cublas_of_ceiling": ratio_spread(cublas["TFLOPs"], ceiling["TFLOPs"]),
            "cublas_kernel": _nvjet(cublas.get("kernels", [])),
            "steps": {},
        }
        step_lines.append(f"{size}^3: torch.mm (cuBLAS) {cublas['TFLOPs']['median']:.0f} TFLOP/s")
        step_lines.append(
            f"  {'step':<20} {'TFLOP/s':>7} {'/cuBLAS':>7}  {'regs':>4} {'shared KiB':>10} {'wgmma':>5}"
            f" {'specialised':>11}  config"
        )
        previous = None
        for s in p["steps"]:
            cfg, facts = s["config"], s.get("compiled") or {}
            pipeline = _pipeline_bytes(cfg, elem)
            threads = 32 * cfg["num_warps"]
            row = {
                "label": _step_label(s["step"]),
                "config": _tile_text(cfg),
                "TFLOPs": s["TFLOPs"],
                "vs_cublas": _time_ratio(cublas["time_us"], s["time_us"]),  # above 1: the step is faster
                "of_ceiling": ratio_spread(s["TFLOPs"], ceiling["TFLOPs"]),
                "pipeline_kib": pipeline / 1024,
                "accumulator_regs_per_thread": cfg["BLOCK_M"] * cfg["BLOCK_N"] // threads,
                "all_written": _yes(s.get("all_written", True)),
            }
            if previous is not None:
                # above 1: faster than the step before
                row["vs_previous"] = _time_ratio(previous["time_us"], s["time_us"])
                row["previous"] = _step_label(previous["step"])
                # above 1: faster than the first step (the tutorial kernel), round by round
                row["vs_first"] = _time_ratio(p["steps"][0]["time_us"], s["time_us"])
            if facts:
                row.update(
                    {
                        "registers": facts.get("registers", 0),
                        "shared_kib": facts.get("shared_bytes", 0) / 1024,
                        "shared_minus_pipeline_kib": (facts.get("shared_bytes", 0) - pipeline) / 1024,
                        "wgmma_in_ptx": facts.get("wgmma_in_ptx", 0),
                        "setmaxnreg_in_ptx": facts.get("setmaxnreg_in_ptx", 0),
                        "specialised": _yes(facts.get("warp_specialized")),
                        "holds_a_pipeline": _yes(facts.get("shared_bytes", 0) >= pipeline),
                    }
                )
            entry["steps"][s["step"]] = row
            step_lines.append(
                f"  {row['label']:<20} {s['TFLOPs']['median']:7.0f} {row['vs_cublas']['median']:7.2f}  "
                f"{row.get('registers', 0):>4} {row.get('shared_kib', 0):>10.1f} {row.get('wgmma_in_ptx', 0):>5} "
                f"{row.get('specialised', '-'):>11}  {row['config']}"
            )
            tune_lines.append(f"{size}^3, {row['label']}: kept {row['config']}")
            for c in s.get("autotune", []):
                ms = c.get("autotune_ms")
                timing = f"{ms * 1e3:8.1f} us" if ms is not None else "  failed"
                mark = "  <- kept" if all(c.get(k) == cfg.get(k) for k in cfg) else ""
                tune_lines.append(f"    {timing}  {_tile_text(c)}{mark}")
            previous = s
        if data["raced"] in entry["steps"]:  # the step named before the run to race cuBLAS on the scoreboard
            entry["best"] = entry["steps"][data["raced"]]
        by_size[str(size)] = entry
    # The autotuner's own timing of the tile loop flattened against the same candidate unflattened:
    # above 1, the flattened loop took longer. One do_bench median per candidate, no spread.
    flatten = []
    for p in data["points"]:
        for s in p["steps"]:
            tuned = [c for c in s.get("autotune", []) if "FLATTEN" in c and c.get("autotune_ms")]
            for c in (c for c in tuned if c["FLATTEN"]):
                rest = {k: v for k, v in c.items() if k not in ("FLATTEN", "autotune_ms")}
                twin = next(
                    (u for u in tuned if not u["FLATTEN"] and all(u.get(k) == v for k, v in rest.items())), None
                )
                if twin:
                    flatten.append(c["autotune_ms"] / twin["autotune_ms"])
    return {
        "by_size": by_size,
        "flatten_cost": {"min": min(flatten), "max": max(flatten), "n": len(flatten)} if flatten else {},
        "steps_table": "\n".join(step_lines),
        "autotune_table": "\n".join(tune_lines),
        "ceiling_shape": ceiling.get("shape", ""),
    }


def matmul_steps(results) -> go.Figure:
    """TFLOP/s of each step at each size, with torch.mm (cuBLAS) timed in the same rounds and the
    same shape in the reference process; the hover names the config and the compiled facts."""
    data = results("m07/matmul")
    facts = matmul_facts(results)["by_size"]
    references = results("methodology/ceilings")
    sizes = [p["size"] for p in data["points"]]
    fig = make_subplots(
        rows=1,
        cols=len(sizes),
        shared_yaxes=True,
        subplot_titles=[f"M = N = K = {s}" for s in sizes],
        horizontal_spacing=0.05,
    )
    for col, p in enumerate(data["points"], 1):
        steps = p["steps"]
        labels = [_step_label(s["step"]) for s in steps]
        rates = [s["TFLOPs"] for s in steps]
        mids = [g["median"] for g in rates]
        rows = [facts[str(p["size"])]["steps"][s["step"]] for s in steps]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=mids,
                name="Triton, per step",
                marker={"color": COLORS["triton"]},
                legendgroup="steps",
                showlegend=col == 1,
                error_y=error_bars([g["p10"] for g in rates], mids, [g["p90"] for g in rates]),
                customdata=[
                    [r["config"], r.get("registers", "?"), r.get("shared_kib", 0), r.get("specialised", "?")]
                    for r in rows
                ],
                hovertemplate="%{x}: %{y:.0f} TFLOP/s<br>%{customdata[0]}<br>%{customdata[1]} registers per thread, "
                "%{customdata[2]:.0f} KiB shared memory, warp-specialised: %{customdata[3]}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        for summary, text, dash, color in [(p["cublas"], "torch.mm (cuBLAS), same rounds", "dash", COLORS["cublas"])]:
            value = summary["TFLOPs"]["median"]
            fig.add_trace(
                go.Scatter(
                    x=[labels[0], labels[-1]],
                    y=[value, value],
                    mode="lines",
                    line={"dash": dash, "color": color, "width": 3},
                    name=text,
                    legendgroup=text,
                    showlegend=col == 1,
                    hovertemplate=f"{text}: {number(value)} TFLOP/s<extra></extra>",
                ),
                row=1,
                col=col,
            )
        # cuBLAS at the same shape in the reference process (methodology), else the GEMM reference
        same = references.get("gemm_shapes", {}).get(f"{p['size']}^3")
        reference = (same or references["gemm"])["TFLOPs"]["median"]
        text = f"cuBLAS at {p['size']}³, reference process" if same else "GEMM reference (methodology)"
        fig.add_trace(
            go.Scatter(
                x=[labels[0], labels[-1]],
                y=[reference, reference],
                mode="lines",
                line={"dash": "dot" if col == 1 else "dashdot", "color": "grey"},  # two entries: told apart by dash
                name=f"{text}: {number(reference)} TFLOP/s",
                legendgroup=f"reference {p['size']}",
                showlegend=bool(same) or col == 1,
                hovertemplate=f"{text}: {number(reference)} TFLOP/s<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="TFLOP/s (2 M N K per product)", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="step")
    fig.update_layout(
        height=500,
        margin=margin(t=40),
        legend=legend(-0.22),
        hovermode="closest",
        bargap=0.3,
    )
    return fig


def matmul_vs_cublas(results) -> go.Figure:
    """Each step's speed relative to torch.mm (cuBLAS), cuBLAS's time over the step's taken round by
    round in the same interleaved rounds: the median ratio with the 10th to 90th percentile as
    whiskers, and the scoreboard's target. Dots, not bars: the ratios sit near 1 and the axis does not
    start at zero."""
    data = results("m07/matmul")
    facts = matmul_facts(results)["by_size"]
    bar = next((r["bar"] for r in data.get("races", [])), 1.0)
    fig = go.Figure()
    symbols = ["circle", "diamond", "square", "triangle-up"]
    for i, p in enumerate(data["points"]):
        rows = [facts[str(p["size"])]["steps"][s["step"]] for s in p["steps"]]
        ratios = [r["vs_cublas"] for r in rows]
        mids = [g["median"] for g in ratios]
        fig.add_trace(
            go.Scatter(
                x=[r["label"] for r in rows],
                y=mids,
                mode="markers",
                name=f"M = N = K = {p['size']}",
                marker={"size": 11, "symbol": symbols[i % len(symbols)]},
                offsetgroup=str(p["size"]),  # the sizes side by side at each step
                error_y=error_bars([g["p10"] for g in ratios], mids, [g["p90"] for g in ratios]),
                hovertemplate="%{x}, M = N = K = "
                + str(p["size"])
                + ": %{y:.3f} of cuBLAS's speed<br>(median of the per-round ratios; whiskers: 10th–90th percentile)"
                + "<extra></extra>",
            )
        )
    target = {"dash": "dash", "color": COLORS["cublas"], "width": 2}
    fig.add_hline(y=bar, line=target)
    # the target named in the legend, not on the plot, where a label would cover markers near 1
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=target, name="the target: as fast as cuBLAS"))
    lowest = min([bar] + [r["vs_cublas"]["p10"] for f in facts.values() for r in f["steps"].values()])
    lo = math.floor(lowest * 40 - 1) / 40  # the ratios differ by per cents: start just below the lowest
    fig.update_yaxes(
        title_text=f"speed relative to cuBLAS (its time over the step's, per round; the axis starts at {lo:.2f})",
        range=[lo, max(1.1, bar + 0.1)],
    )
    fig.update_xaxes(title_text="step")
    fig.update_layout(
        height=420,
        margin=margin(l=80),
        legend=legend(-0.18),
        hovermode="closest",
        scattermode="group",
        scattergap=0.6,
    )
    return fig


# ---------------------------------------------------------------- compiled artifacts


def artifacts_facts(results) -> dict:
    """The compiled TMA step in words and text blocks: its layouts, one line per stage where the
    matmul appears, the counts of tensor-core and copy instructions in three compiled steps, and the
    arithmetic behind its shared memory."""
    data = results("m07/artifacts")
    cfg, tma = data["config"], data["tma"]
    elem = 2  # the snippet compiles for bfloat16
    pipeline = _pipeline_bytes(cfg, elem)
    c_tile = cfg["BLOCK_M"] * cfg["BLOCK_N"] * elem
    ex = tma["excerpts"]
    excerpt_lines = [
        "TTIR   " + ex.get("ttir_dot", ""),
        "TTGIR  " + ex.get("ttgir_dot", ""),
        "PTX    " + ex.get("ptx_wgmma", ""),
        "PTX    " + ex.get("ptx_tma_load", ""),
        "SASS   " + ex.get("sass_hgmma", ""),
    ]
    rows = [
        ("TTGIR ttng.warp_group_dot", "ttgir", "warp_group_dot"),
        ("TTGIR TMA loads", "ttgir", "tma_loads"),
        ("TTGIR cp.async loads", "ttgir", "cp_async_loads"),
        ("TTGIR ttg.warp_specialize", "ttgir", "warp_specialize"),
        ("PTX wgmma.mma_async", "ptx", "wgmma"),
        ("PTX cp.async.bulk.tensor (TMA) loads", "ptx", "tma_loads"),
        ("PTX cp.async.cg (per-thread) copies", "ptx", "cp_async"),
        ("PTX setmaxnreg", "ptx", "setmaxnreg"),
        ("SASS HGMMA", "sass", "HGMMA"),
        ("SASS UTMALDG", "sass", "UTMALDG"),
        ("SASS LDGSTS", "sass", "LDGSTS"),
    ]
    steps = [("tutorial", "tutorial"), ("tma", "TMA"), ("warp_specialized", "warp-specialised")]
    count_lines = [f"{'in the code of':<38}" + "".join(f"{name:>18}" for _, name in steps)]
    for label, stage, field in rows:
        count_lines.append(f"{label:<38}" + "".join(f"{data[s].get(stage, {}).get(field, 0):>18}" for s, _ in steps))
    count_lines.append(f"{'shared memory (bytes)':<38}" + "".join(f"{data[s]['shared_bytes']:>18}" for s, _ in steps))
    count_lines.append(f"{'warps':<38}" + "".join(f"{data[s]['num_warps']:>18}" for s, _ in steps))
    return {
        "layouts": "\n".join(data["ttgir_layouts"]),
        "excerpts": "\n".join(excerpt_lines),
        "counts_table": "\n".join(count_lines),
        "pipeline_bytes": pipeline,
        "c_tile_bytes": c_tile,
        "rest_bytes": tma["shared_bytes"] - pipeline - c_tile,
        "a_tile_bytes": cfg["BLOCK_M"] * cfg["BLOCK_K"] * elem,
        "b_tile_bytes": cfg["BLOCK_K"] * cfg["BLOCK_N"] * elem,
        "accumulator_regs_per_thread": cfg["BLOCK_M"] * cfg["BLOCK_N"] // (32 * cfg["num_warps"]),
        "ws_specialised": _yes(data["warp_specialized"]["ttgir"].get("warp_specialize", 0)),
    }


# ---------------------------------------------------------------- correctness and the two runs


def correctness(results) -> dict:
    """What the GPU runs stored about correctness, in a form a claim can hold: the softmax's largest
    difference from eager's output per dtype over every row length, and the matmul's largest
    difference from torch.mm in bf16 rounding steps (ulps) at the largest output of each size."""
    soft = results("m07/softmax")
    softmax_max = {}
    for p in soft["points"]:
        diff = p.get("max_abs_diff", {}).get("triton_vs_eager", float("inf"))
        softmax_max[p["dtype"]] = max(softmax_max.get(p["dtype"], 0.0), diff)
    mm = results("m07/matmul")
    mantissa = 7 if mm["dtype"] == "bfloat16" else 10  # stored bits after the point: bf16 7, fp16 10
    ulps, written = [], []
    for p in mm["points"]:
        largest = p["max_abs_expected"]
        ulp = 2.0 ** (math.floor(math.log2(largest)) - mantissa) if largest > 0 else 1.0
        for s in p["steps"]:
            written.append(bool(s.get("all_written")) and s["max_abs_diff_vs_torch"] >= 0)
            ulps.append(s["max_abs_diff_vs_torch"] / ulp)
    return {
        "softmax_max_diff": softmax_max,
        "matmul_max_diff_ulps": max(ulps, default=float("inf")),
        "matmul_all_written": int(bool(written) and all(written)),  # 1: every step wrote every element
    }


def runs(results) -> dict:
    """The matmul race in both forced runs, side by side: cuBLAS's rate at each size in the race and
    in the reference process (methodology/ceilings, the same square shapes), the tutorial's and
    the raced step's ratio to cuBLAS, and ``cublas_drop_everywhere``: 1 when cuBLAS delivered fewer
    TFLOP/s at the largest size than at the smallest in every one of those measurements; and in how
    many (size, run) pairs the raced step's lead over the tutorial kernel clears the spread."""
    per_run, drops, cleared = {}, [], []
    for name, hardware in (("reference", REFERENCE), ("rerun", RERUN)):
        get = lambda key, hardware=hardware: results(key, hardware=hardware)  # noqa: E731
        mm, shapes = get("m07/matmul"), get("methodology/ceilings").get("gemm_shapes", {})
        facts = matmul_facts(get)["by_size"]
        row = {"gemm_reference": get("methodology/ceilings")["gemm"]}
        rates_race, rates_ref = [], []
        for p in mm["points"]:
            size = str(p["size"])
            same_shape = shapes.get(f"{size}^3", {}).get("TFLOPs")
            row[size] = {
                "cublas_race": p["cublas"]["TFLOPs"],
                "cublas_reference_process": same_shape or {},
                "tutorial_vs_cublas": facts[size]["steps"]["tutorial"]["vs_cublas"],
                "best": facts[size]["best"]["label"],
                "best_vs_cublas": facts[size]["best"]["vs_cublas"],
                "best_vs_tutorial": facts[size]["best"].get("vs_first", {}),
            }
            cleared.append(facts[size]["best"].get("vs_first", {}).get("p10", 0) > 1)
            rates_race.append(p["cublas"]["TFLOPs"]["median"])
            if same_shape:
                rates_ref.append(same_shape["median"])
        drops.append(rates_race[-1] < rates_race[0])
        if len(rates_ref) == len(rates_race):
            drops.append(rates_ref[-1] < rates_ref[0])
        per_run[name] = row
    # the softmax's autotuned choice (way, rows, warps) at each shape: in how many the two runs differ
    choices = [
        {(p["dtype"], p["n_cols"]): {k: v for k, v in p["config"].items() if k != "candidates"} for p in sm["points"]}
        for sm in (results("m07/softmax", hardware=h) for h in (REFERENCE, RERUN))
    ]
    return {
        **per_run,
        "softmax_choices_differ": sum(choices[0][k] != choices[1].get(k) for k in choices[0]),
        "cublas_drop_everywhere": int(all(drops)),
        # in how many (size, run) pairs the raced step's lead over the tutorial kernel clears the
        # rounds' spread (its 10th percentile above 1)
        "lead_over_tutorial_cleared": sum(cleared),
    }


def matmul_clocks(results) -> dict:
    """What the GPU ran at while each matmul variant was timed (``points[].clocks``, NVML sampled
    every few ms during that variant's rounds): the median SM clock and power, the share of samples
    with the software power cap or any slowdown reason set, and the median TFLOP/s over the median
    clock (medians of both, so no spread), also relative to cuBLAS's. A text table of all of it.
    Empty where the clocks were not recorded."""
    data = results("m07/matmul")
    by_size, lines, capped, slowed = {}, [], [], []
    lines.append(
        f"{'size':>5}  {'variant':<20} {'SM MHz':>6} {'W':>4} {'capped':>6} {'TFLOP/s':>7}"
        f" {'per GHz':>7} {'/cuBLAS':>7}"
    )
    for p in data["points"]:
        clocks = p.get("clocks") or {}
        if not clocks:
            continue
        rates = {"cublas": p["cublas"]["TFLOPs"]["median"], **{s["step"]: s["TFLOPs"]["median"] for s in p["steps"]}}
        entry = {}
        for name, rate in rates.items():
            c = clocks.get(name)
            if not c:
                continue
            mhz = c["sm_clock_mhz"]["median"]
            entry[name] = {
                "label": "cuBLAS" if name == "cublas" else _step_label(name),
                "mhz": mhz,
                "watts": c["power_w"]["median"],
                "capped_share": c["power_capped_share"],
                "slowdown_share": c["slowdown_share"],
                "per_ghz": rate / (mhz / 1000),
            }
            capped.append(c["power_capped_share"])
            slowed.append(c["slowdown_share"])
        base = entry.get("cublas")
        for name, row in entry.items():
            row["per_ghz_vs_cublas"] = row["per_ghz"] / base["per_ghz"] if base else None
            rel = f"{row['per_ghz_vs_cublas']:7.3f}" if base else "      -"
            lines.append(
                f"{p['size']:>5}  {row['label']:<20} {row['mhz']:6.0f} {row['watts']:4.0f} {row['capped_share']:6.0%} "
                f"{rates[name]:7.0f} {row['per_ghz']:7.0f} {rel}"
            )
        steps = [r for n, r in entry.items() if n != "cublas"]
        if base and steps:  # how far any step's clock sat from cuBLAS's, as a share of cuBLAS's
            entry["largest_clock_gap"] = max(abs(r["mhz"] - base["mhz"]) / base["mhz"] for r in steps)
        by_size[str(p["size"])] = entry
    if not by_size:
        return {}
    sizes = sorted(by_size, key=int)
    first, last = by_size[sizes[0]].get("cublas"), by_size[sizes[-1]].get("cublas")
    rate = {str(p["size"]): p["cublas"]["TFLOPs"]["median"] for p in data["points"]}
    drop = {}
    if first and last and len(sizes) > 1:  # cuBLAS from the smallest size to the largest: clock and rate
        drop = {"clock": last["mhz"] / first["mhz"], "rate": rate[sizes[-1]] / rate[sizes[0]]}
    return {
        "by_size": by_size,
        "cublas_largest_over_smallest": drop,
        "min_capped_share": min(capped),
        "max_slowdown_share": max(slowed),
        "table": "\n".join(lines),
    }


def softmax_vs_max_autotune(results) -> dict:
    """The softmax against torch.compile with max-autotune (``speedup.vs_max_autotune``, its time over
    ours, round by round): per dtype (key "bf16"), the lowest and highest median ratio past the
    shortest rows; and per point (key like fp32_32768) the fastest of our autotuner's candidates in its
    own timing (one do_bench median each, µs), to set beside max-autotune's time in the race: above
    it, no candidate we offered would have matched the tuned Inductor kernel there."""
    data = results("m07/softmax")
    by, ratios = {}, {}
    for p in data["points"]:
        ratio = p.get("speedup", {}).get("vs_max_autotune")
        if not ratio:
            continue
        short = DTYPE_SHORT.get(p["dtype"], p["dtype"])
        timed = [c["autotune_ms"] for c in p["config"].get("candidates", []) if c.get("autotune_ms")]
        by[f"{short}_{p['n_cols']}"] = {
            "ratio": ratio,
            "fastest_candidate_us": min(timed) * 1e3 if timed else None,
        }
        shortest = min(q["n_cols"] for q in data["points"] if q["dtype"] == p["dtype"])
        if p["n_cols"] > shortest:
            ratios.setdefault(short, []).append(ratio["median"])
    return {
        "by": by,
        **{short: {"min": min(r), "max": max(r)} for short, r in ratios.items()},
    }
