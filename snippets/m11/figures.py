"""Figures and computed values for module 11: a mixture-of-experts layer's routing, the four ways to
run its experts, the course's Triton grouped GEMMs (pointer loads, then TMA) against torch._grouped_mm,
torch.compile on each way, and expert parallelism over two GPUs.

``results(key)`` returns a stored result's data: "m11/routing" (router load and capacity drops), "m11/routes"
(the four routes against a dense GEMM chain of the same FLOPs, the parts, the host sync), "m11/grouped_gemm"
(the two grouped GEMMs: torch in both layouts, the two Triton kernels, dense), "m11/compiled" (Dynamo and
Inductor on each route), "m11/expert_parallel" (one layer over 1 and 2 GPUs) and "methodology/ceilings" (the
copy bandwidth and bf16 GEMM rate of the same machine). Each computed-value function reads only the results it
needs, so a number's provenance names only those. Ratios of two variants timed in the same interleaved rounds
are taken round by round (``coursekit.stats.paired``); a ratio of two summaries timed apart takes the worst
case of both spreads (``coursekit.stats.ratio_spread``). Nothing here imports torch.
"""

import math
import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, GREEN, ORANGE, RED, RUNS, legend, margin
from coursekit.stats import error_bars, paired, ratio_spread, summarize

SHAPES = ("mixtral", "qwen3")
SHAPE_LABELS = {  # short: two subplot titles share the column's width
    "mixtral": "Mixtral-like (8 experts, top-2)",
    "qwen3": "Qwen-like (128 experts, top-8)",
}
SHAPE_SHORT = {"mixtral": "Mixtral-like", "qwen3": "Qwen-like"}
ROUTES = ("dense", "loop", "padded_bmm", "grouped_torch", "triton_grouped")
ROUTE_LABELS = {
    "dense": "dense GEMMs of the same FLOPs (yardstick)",
    "loop": "loop over experts (host sync)",
    "padded_bmm": "padded bmm at capacity factor 1.25",
    "grouped_torch": "sort-permute + torch._grouped_mm",
    "triton_grouped": "sort-permute + the course's Triton grouped GEMM (pointer loads)",
}
WAY_LABELS = {"grouped_torch": "torch._grouped_mm", "triton_grouped": "the Triton kernel"}
COLORS = {
    "dense": "grey",
    "loop": ORANGE,
    "padded_bmm": "#8e44ad",
    "grouped_torch": BLUE,
    "triton_grouped": GREEN,
}
ALPHA_COLORS = {0.0: BLUE, 0.25: GREEN, 0.5: ORANGE, 1.0: RED}
BF16_BYTES = 2
TILE_ROWS = 128  # CUTLASS's row tile in torch._grouped_mm when groups average over 128 rows (GroupMM.cu)
SYNC_MARK = "called a synchronizing"  # set_sync_debug_mode's message for a synchronizing call (not its notice)
EP_PHASES = ("route", "permute", "count_exchange", "host_sync", "dispatch", "experts", "combine", "unpermute")
EP_COLORS = {
    "route": GREEN,  # route, permute, unpermute: three hues, not three greys
    "permute": "#8e44ad",
    "count_exchange": "#f5b041",
    "host_sync": RED,
    "dispatch": ORANGE,
    "experts": BLUE,
    "combine": "#d35400",
    "unpermute": "#c39bd3",
}


# ---------------------------------------------------------------- helpers


def _alpha_label(alpha: float) -> str:
    return "random router" if alpha == 0 else f"skewed, alpha {alpha:g}"


def _routing_point(data: dict, shape: str, tokens: int, alpha: float) -> dict:
    return next(p for p in data["points"] if p["shape"] == shape and p["tokens"] == tokens and p["alpha"] == alpha)


def _case(data: dict, shape: str, tokens: int) -> dict:
    return next(c for c in data["cases"] if c["shape"] == shape and c["tokens"] == tokens)


def _gemm_point(data: dict, shape: str, tokens: int, router: str = "random") -> dict:
    return next(p for p in data["points"] if p["shape"] == shape and p["tokens"] == tokens and p["router"] == router)


def _gemm(point: dict, name: str) -> dict:
    return next(g for g in point["gemms"] if g["gemm"] == name)


def _peer_us(point: dict) -> dict:
    """torch._grouped_mm's time for both GEMMs with each weight in the layout it ran faster in at this point
    (``peer_layout_per_gemm``: N-major, ``[G, K, N]``, or K-major, stored ``[G, N, K]`` and passed transposed),
    summed round by round (``layer_us.torch_best``): the race's peer."""
    return point["layer_us"]["torch_best"]


def _peer_ratio(point: dict) -> dict:
    """The Triton layer's speed over the peer's at its best per GEMM, round by round (the race's ratio)."""
    return point["layer_triton_vs_torch_best"]


def _gemm_peer_ratio(point: dict, name: str, way: str = "triton") -> dict:
    """One GEMM's race: torch._grouped_mm in that weight's faster layout over one of the course's kernels
    (``way``: "triton", the pointer kernel, or "tma"), round by round."""
    g = _gemm(point, name)
    layout = point["peer_layout_per_gemm"][name]
    return _ratio(g["torch_kmajor" if layout == "K-major" else "torch"]["time_us"], g[way]["time_us"])


def _times(s: dict, factor: float, unit: str) -> dict:
    """A summary scaled by a positive constant."""
    return {**{k: s[k] * factor for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _over_constant(s: dict, amount: float, unit: str = "x") -> dict:
    """s / amount for a positive constant amount."""
    return _times(s, 1 / amount, unit)


def _ceilings(results) -> tuple[float, float]:
    """The machine's bf16 GEMM rate (TFLOP/s) and copy bandwidth (GB/s), medians."""
    c = results("methodology/ceilings")
    return c["gemm"]["TFLOPs"]["median"], c["copy"]["GBps"]["median"]


def _key(shape: str, tokens: int) -> str:
    return f"{shape}_{tokens}"


# ---------------------------------------------------------------- computed values


def routing_facts(results) -> dict:
    """Per shape and token count (``<shape>_<tokens>``): the mean rows per expert (T k / E) and, for
    the random router's counts, how many rows tiles of TILE_ROWS rows compute per useful row (each
    expert's last tile is partial)."""
    data = results("m11/routing")
    out = {}
    for p in data["points"]:
        if p["alpha"] != 0:
            continue
        counts = p["tokens_per_expert"]
        computed = sum(math.ceil(c / TILE_ROWS) * TILE_ROWS for c in counts)
        out[_key(p["shape"], p["tokens"])] = {
            "rows_per_expert": p["mean_per_expert"],
            "tile_rows_over_useful": computed / sum(counts),
        }
    return out


def _config_text(c: dict) -> str:
    per_sm = c["PROGRAMS_PER_SM"]
    store = (", TMA store in halves" if c.get("EPILOGUE_SUBTILE") else ", TMA store") if c.get("TMA_STORE") else ""
    return (
        f"{c['BLOCK_M']}×{c['BLOCK_N']}×{c['BLOCK_K']} tiles, {c['num_stages']} stages, {c['num_warps']} warps, "
        f"{per_sm} program{'s' if per_sm > 1 else ''} per SM{store}"
    )


def gemm_facts(results) -> dict:
    """The grouped GEMMs against the roofline of the same machine (methodology/ceilings), and each GEMM's
    race (``gemm_race.<shape>_<tokens>_<router>.<gemm>``: torch._grouped_mm in that weight's faster layout
    over Triton, round by round).

    ``ridge``: FLOPs per byte at which the bf16 GEMM rate and the copy bandwidth meet. Per point
    ``<shape>_<tokens>`` (random router) and GEMM (``w13``, ``w2``): the FLOPs, the least bytes a
    grouped GEMM must move (the rows in, every expert's weight once, the rows out; bf16), their
    ratio, the weights' share of those bytes, the floor (the larger of FLOPs at the GEMM rate and
    bytes at the copy rate) and each way's time over that floor (torch, triton; dense's over its
    own floor, which reads one weight matrix)."""
    data = results("m11/grouped_gemm")
    peak, copy = _ceilings(results)
    out = {"ridge": peak * 1e12 / (copy * 1e9), "peak_TFLOPs": peak, "copy_GBps": copy}
    chosen = sorted({_config_text(g["triton_config"]) for p in data["points"] for g in p["gemms"]})
    out["triton_configs"] = "; ".join(chosen)
    out["triton_configs_count"] = len(chosen)
    out["triton_block_m"] = ", ".join(
        str(m) for m in sorted({g["triton_config"]["BLOCK_M"] for p in data["points"] for g in p["gemms"]})
    )
    out["gemms_tuned"] = sum(g["tuned_here"] for p in data["points"] for g in p["gemms"])
    # GEMMs whose winner, run alone into a NaN-filled output, left an element unwritten (0: none)
    out["unwritten"] = sum(not g["triton_all_written"] for p in data["points"] for g in p["gemms"])
    out["max_diff_triton_vs_torch"] = max(
        max(g["max_abs_diff_triton_vs_torch"], g["max_abs_diff_triton_vs_torch_kmajor"])
        for p in data["points"]
        for g in p["gemms"]
    )
    out["max_diff_vs_fp32"] = max(
        max(g["max_abs_diff_triton_vs_fp32"], g["max_abs_diff_torch_vs_fp32"])
        for p in data["points"]
        for g in p["gemms"]
    )
    out["max_abs_fp32"] = max(g["max_abs_fp32"] for p in data["points"] for g in p["gemms"])
    out["gemm_race"] = {  # each GEMM against torch in that weight's faster layout, per point and router
        f"{_key(p['shape'], p['tokens'])}_{p['router']}": {g: _gemm_peer_ratio(p, g) for g in ("w13", "w2")}
        for p in data["points"]
    }
    for p in data["points"]:
        if p["router"] != "random":
            continue
        entry = {}
        for g in p["gemms"]:
            m, n, k, e = g["M"], g["N"], g["K"], p["experts"]
            weights = e * k * n * BF16_BYTES
            grouped_bytes = (m * k + m * n) * BF16_BYTES + weights
            dense_bytes = (m * k + m * n + k * n) * BF16_BYTES
            floor = max(g["flops"] / (peak * 1e12), grouped_bytes / (copy * 1e9)) * 1e6
            dense_floor = max(g["flops"] / (peak * 1e12), dense_bytes / (copy * 1e9)) * 1e6
            entry[g["gemm"]] = {
                "flops": g["flops"],
                "bytes_MB": grouped_bytes / 1e6,
                "weights_MB": weights / 1e6,
                "weights_share": weights / grouped_bytes,
                "flop_per_byte": g["flops"] / grouped_bytes,
                "math_us": g["flops"] / (peak * 1e12) * 1e6,
                "bytes_us": grouped_bytes / (copy * 1e9) * 1e6,
                "floor_us": floor,
                # the math and the traffic one after the other, over the floor: a kernel with no overlap
                "no_overlap_over_floor": (g["flops"] / (peak * 1e12) + grouped_bytes / (copy * 1e9)) * 1e6 / floor,
                "torch_over_floor": _over_constant(g["torch"]["time_us"], floor),
                "triton_over_floor": _over_constant(g["triton"]["time_us"], floor),
                "dense_over_floor": _over_constant(g["dense"]["time_us"], dense_floor),
            }
        out[_key(p["shape"], p["tokens"])] = entry
    return out


def tma_facts(results) -> dict:
    """The TMA grouped GEMM (the course's kernel in the race) on the set being drawn: ``target``, the race's
    target (the Scoreboard's); per point ``<shape>_<tokens>_<router>`` the layer's ratio (torch._grouped_mm
    with each weight in its faster layout over the TMA kernel, both GEMMs summed per round: ``layer``), each
    GEMM's (``w13``, ``w2``) and the TMA kernel over the pointer kernel (``over_pointer``), all round by round;
    over the random-router points (the races): how many meet the target on the median (``met``, as the
    Scoreboard decides) and on the 10th percentile (``met_p10``, the page's test for claims), of how many, the
    lowest and highest median of the layer's ratio, and of any one GEMM's; the tiles the autotuner chose (as
    text, and how many distinct), the largest difference from an fp32 loop over the experts and from
    torch._grouped_mm (``max_diff_vs_torch``)."""
    data = results("m11/grouped_gemm")
    target = data["races"][0]["bar"]
    out = {"target": target}
    for p in data["points"]:
        out[f"{_key(p['shape'], p['tokens'])}_{p['router']}"] = {
            "layer": p["layer_tma_vs_torch_best"],
            "over_pointer": p["layer_tma_vs_triton"],
            **{g: _gemm_peer_ratio(p, g, "tma") for g in ("w13", "w2")},
        }
    races = [p for p in data["points"] if p["router"] == "random"]
    layer = [p["layer_tma_vs_torch_best"] for p in races]
    gemms = [_gemm_peer_ratio(p, g, "tma")["median"] for p in races for g in ("w13", "w2")]
    chosen = sorted({_config_text(g["tma_config"]) for p in data["points"] for g in p["gemms"]})
    out |= {
        "met": sum(r["median"] >= target for r in layer),
        "met_p10": sum(r["p10"] >= target for r in layer),
        "of": len(layer),
        "lowest": min(r["median"] for r in layer),
        "highest": max(r["median"] for r in layer),
        "gemm_lowest": min(gemms),
        "gemm_highest": max(gemms),
        "configs": "; ".join(chosen),
        "configs_count": len(chosen),
        "max_diff_vs_fp32": max(g["max_abs_diff_tma_vs_fp32"] for p in data["points"] for g in p["gemms"]),
        # against torch._grouped_mm on the same inputs, every point and GEMM (0: identical outputs)
        "max_diff_vs_torch": max(g["max_abs_diff_tma_vs_torch"] for p in data["points"] for g in p["gemms"]),
        # GEMMs whose winner, run alone into a NaN-filled output, left an element unwritten (0: none)
        "unwritten": sum(not g["tma_all_written"] for p in data["points"] for g in p["gemms"]),
    }
    return out


def route_facts(results) -> dict:
    """``mixtral_vs_dense``: the lowest and highest median speed of any route over the dense chain at the Mixtral-like
    shape (both token counts). Per case ``<shape>_<tokens>`` of m11/routes: the shares of the permute and the
    unpermute in the torch._grouped_mm route (paired by round), the unpermute's least bytes and their time at
    the copy bandwidth, its time above that floor, the loop's device time per expert with the counts known (an
    upper bound on the host's time per expert: the loop is bound by the host there), and the synchronizing calls
    each route made (the debug mode's one-time notice not counted)."""
    data = results("m11/routes")
    _, copy = _ceilings(results)
    out = {}
    for c in data["cases"]:
        grouped = c["routes"]["grouped_torch"]["time_us"]
        permute, unpermute = c["parts"]["permute"], c["parts"]["unpermute"]
        rows, hidden, tokens = c["rows"], data["shapes"][c["shape"]]["hidden"], c["tokens"]
        # read every expert output row once, its index and weight; write each token's sum once
        least = rows * hidden * BF16_BYTES + rows * (8 + BF16_BYTES) + tokens * hidden * BF16_BYTES
        floor_us = least / (copy * 1e9) * 1e6
        out[_key(c["shape"], tokens)] = {
            "permute_share": paired(permute, grouped, lambda a, b: a / b, "fraction"),
            "unpermute_share": paired(unpermute, grouped, lambda a, b: a / b, "fraction"),
            "permute_unpermute_share": summarize(
                [(a + b) / g for a, b, g in zip(permute["rounds"], unpermute["rounds"], grouped["rounds"])], "fraction"
            ),
            "unpermute_MB": least / 1e6,
            "unpermute_floor_us": floor_us,
            "unpermute_over_floor": _over_constant(unpermute, floor_us),
            "unpermute_above_floor_us": {
                **{k: unpermute[k] - floor_us for k in ("median", "p10", "p90", "min", "max")},
                "n": unpermute["n"],
                "unit": "us",
            },
            "loop_us_per_expert": _times(
                c["parts"]["loop_counts_known"], 1 / data["shapes"][c["shape"]]["experts"], "us"
            ),
            "sync_calls": {
                r: sum(SYNC_MARK in m for m in c["routes"][r].get("synchronizing_calls", [])) for r in data["routes"]
            },
        }
    for c in data["cases"]:  # Liger Kernel's fused MoE, where it was raced: its time over the Triton route's
        if "time_us" in c["routes"].get("liger_fused", {}):
            ours, liger = c["routes"]["triton_grouped"]["time_us"], c["routes"]["liger_fused"]["time_us"]
            entry = out[_key(c["shape"], c["tokens"])]
            # above 1: the Triton route is faster
            entry["liger_over_triton"] = paired(liger, ours, lambda a, b: a / b, "x")
    if data.get("kernels_per_call") and "liger_fused" in data["kernels_per_call"][0]:
        pair = ("triton_grouped", "liger_fused")
        out["kernels"] = {k["shape"]: {r: k[r] for r in pair} for k in data["kernels_per_call"]}
    mixtral = [
        c["routes"][r]["vs_dense"]["median"] for c in data["cases"] if c["shape"] == "mixtral" for r in ROUTES[1:]
    ]
    out["mixtral_vs_dense"] = {"lowest": min(mixtral), "highest": max(mixtral)}
    return out


def _no_paths(text: str) -> str:
    """A stored message with what is left of the measuring machine's file paths cut to file names."""
    return re.sub(r"\S*snippets/m11/", "", text)


def compile_facts(results) -> dict:
    """Per ``<shape>.<route>``: what Inductor saved on a route it compiled (eager minus compiled,
    paired by round), the graphs after each of the three routings, as text, and the recompiles.
    ``text``: the loop's capture as Dynamo reported it (explain, the fullgraph error, the recompile
    reason), paths cut to file names, for printouts."""
    data = results("m11/compiled")
    out = {}
    for r in data["routes"]:
        h = r.get("helps")
        entry = {}
        if h and h.get("compiled"):
            entry["saved_us"] = paired(h["eager_us"], h["compiled_us"], lambda e, c: e - c, "us")
        rec = r.get("recompiles", {})
        if "graphs_after_call" in rec:
            entry["graphs_after_each"] = ", ".join(str(g) for g in rec["graphs_after_call"])
            entry["recompile_count"] = len(rec["reasons"])
        out.setdefault(r["shape"], {})[r["route"]] = entry
    static = [r for r in data["routes"] if r["route"] != "loop"]
    one_graph = [
        r
        for r in static
        if r["explain"].get("graphs") == 1
        and r["explain"].get("graph_breaks") == 0
        and r["fullgraph"]["ok"]
        and r.get("recompiles", {}).get("graphs_after_call", [None])[-1] == 1
    ]
    speedups = [r["helps"]["speedup"]["median"] for r in static if r.get("helps", {}).get("compiled")]
    out["static"] = {
        "one_graph": len(one_graph),
        "of": len(static),
        "speedup_lowest": min(speedups),
        "speedup_highest": max(speedups),
    }
    loop = next(r for r in data["routes"] if r["shape"] == "mixtral" and r["route"] == "loop")
    ex = loop["explain"]
    lines = [f"torch._dynamo.explain(experts_loop): {ex['graphs']} graphs, {ex['graph_breaks']} graph break"]
    for b in ex["breaks"]:
        lines += [f"  break at: {b['line']}", f"  reason: {b['reason']}", f"  {b['explanation']}"]
    error = _no_paths(loop["fullgraph"]["error"]).splitlines()
    caused = [ln for ln in error if ln.startswith("Caused by")]
    fullgraph = [  # one sentence a line, so that no line runs far past a narrow code box
        *re.split(r"(?<=\.)\s+(?=[A-Z])", f"{loop['fullgraph']['error_type']}: {error[0]}"),
        *(part for ln in caused for part in re.split(r"\s{2}(?=# \S+\.py:)", ln)),
    ]
    reason = _no_paths(loop["recompiles"]["reasons"][0]).splitlines()
    out["text"] = {
        "explain_loop": "\n".join(lines),
        "fullgraph_loop": "\n".join(fullgraph),
        "same_error_with_capture_scalar_outputs": "identical"
        if loop["fullgraph_capture_scalar_outputs"]["error"] == loop["fullgraph"]["error"]
        else "not identical",
        "recompile_loop": "\n".join(re.sub(r"\s{3,}#", "  #", ln) for ln in reason[:3]),  # not the user stack
    }
    return out


def _ratio(theirs: dict, ours: dict) -> dict:
    """A race's ratio, theirs / ours round by round (coursekit/scoreboard.py's rule for paired races)."""
    return paired(theirs, ours, lambda t, o: t / o, "x")


def _verdicts(rows: dict, bar: float) -> dict:
    """How many races meet their bar (the median ratio at least the bar, as the Scoreboard decides),
    which miss it (as text), and the lowest and highest median ratio."""
    medians = {label: r["median"] for label, r in rows.items()}
    missed = [label for label, m in medians.items() if m < bar]
    met = len(rows) - len(missed)
    return {
        "met": met,
        "of": len(rows),
        "missed": "; ".join(missed) if missed else "none",
        # the verdict in words: "all 4 cases", or "3 of 4 cases (missed: ...)"
        "text": f"all {met} cases" if not missed else f"{met} of {len(rows)} cases (missed: {'; '.join(missed)})",
        "lowest": min(medians.values()),
        "highest": max(medians.values()),
    }


def runs(results) -> dict:
    """The numbers the host's speed moves, from both forced runs of the build (``RUNS``, read by
    name): per run (``first``, ``second``) the bars (``_bars``); at the Qwen-like shape the loop's
    TFLOP/s, its device time per expert with the counts known, the sync's price (loop minus loop
    with the counts known, paired by round) and ``offsets.tolist()`` alone on the host clock, the
    torch._grouped_mm route's time, its permute and
    unpermute (timed alone) and their share of it (paired by round); and the router and the sort
    at 4,096 tokens (m11/routing). ``both``: ranges over the two runs (medians): the pointer kernel (the
    grouped GEMM's first step) against torch._grouped_mm at its best per GEMM at the four random-router
    points, the torch._grouped_mm route over the loop at 4,096 Qwen-like tokens (``grouped_4096``), the
    permute and unpermute's share of the grouped route at either token count, and the Mixtral-like races'
    lowest and highest median (``mixtral_lowest``/``_highest``)."""
    out = {}
    for run, hardware in RUNS.items():
        routes = results("m11/routes", hardware=hardware)
        entry = _bars(results("m11/grouped_gemm", hardware=hardware), routes)
        for c in routes["cases"]:
            if c["shape"] != "qwen3":
                continue
            grouped = c["routes"]["grouped_torch"]["time_us"]
            permute, unpermute = c["parts"]["permute"], c["parts"]["unpermute"]
            entry[f"qwen3_{c['tokens']}"] = {
                "loop_TFLOPs": c["routes"]["loop"]["TFLOPs"],
                "loop_us_per_expert": _times(
                    c["parts"]["loop_counts_known"], 1 / routes["shapes"]["qwen3"]["experts"], "us"
                ),
                "sync_us": c["sync"]["loop_minus_counts_known_us"],
                "tolist_host_us": c["sync"]["tolist_host_us"],
                "grouped_us": grouped,
                "permute_us": permute,
                "unpermute_us": unpermute,
                "permute_unpermute_share": summarize(
                    [(a + b) / g for a, b, g in zip(permute["rounds"], unpermute["rounds"], grouped["rounds"])],
                    "fraction",
                ),
            }
        timings = results("m11/routing", hardware=hardware)["timings"]
        timing = next(t for t in timings if t["shape"] == "qwen3" and t["tokens"] == 4096)
        entry["router_4096"] = {"router_us": timing["router_us"], "sort_us": timing["sort_us"]}
        out[run] = entry
    triton = [r["ratio"]["median"] for e in out.values() for r in e["triton"].values()]
    shares = [e[k]["permute_unpermute_share"]["median"] for e in out.values() for k in e if k.startswith("qwen3_")]
    grouped_4096 = [e["layer"]["torch_4096"]["ratio"]["median"] for e in out.values()]
    mixtral = [e["mixtral_summary"] for e in out.values()]
    out["both"] = {
        "grouped_4096_lowest": min(grouped_4096),  # the torch._grouped_mm route over the loop, 4,096 tokens
        "grouped_4096_highest": max(grouped_4096),
        "triton_lowest": min(triton),
        "triton_highest": max(triton),
        "share_lowest": min(shares),
        "share_highest": max(shares),
        "mixtral_lowest": min(m["lowest"] for m in mixtral),  # a grouped route over the loop, Mixtral-like
        "mixtral_highest": max(m["highest"] for m in mixtral),
    }
    return out


def _bars(gg: dict, routes: dict) -> dict:
    """The pointer kernel's ratio (the first step of the grouped GEMM: both GEMMs against torch._grouped_mm
    at its best per GEMM, random router; the race itself is the TMA kernel's, ``tma_facts``) and the races
    of m11/routes (each grouped route against the loop, whole layer: Qwen-like in ``layer``, Mixtral-like in
    ``mixtral``), recomputed from the summaries they race, with their verdicts (``layer_summary``,
    ``mixtral_summary``: each shape against its own target)."""
    out = {"triton": {}, "layer": {}}
    layer_rows = {}
    for p in gg["points"]:
        if p["router"] == "random":
            out["triton"][_key(p["shape"], p["tokens"])] = {"ratio": _ratio(_peer_us(p), p["layer_us"]["triton"])}
    mixtral_rows = {}
    out["mixtral"] = {}
    for c in routes["cases"]:
        for route, way in (("grouped_torch", "torch"), ("triton_grouped", "triton")):
            ratio = _ratio(c["routes"]["loop"]["time_us"], c["routes"][route]["time_us"])
            if c["shape"] == "qwen3":
                layer_rows[f"{WAY_LABELS[route]} at {c['tokens']:,} tokens"] = ratio
                out["layer"][f"{way}_{c['tokens']}"] = {"ratio": ratio}
            elif c["shape"] == "mixtral":
                mixtral_rows[f"{WAY_LABELS[route]} at {c['tokens']:,} tokens"] = ratio
                out["mixtral"][f"{way}_{c['tokens']}"] = {"ratio": ratio}
    # the Qwen-like races' target (the Mixtral-like races, level with the loop, have their own)
    layer_bar = next(r["bar"] for r in routes["races"] if "qwen3" in r["name"])
    for entry in out["layer"].values():
        entry["verdict"] = "meets" if entry["ratio"]["median"] >= layer_bar else "misses"
    out["layer_summary"] = _verdicts(layer_rows, layer_bar)
    mixtral_bar = next(r["bar"] for r in routes["races"] if "mixtral" in r["name"])
    out["mixtral_summary"] = _verdicts(mixtral_rows, mixtral_bar)
    return out


def ep_facts(results) -> dict:
    """Expert parallelism: per world (``world_<n>``) the expert weights each GPU holds (MB, bf16), the
    synchronizing CUDA calls in one step as the debug mode reported them (its one-time notice not
    counted); for worlds above 1 the host sync's median on its fastest and slowest rank; the world-2
    layer over the world-1 layer (timed apart: worst-case spread); and the share of a rank's rows that stay on it."""
    data = results("m11/expert_parallel")
    h, f = data["hidden"], data["ffn"]
    out = {}
    for p in data["points"]:
        notice = any(SYNC_MARK not in m for m in p["sync_messages"])
        out[f"world_{p['world']}"] = {
            "expert_weights_MB": p["experts_per_rank"] * 3 * h * f * BF16_BYTES / 1e6,
            "sync_calls": (p["sync_calls_per_step"] or 0) - int(notice),
            "rows_kept_share": sum(r["rows_to"][r["rank"]] for r in p["ranks"])
            / sum(sum(r["rows_to"]) for r in p["ranks"]),
        }
        if p["world"] > 1:  # each rank's median host sync: the first rank back waits in the next collective
            syncs = [r["time_us"]["host_sync"]["median"] for r in p["ranks"]]
            out[f"world_{p['world']}"] |= {
                "host_sync_fastest_rank_us": min(syncs),
                "host_sync_slowest_rank_us": max(syncs),
            }
    one = next(p for p in data["points"] if p["world"] == 1)
    for p in data["points"]:
        if p["world"] > 1:
            out[f"world_{p['world']}"]["layer_over_world_1"] = ratio_spread(
                p["slowest_us"]["layer"], one["slowest_us"]["layer"], "x"
            )
    return out


# ---------------------------------------------------------------- figures


def load(results) -> go.Figure:
    """Assignments per expert, busiest first, over the mean, at 4,096 tokens: the random router and
    the skewed ones, for both shapes. The dotted line is a capacity factor of 1.25: the part of each
    bar above it is dropped at that capacity."""
    data = results("m11/routing")
    tokens = 4096
    fig = make_subplots(rows=1, cols=2, subplot_titles=[SHAPE_LABELS[s] for s in SHAPES], horizontal_spacing=0.08)
    for col, shape in enumerate(SHAPES, 1):
        for alpha in data["alphas"]:
            p = _routing_point(data, shape, tokens, alpha)
            loads = sorted((c / p["mean_per_expert"] for c in p["tokens_per_expert"]), reverse=True)
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(loads) + 1)),
                    y=loads,
                    mode="lines+markers" if len(loads) <= 16 else "lines",
                    name=_alpha_label(alpha),
                    legendgroup=str(alpha),
                    showlegend=col == 1,
                    line={"color": ALPHA_COLORS[alpha]},
                    hovertemplate="expert %{x} by load: %{y:.2f} times the mean<extra>"
                    + _alpha_label(alpha)
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=1.25, line_dash="dot", line_color="black", opacity=0.5, row=1, col=col)
    for axis in ("", "2"):  # the capacity labelled in both panels, so that it is not read as a router
        fig.add_annotation(
            x=1.0,
            xref=f"x{axis} domain",
            y=math.log10(1.25),  # a log axis places annotations in decades
            yref=f"y{axis}",
            text="capacity factor 1.25",
            showarrow=False,
            xanchor="right",
            yanchor="bottom",
        )
    fig.update_xaxes(title_text="experts, busiest first", row=1, col=1)
    fig.update_xaxes(title_text="experts, busiest first", row=1, col=2)
    fig.update_yaxes(type="log", title_text="assignments over the mean (log scale)", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(
        height=430,
        margin=margin(t=50),
        legend=legend(-0.2),
    )
    return fig


def drops(results) -> go.Figure:
    """The share of (token, expert) assignments a fixed capacity drops, against the capacity factor,
    at 4,096 tokens, per router; the hover adds the share of the padded batch that is padding."""
    data = results("m11/routing")
    tokens = 4096
    fig = make_subplots(rows=1, cols=2, subplot_titles=[SHAPE_LABELS[s] for s in SHAPES], horizontal_spacing=0.08)
    for col, shape in enumerate(SHAPES, 1):
        for alpha in data["alphas"]:
            p = _routing_point(data, shape, tokens, alpha)
            caps = p["capacity"]
            fig.add_trace(
                go.Scatter(
                    x=[c["capacity_factor"] for c in caps],
                    y=[c["dropped_fraction"] for c in caps],
                    mode="lines+markers",
                    name=_alpha_label(alpha),
                    legendgroup=str(alpha),
                    showlegend=col == 1,
                    line={"color": ALPHA_COLORS[alpha]},
                    customdata=[[c["padding_fraction"], c["tokens_losing_one_or_more"], c["capacity"]] for c in caps],
                    hovertemplate="capacity factor %{x}: %{customdata[2]:,} rows per expert<br>"
                    "assignments dropped %{y:.1%}; tokens losing an expert %{customdata[1]:,}<br>"
                    "padding in the padded batch %{customdata[0]:.1%}<extra>" + _alpha_label(alpha) + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="capacity factor", row=1, col=col)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", title_text="assignments dropped", row=1, col=1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        height=430,
        margin=margin(t=50),
        legend=legend(-0.22),
    )
    return fig


def routes(results) -> go.Figure:
    """TFLOP/s of useful FLOPs (6 T k h f) for each route and for the dense yardstick, per shape and
    token count; the dashed line is the machine's bf16 GEMM rate (methodology/ceilings)."""
    data = results("m11/routes")
    peak, _ = _ceilings(results)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=[SHAPE_LABELS[s] for s in SHAPES], horizontal_spacing=0.06, shared_yaxes=True
    )
    tokens = sorted({c["tokens"] for c in data["cases"]})
    for col, shape in enumerate(SHAPES, 1):
        for r in ROUTES:
            cases = [_case(data, shape, t) for t in tokens]
            s = [c["routes"][r]["TFLOPs"] for c in cases]
            mids = [x["median"] for x in s]
            fig.add_trace(
                go.Bar(
                    x=[f"{t:,} tokens" for t in tokens],
                    y=mids,
                    name=ROUTE_LABELS[r],
                    legendgroup=r,
                    showlegend=col == 1,
                    marker_color=COLORS[r],
                    error_y=error_bars([x["p10"] for x in s], mids, [x["p90"] for x in s]),
                    customdata=[[c["routes"][r]["time_us"]["median"] / 1e3] for c in cases],
                    hovertemplate="%{x}: %{y:.0f} TFLOP/s, %{customdata[0]:.2f} ms per layer call<extra>"
                    + ROUTE_LABELS[r]
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=peak, line_dash="dash", line_color="black", opacity=0.5, row=1, col=col)
    fig.add_annotation(
        x=0.0,
        xref="x domain",
        y=peak,
        yref="y",
        text="bf16 GEMM ceiling",
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
    )
    fig.update_yaxes(title_text="useful TFLOP/s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="tokens")
    fig.update_layout(
        barmode="group",
        height=480,
        margin=margin(t=50),
        legend=legend(-0.12, whiskers=True),
        bargap=0.2,
    )
    return fig


def race(results) -> go.Figure:
    """The course's grouped GEMM against torch._grouped_mm (torch's time over ours, round by round), torch
    with each weight in its faster layout at that point (``peer_layout_per_gemm``, named in the hover): the
    pointer kernel on both GEMMs (the first step, grey), then the TMA kernel (the course's kernel in the race)
    on each GEMM and on both together (the Scoreboard's race), for every point measured, as medians with
    10th-90th percentile whiskers; the dashed line is the course's target, the thin one parity. The y axis
    fits the data (a CPU set's ratios are far below 1)."""
    data = results("m11/grouped_gemm")
    points = data["points"]
    labels = [
        f"{SHAPE_SHORT[p['shape']]}, {p['tokens']:,}" + ("" if p["router"] == "random" else ", skewed") for p in points
    ]
    layouts = [f"w13 {p['peer_layout_per_gemm']['w13']}, w2 {p['peer_layout_per_gemm']['w2']}" for p in points]
    fig = go.Figure()
    series = (
        ("pointer loads (the first step), both GEMMs", "grey", _peer_ratio),
        ("TMA: x @ w13, the gate and up projections", BLUE, lambda p: _gemm_peer_ratio(p, "w13", "tma")),
        ("TMA: SwiGLU output @ w2, the down projection", GREEN, lambda p: _gemm_peer_ratio(p, "w2", "tma")),
        ("TMA: both GEMMs (the race)", ORANGE, lambda p: p["layer_tma_vs_torch_best"]),
    )
    drawn = []
    for i, (name, color, pick) in enumerate(series):
        race = i == len(series) - 1
        s = [pick(p) for p in points]
        mids = [x["median"] for x in s]
        drawn += [x["p10"] for x in s] + [x["p90"] for x in s]
        fig.add_trace(  # a dot per median, whiskers 10th to 90th percentile: no bar length to read a gain from
            go.Scatter(
                x=labels,
                y=mids,
                name=name,
                mode="markers",
                marker={
                    "color": color,
                    "size": 12 if race else 9,
                    "symbol": ("square", "circle", "diamond", "star")[i],
                },
                opacity=1.0 if race else 0.45,  # the race stands out; the rest is context
                offsetgroup=str(i),
                error_y=error_bars([x["p10"] for x in s], mids, [x["p90"] for x in s]),
                customdata=[[layout] for layout in layouts],
                hovertemplate="%{x} tokens: ours at %{y:.3f} of torch._grouped_mm's speed "
                "(torch: %{customdata[0]})<extra>" + name + "</extra>",
            )
        )
    target = data["races"][0]["bar"]
    # the two lines across the whole plot (outer points included), named in the legend, not on the plot,
    # where a phone's narrow plot puts a label over the markers
    lines = ((f"the course's target, {target:g}", target, "dash", 1.0), ("parity", 1.0, "solid", 0.3))
    for name, y, dash, opacity in lines:
        fig.add_hline(y=y, line_color="black", line_dash=dash, opacity=opacity)
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                name=name,
                mode="lines",
                line={"color": "black", "dash": dash},
                opacity=opacity,
                hoverinfo="skip",
            )
        )
    low = min(drawn)
    bottom = 0.0 if low < 0.5 else math.floor(low * 20) / 20  # dots, not bars: the axis fits the data
    fig.update_yaxes(range=[bottom, max(1.1, max(drawn) * 1.03)], title_text="speed over torch._grouped_mm")
    fig.update_xaxes(tickangle=-30, title_text="shape, tokens (router if skewed)", title_standoff=4)
    fig.update_layout(
        scattermode="group",
        height=500,
        margin=margin(),
        legend=legend(-0.42, whiskers=True),
    )
    return fig


def ep_phases(results) -> go.Figure:
    """One MoE layer step on one GPU and over two, phase by phase: the median over steps of the
    slowest rank's time per phase, stacked. The slowest rank of one phase need not be the slowest of
    the next, and a median of sums is not a sum of medians, so on two GPUs the stack overshoots the
    layer's own time per step (the diamond: each step's slowest rank, whole layer)."""
    data = results("m11/expert_parallel")
    fig = go.Figure()
    worlds = [p["world"] for p in data["points"]]
    per_rank = data["tokens_per_rank"]  # every rank gets the same tokens: two GPUs serve twice as many
    labels = [f"{w} GPU{'s' if w > 1 else ''}, {w * per_rank:,} tokens" for w in worlds]
    for phase in EP_PHASES:
        vals = [p["slowest_us"][phase]["median"] if phase in p["slowest_us"] else 0.0 for p in data["points"]]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=vals,
                orientation="h",
                name=phase.replace("_", " "),
                marker_color=EP_COLORS[phase],
                hovertemplate="%{y}: " + phase.replace("_", " ") + " %{x:,.0f} µs<extra></extra>",
            )
        )
    layer = [p["slowest_us"]["layer"] for p in data["points"]]
    mids = [x["median"] for x in layer]
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=mids,
            mode="markers",
            name="the whole layer per step (the result; whiskers: 10th to 90th percentile)",
            marker={"symbol": "diamond", "size": 9, "color": "black"},
            error_x=error_bars([x["p10"] for x in layer], mids, [x["p90"] for x in layer]),
            hovertemplate="%{y}: layer %{x:,.0f} µs per step<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="GPUs")
    fig.update_xaxes(title_text="device time per step, slowest rank (µs)", rangemode="tozero")
    fig.update_layout(
        barmode="stack",
        height=480,
        margin=margin(l=10),
        legend=legend(-0.22, traceorder="normal"),
    )
    return fig


def race_margins(results) -> dict:
    """Where torch._grouped_mm ran ``w2`` faster N-major (random router), and the Mixtral-like ``w13``'s
    faster layout at each point (``w13_mixtral``, both routers), per run (``first``, ``second``, as text)
    and, at the top level, both runs' points in one phrase each; ``w13_mixtral_within``: the Mixtral-like
    ``w13``'s slower layout over its faster one, minus one, round by round (medians), the largest over
    both runs."""
    out, within = {}, []
    for run, hardware in RUNS.items():
        gg = results("m11/grouped_gemm", hardware=hardware)
        nmajor = [
            f"{SHAPE_SHORT[p['shape']]}, {p['tokens']:,} tokens"
            for p in gg["points"]
            if p["router"] == "random" and p["peer_layout_per_gemm"]["w2"] == "N-major"
        ]
        w13 = {}  # the Mixtral-like w13's faster layout, point by point, both routers
        for p in gg["points"]:
            if p["shape"] == "mixtral":
                point = f"{p['tokens']:,} tokens" + (" under the skewed router" if p["router"] != "random" else "")
                w13.setdefault(p["peer_layout_per_gemm"]["w13"], []).append(point)
                ratio = paired(
                    _gemm(p, "w13")["torch"]["time_us"], _gemm(p, "w13")["torch_kmajor"]["time_us"], lambda a, b: a / b
                )["median"]
                within.append(max(ratio, 1 / ratio) - 1)
        out[run] = {
            "w2_nmajor": "; ".join(nmajor) if nmajor else "none",
            "w13_mixtral": ", ".join(f"{layout} at {' and '.join(points)}" for layout, points in sorted(w13.items())),
        }
    for name in ("w2_nmajor", "w13_mixtral"):
        first, second = out["first"][name], out["second"][name]
        # the points, said once when the two runs agree
        out[name] = f"{first} (both runs)" if first == second else f"{first} (first run) and {second} (second)"
    out["w13_mixtral_within"] = max(within)
    return out


DECODE_WAYS = {  # what the decode figure draws, in this order: (label, colour, dash)
    "loop": ("loop over experts (host sync, eager)", ORANGE, "solid"),
    "torch_eager": ("torch._grouped_mm, eager", BLUE, "dot"),
    "torch_graph": ("torch._grouped_mm, one CUDA graph", BLUE, "solid"),
    "triton_graph": ("the Triton kernel (pointer loads), one CUDA graph", GREEN, "solid"),
}
FLOOR_LABEL = "the floor: the weights read once at the copy rate"


def decode_times(results) -> go.Figure:
    """The MoE layer at decode sizes (m11/decode): device time per layer call against tokens per call
    (both axes log), one panel per shape, for the loop (eager, host sync), the grouped routes eager and
    replayed from a CUDA graph, and the floor: the bytes of weights the call reads over the machine's
    copy rate (methodology/ceilings; ``decode_facts``). A way the stored data lacks (the CPU set has no
    graphs) is left out."""
    data = results("m11/decode")
    _, copy = _ceilings(results)
    fig = make_subplots(
        rows=2, cols=1, subplot_titles=[SHAPE_LABELS[s] for s in SHAPES], vertical_spacing=0.14, shared_xaxes=True
    )
    for row, shape in enumerate(SHAPES, 1):
        points = sorted((p for p in data["points"] if p["shape"] == shape), key=lambda p: p["tokens"])
        tokens = [p["tokens"] for p in points]
        for way, (label, color, dash) in DECODE_WAYS.items():
            if not all(way in p["time_us"] for p in points):
                continue
            s = [p["time_us"][way] for p in points]
            mids = [x["median"] for x in s]
            fig.add_trace(
                go.Scatter(
                    x=tokens,
                    y=mids,
                    mode="lines+markers",
                    name=label,
                    legendgroup=way,
                    showlegend=row == 1,
                    line={"color": color, "dash": dash},
                    error_y=error_bars([x["p10"] for x in s], mids, [x["p90"] for x in s]),
                    customdata=[[p["weight_bytes"]["experts_hit"], p["weight_bytes"]["total"] / 1e6] for p in points],
                    hovertemplate="%{x} tokens: %{y:,.0f} µs per layer call; %{customdata[0]} experts hit, "
                    "%{customdata[1]:,.0f} MB of weights<extra>" + label + "</extra>",
                ),
                row=row,
                col=1,
            )
        floor = [p["weight_bytes"]["total"] / (copy * 1e9) * 1e6 for p in points]
        fig.add_trace(
            go.Scatter(
                x=tokens,
                y=floor,
                mode="lines",
                name=FLOOR_LABEL,
                legendgroup="floor",
                showlegend=row == 1,
                line={"color": "grey", "dash": "dash"},
                hovertemplate="%{x} tokens: floor %{y:,.0f} µs<extra></extra>",
            ),
            row=row,
            col=1,
        )
        drawn = floor + [p["time_us"][w]["median"] for p in points for w in DECODE_WAYS if w in p["time_us"]]
        low, high = math.floor(math.log10(min(drawn))), math.log10(max(drawn)) + 0.15
        ticks = [m * 10**e for e in range(low, math.ceil(high) + 1) for m in (1, 2, 5)]
        fig.update_yaxes(type="log", range=[low, high], tickvals=ticks, title_text="µs per call", row=row, col=1)
    fig.update_xaxes(type="log", tickvals=sorted({p["tokens"] for p in data["points"]}))
    fig.update_xaxes(title_text="tokens per call", row=2, col=1)
    fig.update_layout(height=640, margin=margin(t=50), legend=legend(-0.12, whiskers=True))
    return fig


def decode_facts(results) -> dict:
    """Each decode point (``<shape>_<tokens>``) against its floor: the bytes of weights the call reads
    (the experts hit and the gate, ``weight_bytes.total``) read once at the machine's copy rate
    (methodology/ceilings), and the captured layers' time over it (``torch_graph``, ``triton_graph``).
    The copy the snippet timed alongside is not used: its rate fell by a third above a 512 MiB source."""
    data = results("m11/decode")
    _, copy = _ceilings(results)
    out = {}
    for p in data["points"]:
        floor = p["weight_bytes"]["total"] / (copy * 1e9) * 1e6
        out[_key(p["shape"], p["tokens"])] = {
            "floor_us": floor,
            "over_floor": {
                w: _over_constant(p["time_us"][w], floor) for w in ("torch_graph", "triton_graph") if w in p["time_us"]
            },
        }
    return out


def decode_runs(results) -> dict:
    """The numbers at decode that the host's speed moves, as the lowest and highest median over the two
    forced runs (``RUNS``): per point with a captured torch._grouped_mm layer (``<shape>_<tokens>``) the
    loop over it (``loop_over.torch_graph``), and under ``graph_speedup`` the captured layer over the eager
    one (``graph_speedup.torch``)."""
    medians, graphs = {}, {}
    for hardware in RUNS.values():
        for p in results("m11/decode", hardware=hardware)["points"]:
            if "torch_graph" in p["loop_over"]:
                medians.setdefault(_key(p["shape"], p["tokens"]), []).append(p["loop_over"]["torch_graph"]["median"])
            if "torch" in p.get("graph_speedup", {}):
                graphs.setdefault(_key(p["shape"], p["tokens"]), []).append(p["graph_speedup"]["torch"]["median"])
    out = {k: {"lowest": min(v), "highest": max(v)} for k, v in medians.items()}
    out["graph_speedup"] = {k: {"lowest": min(v), "highest": max(v)} for k, v in graphs.items()}
    return out


def _tile(c: dict) -> tuple:
    """A config's tile, stages, warps and programs per SM: what the two kernels' candidate lists share."""
    return tuple(c[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "PROGRAMS_PER_SM"))


def _same(candidate: dict, config: dict) -> bool:
    """Whether an autotuner candidate (with its timing) is the config chosen."""
    return all(candidate.get(k) == v for k, v in config.items())


def tma_runs(results) -> dict:
    """The TMA kernel's race from both forced runs (``RUNS``, read by name). Per run (``first``,
    ``second``), over the random-router points: how many meet the target on the median (``met``) and on
    the 10th percentile (``met_p10``), of how many; the layer's lowest and highest median and any one
    GEMM's; the Qwen-like 16,384-token layer (``qwen3_16384``, the summary); the TMA kernel over the
    pointer kernel, whole layer, round by round (``over_pointer_lowest``/``_highest``, medians); the
    autotuner's single timings at the pointer kernel's chosen config, pointer time over TMA time (the TMA
    kernel storing through pointers, so TMA loads alone), per GEMM tuned (``same_tile_lowest``/``_highest``,
    ``same_tile_above_one``: at how many the TMA kernel was faster); how many GEMMs the TMA kernel ran with
    a tile the pointer kernel's list lacks (``outside``, of ``gemms``) and with the TMA store
    (``store_chosen``); its chosen configs (text). ``both``: the layer's lowest and highest median over the
    runs (also of ``same_tile`` and ``over_pointer``), at how many GEMMs the TMA kernel's config differs
    between the runs (``config_changed``), the TMA kernel's own choice's gain (tile and store), its
    autotune time at the pointer kernel's tile stored through pointers over its chosen config's, minus one
    (``tile_gain_highest`` over every GEMM but w2 at Mixtral-like 4,096 tokens; that GEMM's in
    ``tile_gain_mixtral_w2_4096_lowest``/``_highest``, with its same-tile ratio), and where the store was
    chosen, the chosen config over the fastest candidate without it, minus one (``store_gain_highest``).
    ``layouts``: torch._grouped_mm's slower layout's time over its faster one, minus one, round by round
    (medians), over both runs: at the Qwen-like shape (``qwen3_lowest``, ``qwen3_highest``; w13 faster
    N-major, w2 K-major, the page asserts which) and at the Mixtral-like shape (``mixtral_within``: the
    largest)."""
    out, chosen = {}, {}
    margins = {"qwen3": [], "mixtral_within": []}
    tile_gain, tile_gain_exception, exception_same_tile, store_gain = [], [], [], []
    for run, hardware in RUNS.items():
        data = results("m11/grouped_gemm", hardware=hardware)
        target = data["races"][0]["bar"]
        pointer_list = {_tile(c) for c in data["candidates"]}
        races = [p for p in data["points"] if p["router"] == "random"]
        layer = [p["layer_tma_vs_torch_best"] for p in races]
        gemms = [_gemm_peer_ratio(p, g, "tma")["median"] for p in races for g in ("w13", "w2")]
        same_tile, outside = [], 0
        for p in races:
            for g in p["gemms"]:
                chosen.setdefault(run, {})[(p["shape"], p["tokens"], g["gemm"])] = _tile(g["tma_config"])
                outside += _tile(g["tma_config"]) not in pointer_list
                pointer = {_tile(c): c["autotune_ms"] for c in g.get("autotune") or []}
                # the TMA kernel at each tile with pointer stores: TMA loads alone, to set beside the pointer kernel
                tma = {_tile(c): c["autotune_ms"] for c in g.get("tma_autotune") or [] if not c.get("TMA_STORE")}
                tile = _tile(g["triton_config"])
                if tile in pointer and tile in tma:
                    same_tile.append(pointer[tile] / tma[tile])
                    # what the TMA kernel's own choice (tile and store) added: its time at the pointer's tile,
                    # stored through pointers, over its chosen config's
                    chosen_ms = next(c["autotune_ms"] for c in g["tma_autotune"] if _same(c, g["tma_config"]))
                    gain = tma[tile] / chosen_ms
                    key = (p["shape"], p["tokens"], g["gemm"])
                    (tile_gain_exception if key == ("mixtral", 4096, "w2") else tile_gain).append(gain)
                    if key == ("mixtral", 4096, "w2"):
                        exception_same_tile.append(pointer[tile] / tma[tile])
                    if g["tma_config"].get("TMA_STORE"):  # the chosen config over the fastest without the store
                        store_gain.append(min(tma.values()) / chosen_ms)
                ratio = paired(g["torch"]["time_us"], g["torch_kmajor"]["time_us"], lambda a, b: a / b)
                slower_over_faster = max(ratio["median"], 1 / ratio["median"]) - 1
                margins["qwen3" if p["shape"] == "qwen3" else "mixtral_within"].append(slower_over_faster)
        qwen = next(p for p in races if p["shape"] == "qwen3" and p["tokens"] == 16384)
        out[run] = {
            "met": sum(r["median"] >= target for r in layer),
            "met_p10": sum(r["p10"] >= target for r in layer),
            "of": len(layer),
            "lowest": min(r["median"] for r in layer),
            "highest": max(r["median"] for r in layer),
            "gemm_lowest": min(gemms),
            "gemm_highest": max(gemms),
            "qwen3_16384": qwen["layer_tma_vs_torch_best"],
            "over_pointer_lowest": min(p["layer_tma_vs_triton"]["median"] for p in races),
            "over_pointer_highest": max(p["layer_tma_vs_triton"]["median"] for p in races),
            "same_tile_lowest": min(same_tile),
            "same_tile_highest": max(same_tile),
            "same_tile_of": len(same_tile),
            "same_tile_above_one": sum(r > 1 for r in same_tile),
            "outside": outside,
            "store_chosen": sum(bool(g["tma_config"].get("TMA_STORE")) for p in races for g in p["gemms"]),
            "gemms": 2 * len(races),
            "configs": "; ".join(sorted({_config_text(g["tma_config"]) for p in races for g in p["gemms"]})),
        }
    first, second = chosen["first"], chosen["second"]
    out["both"] = {
        "lowest": min(out[r]["lowest"] for r in RUNS),
        "highest": max(out[r]["highest"] for r in RUNS),
        "config_changed": sum(first[k] != second.get(k) for k in first),
        "same_tile_lowest": min(out[r]["same_tile_lowest"] for r in RUNS),
        "same_tile_highest": max(out[r]["same_tile_highest"] for r in RUNS),
        "over_pointer_lowest": min(out[r]["over_pointer_lowest"] for r in RUNS),
        "over_pointer_highest": max(out[r]["over_pointer_highest"] for r in RUNS),
        # at how many GEMMs the TMA kernel was faster at the pointer's tile, said once when the runs agree
        "same_tile_above_one": (
            f"{out['first']['same_tile_above_one']} of {out['first']['same_tile_of']}"
            if (out["first"]["same_tile_above_one"], out["first"]["same_tile_of"])
            == (out["second"]["same_tile_above_one"], out["second"]["same_tile_of"])
            else " and ".join(f"{out[r]['same_tile_above_one']} of {out[r]['same_tile_of']}" for r in RUNS)
        ),
        "tile_gain_highest": max(tile_gain) - 1,  # the TMA kernel's own tile over the pointer's, minus one
        "tile_gain_mixtral_w2_4096_lowest": min(tile_gain_exception) - 1,
        "tile_gain_mixtral_w2_4096_highest": max(tile_gain_exception) - 1,
        "same_tile_mixtral_w2_4096_highest": max(exception_same_tile),  # pointer over TMA, both at the pointer's tile
        "store_chosen": f"{out['first']['store_chosen']} and {out['second']['store_chosen']}",
        "store_gain_highest": max(store_gain, default=1.0) - 1,  # the chosen store config over the best without
    }
    out["layouts"] = {
        "qwen3_lowest": min(margins["qwen3"]),
        "qwen3_highest": max(margins["qwen3"]),
        "mixtral_within": max(margins["mixtral_within"]),
    }
    return out
