"""Figures, computed values and printouts for module 12: top-k at a 256k vocabulary on the H200.

``results(key)`` returns a stored result's data: "m12/race" (the course's Triton top-k against
torch.topk and torch.sort, with a copy of the logits timed in the same rounds), "m12/launches"
(what one torch.topk / torch.sort call puts on the device, from torch.profiler) and
"m12/decode_step" (an LM head and sampling, each part graph-replayed), and "methodology/ceilings"
(the copy bandwidth of the same build). Each result was measured in one process; the build ran
twice at the same code (``REFERENCE`` and ``RERUN``), and ``runs`` reads both by name for the
host-side numbers that moved between them. Two variants timed in the same interleaved rounds are
compared round by round (``coursekit.stats.paired``); values timed apart get the worst case of both spreads
(``coursekit.stats.ratio_spread``). Nothing here imports torch.
"""

import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, BROWN, GREEN, ORANGE, PURPLE, RED, REFERENCE, RERUN, WHISKERS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import difference_spread, error_bars, paired, ratio_spread, summarize

MAIN = {"dtype": "float32", "vocab": 262144, "k": 50}  # the main grid: fp32, V = 2^18, k = 50
TOPK_READS_FP32 = 5  # mbtopk reads the row once per 8-bit digit (four for 32 bits), then once to gather
COLORS = {
    "ours": BLUE,
    "torch_topk": ORANGE,
    "torch_sort": BROWN,
    "copy": GREEN,
    "flashinfer": PURPLE,
    "floor": "grey",
    "bar": RED,
}
NAMES = {
    "ours": "the course's Triton top-k",
    "torch_topk": "torch.topk",
    "torch_sort": "torch.sort (descending)",
    "flashinfer": "FlashInfer's top_k (sorted)",
    "copy": "a copy of the logits (read and write)",
    "floor": "read floor: logits bytes at the copy peak",
}
CONFIGS = [  # (label, dtype, vocab, k): the main grid's point, then one change at a time
    ("fp32, V = 262,144, k = 50", "float32", 262144, 50),
    ("bf16 logits", "bfloat16", 262144, 50),
    ("V = 131,072", "float32", 131072, 50),
    ("V = 32,768", "float32", 32768, 50),
    ("k = 1", "float32", 262144, 1),
    ("k = 1,024", "float32", 262144, 1024),
]


# ---------------------------------------------------------------- helpers


def _scaled(s: dict, factor: float, unit: str) -> dict:
    """A summary times a positive constant."""
    return {**{k: s[k] * factor for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _over(amount: float, s: dict, unit: str) -> dict:
    """amount / s for a positive summary s (the percentiles swap)."""
    return {
        "median": amount / s["median"],
        "p10": amount / s["p90"],
        "p90": amount / s["p10"],
        "min": amount / s["max"],
        "max": amount / s["min"],
        "n": s["n"],
        "unit": unit,
    }


def _race_point(race: dict, batch: int, dtype: str, vocab: int, k: int) -> dict:
    """One point of m12/race, main grid or secondary, by its parameters."""
    for p in race["points"] + race["secondary"]:
        if (p["batch"], p["dtype"], p["vocab"], p["k"]) == (batch, dtype, vocab, k):
            return p
    raise KeyError(f"m12/race has no point batch {batch}, {dtype}, V {vocab}, k {k}")


def _launch_point(launches: dict, batch: int, vocab: int, k: int) -> dict:
    return next(p for p in launches["topk"] if (p["batch"], p["vocab"], p["k"]) == (batch, vocab, k))


def _floor_us(nbytes: int, copy_GBps: dict) -> dict:
    """The time to read nbytes at the copy peak (bytes read plus written per second)."""
    return _over(nbytes / 1e3, copy_GBps, "us")


# ---------------------------------------------------------------- computed values


def _point_values(p: dict, copy_GBps: dict) -> dict:
    t = p["time_us"]
    floor = _floor_us(p["logits_bytes"], copy_GBps)
    elements = p["logits_bytes"] // (4 if p["dtype"] == "float32" else 2)
    return {
        "floor_us": floor,
        "half_copy_us": _scaled(t["copy"], 0.5, "us"),
        "ours_over_floor": ratio_spread(t["ours"], floor, "x"),
        "ours_over_half_copy": paired(t["ours"], t["copy"], lambda o, c: o / (c / 2), "x"),
        "topk_over_half_copy": paired(t["torch_topk"], t["copy"], lambda o, c: o / (c / 2), "x"),
        "ours_GBps": _over(p["logits_bytes"] / 1e3, t["ours"], "GB/s"),
        "ours_of_copy_peak": ratio_spread(_over(p["logits_bytes"] / 1e3, t["ours"], "GB/s"), copy_GBps),
        "ours_elements_per_us": _over(elements, t["ours"], "elements/us"),
        "half_copy_minus_floor_us": difference_spread(_scaled(t["copy"], 0.5, "us"), floor),
        "elements": elements,
        "programs": p["batch"] * -(-p["vocab"] // p["plan"][0]["chunk"]),  # first-launch chunks
        "logits_MiB": p["logits_bytes"] / 2**20,
    }


def derived(results) -> dict:
    """Every number the page computes from stored ones. ``copy_GBps``: the copy peak of methodology/ceilings.
    ``race.<batch>`` (main grid) and ``config.<dtype>_<vocab>_<k>.<batch>`` (every point): the read floor (logits
    bytes at the copy peak), half the copy timed in the same rounds and how far it lies above the floor, ours over
    each, ours as a rate on the logits' bytes and in elements per microsecond, and the first launch's chunks (rows
    times chunks per row). ``plan``: the launches the kernel's plan chose at batch 1 and 256. ``chunk.<batch>``:
    what forcing the first launch's chunk changed (paired by round). ``speedup_range``: ours over torch.topk on
    the main grid, lowest and highest, and at which batch. ``batch1``: at batch 1, the first launch alone minus
    the copy (the fixed cost of a replayed kernel) and what the last launch adds. ``checks``: how many race
    points returned torch.topk's values, and at how many of FlashInfer's points its answer differed. ``topk``:
    torch.topk's device operations and its time per operation at batch 1, and its
    time at batch 256 over five reads of the logits at the copy peak. ``decode.<batch>``: the LM head's rate on its
    weights, the rest of sampling besides top-k on each side (paired by round) and what ours saves per step."""
    race = results("m12/race")
    copy_GBps = results("methodology/ceilings")["copy"]["GBps"]
    out = {"copy_GBps": copy_GBps, "race": {}, "config": {}, "chunk": {}, "plan": {}}
    for p in race["points"]:
        out["race"][str(p["batch"])] = _point_values(p, copy_GBps)
    for _, dtype, vocab, k in CONFIGS:
        key = f"{dtype}_{vocab}_{k}"
        out["config"][key] = {}
        for batch in (1, 64, 256):
            p = _race_point(race, batch, dtype, vocab, k)
            out["config"][key][str(batch)] = {**_point_values(p, copy_GBps), "launches": p["launches"]}
    for p in race["points"]:
        forced = {v.removeprefix("ours_chunk_"): t for v, t in p["time_us"].items() if v.startswith("ours_chunk_")}
        if forced:
            out["chunk"][str(p["batch"])] = {
                chunk: {
                    "minus_plan_us": paired(t, p["time_us"]["ours"], lambda a, b: a - b, "us"),
                    "saves_us": paired(p["time_us"]["ours"], t, lambda a, b: a - b, "us"),
                    "over_plan": paired(t, p["time_us"]["ours"], lambda a, b: a / b, "x"),
                }
                for chunk, t in forced.items()
            }
    for batch in (1, 256):
        levels = _race_point(race, batch, **MAIN)["plan"]
        first = levels[0]
        out["plan"][str(batch)] = {
            "first_chunk": first["chunk"],
            "first_warps": first["warps"],
            "groups": first["groups"],
            "slots": first["slots"],
            "programs_per_row": MAIN["vocab"] // first["chunk"],
            "second_row": MAIN["vocab"] // first["chunk"] * first["slots"],
            "last_warps": levels[-1]["warps"],
            "launches": len(levels),
        }
    k1, k50 = (_race_point(race, 1, "float32", MAIN["vocab"], k)["time_us"]["ours"] for k in (1, MAIN["k"]))
    out["k_dependent_us_batch1"] = difference_spread(k50, k1)  # ours at k = 50 minus k = 1, timed apart
    ratios = {p["batch"]: p["speedup"]["vs_torch_topk"]["median"] for p in race["points"]}
    lo, hi = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
    out["speedup_range"] = {  # ours over torch.topk, batch 1 to 256, and the batches of the extremes
        "lo": ratios[lo],
        "hi": ratios[hi],
        "lo_batch": lo,
        "hi_batch": hi,
    }
    t1 = _race_point(race, 1, **MAIN)["time_us"]
    out["batch1"] = {  # the two launches at batch 1 (paired by round)
        "first_launch_minus_copy_us": paired(t1["ours_first_launch"], t1["copy"], lambda a, b: a - b, "us"),
        "last_launch_us": paired(t1["ours"], t1["ours_first_launch"], lambda a, b: a - b, "us"),
    }
    every = race["points"] + race["secondary"]
    raced = [p for p in every if "flashinfer_values_match" in p]
    out["checks"] = {  # ours (and FlashInfer where raced) against torch.topk at every point
        "points": len(every),
        "values_match": sum(p["values_match"] for p in every),
        "indices_point_at_values": sum(p["indices_point_at_values"] for p in every),
        "flashinfer_points": len(raced),
        "flashinfer_differ": sum(
            not (p["flashinfer_values_match"] and p["flashinfer_indices_point_at_values"]) for p in raced
        ),
    }
    k1024 = _race_point(race, 1, "float32", MAIN["vocab"], 1024)["plan"]
    out["plan"]["k1024"] = {"groups": k1024[0]["groups"], "launches": len(k1024)}

    launches = results("m12/launches")
    b1 = _launch_point(launches, 1, MAIN["vocab"], MAIN["k"])
    ops = b1["kernels"] + b1["memsets"]
    b256 = _race_point(race, 256, **MAIN)
    five_reads = _scaled(_floor_us(b256["logits_bytes"], copy_GBps), TOPK_READS_FP32, "us")
    out["topk"] = {
        "ops_batch1": ops,
        "us_per_op_batch1": _scaled(b1["time_us"]["graph"], 1 / ops, "us"),
        "reads_fp32": TOPK_READS_FP32,
        "five_reads_us_256": five_reads,
        "over_five_reads_256": ratio_spread(b256["time_us"]["torch_topk"], five_reads, "x"),
        "sort_kernels": sorted({p["kernels"] for p in launches["sort"]}),
    }

    step = results("m12/decode_step")
    out["decode"] = {}
    for p in step["points"]:
        t = p["time_us"]
        out["decode"][str(p["batch"])] = {
            "lm_head_GBps": _over(step["lm_head_weight_bytes"] / 1e3, t["lm_head"], "GB/s"),
            "rest_of_sampling_torch_us": paired(t["sampling_torch"], t["topk_torch"], lambda a, b: a - b, "us"),
            "rest_of_sampling_ours_us": paired(t["sampling_ours"], t["topk_ours"], lambda a, b: a - b, "us"),
            "saved_per_step_us": paired(t["step_torch"], t["step_ours"], lambda a, b: a - b, "us"),
            "topk_saved_us": paired(t["topk_torch"], t["topk_ours"], lambda a, b: a - b, "us"),
        }
    out["decode"]["lm_head_weight_GiB"] = step["lm_head_weight_bytes"] / 2**30
    out["decode"]["same_logit_drawn"] = sum(p["same_logit_drawn"] for p in step["points"])
    out["decode"]["same_token"] = sum(p["same_token"] for p in step["points"])
    out["decode"]["batches"] = len(step["points"])
    return out


def runs(results) -> dict:
    """torch.topk launched eagerly from the host against the same call replayed from a CUDA graph
    (m12/launches), in each forced run of the build: the eager time is host-bound and moved between
    the runs. ``<run>.<batch>_<vocab>_<k>``: eager and graph summaries, and eager over graph (paired
    by round)."""
    out = {}
    for run, hardware in (("first", REFERENCE), ("second", RERUN)):
        launches = results("m12/launches", hardware=hardware)
        out[run] = {}
        for p in launches["topk"]:
            t = p["time_us"]
            out[run][f"{p['batch']}_{p['vocab']}_{p['k']}"] = {
                "eager_us": t["eager"],
                "graph_us": t["graph"],
                "eager_over_graph": paired(t["eager"], t["graph"], lambda a, b: a / b, "x"),
            }
    return out


# ---------------------------------------------------------------- printouts of stored facts

KERNEL_ORDER = [  # the order mbtopk::launch and topk_out_cuda issue them (TensorTopK.cu, .cpp)
    "Memset",
    "mbtopk::fill",
    "computeBlockDigitCounts",
    "computeDigitCumSum",
    "computeBlockwiseWithinKCounts",
    "computeBlockwiseKthCounts",
    "DeviceScanByKeyInitKernel",
    "DeviceScanByKeyKernel",
    "gatherTopK",
    "radixSortKVInPlace",
    "Memcpy",
    "fill_reverse_indices_kernel",
    "fill_index_and_segment_kernel",
    "DeviceRadixSortHistogramKernel",
    "DeviceRadixSortExclusiveSumKernel",
    "DeviceRadixSortOnesweepKernel",
    "DeviceSegmentedRadixSortKernel",
    "sort_postprocess_kernel",
]


def _short(name: str, width: int = 96) -> str:
    """A kernel's name without its argument list, its template arguments cut when too long (a CUB
    kernel keeps the key type of its policy, which tells the float sort from the index sort)."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the argument list: the first "(" outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut].strip()
    if len(name) > width and "<" in name:
        policy = re.search(r"policy_hub<([\w ]+),", name)  # a CUB sort's key type: float or long
        alt = re.search(r"::Policy\d+, (true|false),", name)  # a segmented sort's alternate-bits pass
        key = f"policy_hub<{policy[1]}, ...>, " if policy else ""
        name = name[: name.index("<")] + f"<{key}{alt[1] + ', ' if alt else ''}...>"
    return name


def _rank(name: str) -> int:
    return next((i for i, key in enumerate(KERNEL_ORDER) if key in name), len(KERNEL_ORDER))


def _listing(by_name: list[dict]) -> str:
    rows = sorted(by_name, key=lambda e: (_rank(e["name"]), e["name"]))
    return "\n".join(f"{e['count']:>3} x {_short(e['name'])}" for e in rows)


def texts(results) -> dict:
    """Stored profiler facts as text blocks: the device operations of one torch.topk call
    (``topk_<batch>_<k>`` at V = 262,144) and of one torch.sort (``sort_<batch>``), with counts,
    names shortened (argument lists dropped, long template arguments cut)."""
    launches = results("m12/launches")
    out = {}
    for p in launches["topk"]:
        if p["vocab"] == MAIN["vocab"]:
            total = p["kernels"] + p["memsets"]
            head = (
                f"torch.topk, float32 [{p['batch']}, {p['vocab']:,}], k = {p['k']}: "
                f"{p['kernels']} kernels and {p['memsets']} memsets ({total} device operations)\n"
            )
            out[f"topk_{p['batch']}_{p['k']}"] = head + _listing(p["by_name"])
    for p in launches["sort"]:
        if p["vocab"] == MAIN["vocab"]:
            head = (
                f"torch.sort, float32 [{p['batch']}, {p['vocab']:,}], descending: "
                f"{p['kernels']} kernels and copies, {p['memsets']} memsets\n"
            )
            out[f"sort_{p['batch']}"] = head + _listing(p["by_name"])
    return out


# ---------------------------------------------------------------- figures


def decode_shares(results) -> go.Figure:
    """The decode step's head at batch 1 and 64, with torch.topk and with the course's kernel:
    each part timed alone (LM head, top-k, the rest of sampling), stacked, beside the whole step
    timed as one graph (a marker with whiskers)."""
    step = results("m12/decode_step")
    fig = go.Figure()
    rows, parts = [], {"lm_head": [], "topk": [], "rest": []}
    whole = []
    for p in step["points"]:
        t = p["time_us"]
        for side, label in (("torch", "torch.topk"), ("ours", "Triton top-k")):
            rows.append(f"batch {p['batch']} · {label}")
            parts["lm_head"].append(t["lm_head"])
            parts["topk"].append(t[f"topk_{side}"])
            parts["rest"].append(paired(t[f"sampling_{side}"], t[f"topk_{side}"], lambda a, b: a - b, "us"))
            whole.append(t[f"step_{side}"])
    names = {
        "lm_head": ("LM head (bf16 weights)", "#7f7f7f"),
        "topk": ("top-k", COLORS["torch_topk"]),
        "rest": ("rest of sampling: scale, softmax, cumsum, mask, draw", "#9ecae1"),
    }
    for key, (name, color) in names.items():
        fig.add_trace(
            go.Bar(
                y=rows,
                x=[s["median"] for s in parts[key]],
                orientation="h",
                name=name,
                marker_color=color,
                hovertemplate="%{y}: %{x:.1f} µs<extra>" + name + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            y=rows,
            x=[s["median"] for s in whole],
            error_x=error_bars([s["p10"] for s in whole], [s["median"] for s in whole], [s["p90"] for s in whole]),
            mode="markers",
            marker={"symbol": "line-ns-open", "size": 28, "line": {"width": 3}, "color": "black"},
            name="the whole step, one graph",
            hovertemplate="%{y}: step %{x:.1f} µs<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="batch · top-k")
    fig.update_xaxes(title_text="device time per step (µs); parts timed alone, stacked", rangemode="tozero")
    fig.update_layout(
        barmode="stack",
        height=380,
        margin=margin(l=10),
        legend=legend(-0.25),
        bargap=0.3,
    )
    return fig


def _time_traces(fig, points: list[dict], x: list, floors: list[dict], row=None, col=None, legend=True):
    """ours, torch.topk, torch.sort, FlashInfer (where raced at every point) and the copy at the
    points, with the read floor."""
    kw = {"row": row, "col": col} if row else {}
    for v in ("ours", "torch_topk", "torch_sort", "flashinfer", "copy"):
        if not all(v in p["time_us"] for p in points):
            continue  # FlashInfer: not raced in this set (see data["flashinfer"]["note"])
        s = [p["time_us"][v] for p in points]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[t["median"] for t in s],
                error_y=error_bars([t["p10"] for t in s], [t["median"] for t in s], [t["p90"] for t in s]),
                mode="lines+markers",
                name=NAMES[v],
                legendgroup=v,
                showlegend=legend,
                line={"color": COLORS[v], "dash": "dot" if v == "copy" else "solid"},
                hovertemplate="%{x}: %{y:.1f} µs<extra>" + NAMES[v] + "</extra>",
            ),
            **kw,
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[f["median"] for f in floors],
            mode="lines",
            name=NAMES["floor"],
            legendgroup="floor",
            showlegend=legend,
            line={"color": COLORS["floor"], "dash": "dash"},
            hovertemplate="%{x}: %{y:.2f} µs<extra>" + NAMES["floor"] + "</extra>",
        ),
        **kw,
    )


def batch_sweep(results) -> go.Figure:
    """fp32 logits, V = 262,144, k = 50, batch 1 to 256: device time per call of each variant (graph
    replays, interleaved rounds), the copy timed beside them, the read floor, and the targets."""
    race = results("m12/race")
    copy_GBps = results("methodology/ceilings")["copy"]["GBps"]
    points = sorted(race["points"], key=lambda p: p["batch"])
    batches = [p["batch"] for p in points]
    fig = go.Figure()
    _time_traces(fig, points, batches, [_floor_us(p["logits_bytes"], copy_GBps) for p in points])
    bars = sorted((int(b), us) for b, us in race["targets_us"].items())
    fig.add_trace(
        go.Scatter(
            x=[b for b, _ in bars],
            y=[us for _, us in bars],
            mode="markers",
            marker={"symbol": "triangle-down", "size": 13, "color": COLORS["bar"]},
            name="the target for ours",
            hovertemplate="batch %{x}: target %{y:.0f} µs<extra></extra>",
        )
    )
    fig.update_xaxes(
        type="log", title_text="batch (rows of logits)", tickvals=batches, ticktext=[str(b) for b in batches]
    )
    fig.update_yaxes(type="log", title_text=f"device time per call (µs, log scale; {WHISKERS})")
    fig.update_layout(
        height=520,
        margin=margin(),
        legend=legend(-0.18),
    )
    return fig


def vocab_sweep(results) -> go.Figure:
    """fp32 logits, k = 50, vocabulary 32,768 / 131,072 / 262,144, at batch 1, 64 and 256: the same
    variants and floor as batch_sweep, one panel per batch."""
    race = results("m12/race")
    copy_GBps = results("methodology/ceilings")["copy"]["GBps"]
    vocabs = [32768, 131072, 262144]
    batches = [1, 64, 256]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[f"batch {b}" for b in batches], horizontal_spacing=0.07)
    for i, batch in enumerate(batches, 1):
        points = [_race_point(race, batch, "float32", v, MAIN["k"]) for v in vocabs]
        labels = [f"{v:,}" for v in vocabs]
        _time_traces(
            fig, points, labels, [_floor_us(p["logits_bytes"], copy_GBps) for p in points], 1, i, legend=i == 1
        )
        fig.update_yaxes(type="log", row=1, col=i)
        fig.update_xaxes(title_text="vocabulary", row=1, col=i)
    fig.update_yaxes(title_text=f"device time per call (µs, log; {WHISKERS})", row=1, col=1)
    fig.update_layout(
        height=500,
        margin=margin(t=40),
        legend=legend(-0.2),
    )
    return fig


def speedups(results) -> go.Figure:
    """Ours against torch.topk and torch.sort (their time over ours, per round) at batch 1, 64 and
    256, for the main point and each change of dtype, vocabulary and k, as points on a log axis
    (median, whiskers). Above 1, ours is faster."""
    race = results("m12/race")
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=["against torch.topk", "against torch.sort"], horizontal_spacing=0.08
    )
    shades = {1: "#9ecae1", 64: "#4292c6", 256: "#08519c"}
    for col, peer in ((1, "vs_torch_topk"), (2, "vs_torch_sort")):
        for batch in (1, 64, 256):
            s = [_race_point(race, batch, d, v, k)["speedup"][peer] for _, d, v, k in CONFIGS]
            fig.add_trace(
                go.Scatter(
                    x=[label for label, *_ in CONFIGS],
                    mode="markers",
                    marker={"size": 9, "color": shades[batch]},
                    offsetgroup=str(batch),
                    y=[t["median"] for t in s],
                    error_y=error_bars([t["p10"] for t in s], [t["median"] for t in s], [t["p90"] for t in s]),
                    name=f"batch {batch}",
                    legendgroup=str(batch),
                    showlegend=col == 1,
                    hovertemplate="%{x}, batch " + str(batch) + ": %{y:.2f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=1, line_dash="dash", line_color="black", row=1, col=col)
        fig.update_yaxes(type="log", row=1, col=col)
        fig.update_xaxes(tickangle=-30, title_text="point measured", row=1, col=col)
    fig.update_yaxes(title_text="their time over ours, per round (log; above 1: ours is faster)", row=1, col=1)
    fig.update_layout(
        scattermode="group",
        height=520,
        margin=margin(t=40),
        legend=legend(-0.3),
    )
    return fig


def chunks(results) -> go.Figure:
    """The first launch's chunk forced to 4,096, 8,192 and 16,384 elements at batch 1, 64 and 256
    (the warps follow the chunk, so the two change together; chunks per program as the plan gives them), and
    the plan's own chunk with one chunk a program (no running threshold): one point per variant (median,
    whiskers), grouped by batch on a log axis, and a ring around the chunk the plan picks, a trace of its own
    so that the legend names it."""
    race = results("m12/race")
    fig = go.Figure()
    shades = {4096: BLUE, 8192: ORANGE, 16384: GREEN}
    # warps by the plan's rule (_topk.plan) for 128 groups (k = 50): 4 up to 8,192 elements, else 16
    labels = {4096: "4,096 elements, 4 warps", 8192: "8,192, 4 warps", 16384: "16,384, 16 warps"}
    picked_x, picked_y = [], []
    for size in (4096, 8192, 16384):
        xs, s = [], []
        for batch in (1, 64, 256):
            p = _race_point(race, batch, **MAIN)
            xs.append(f"batch {batch}")
            s.append(p["time_us"][f"ours_chunk_{size}"])
            if p["plan"][0]["chunk"] == size:
                picked_x.append((f"batch {batch}", size))
                picked_y.append(s[-1]["median"])
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[t["median"] for t in s],
                error_y=error_bars([t["p10"] for t in s], [t["median"] for t in s], [t["p90"] for t in s]),
                mode="markers",
                marker={"size": 10, "color": shades[size]},
                name=labels[size],
                offsetgroup=str(size),
                hovertemplate="%{x}, first chunk " + labels[size] + ": %{y:.1f} µs<extra></extra>",
            )
        )
    single = [_race_point(race, b, **MAIN)["time_us"]["ours_one_chunk_per_program"] for b in (1, 64, 256)]
    fig.add_trace(
        go.Scatter(
            x=[f"batch {b}" for b in (1, 64, 256)],
            y=[t["median"] for t in single],
            error_y=error_bars([t["p10"] for t in single], [t["median"] for t in single], [t["p90"] for t in single]),
            mode="markers",
            marker={"size": 10, "color": BROWN, "symbol": "x"},
            name="the plan's chunk, one a program",
            offsetgroup="single",
            hovertemplate="%{x}, the plan's chunk, one chunk a program: %{y:.1f} µs<extra></extra>",
        )
    )
    for (x, size), y in zip(picked_x, picked_y):
        fig.add_trace(
            go.Scatter(
                x=[x],
                y=[y],
                mode="markers",
                marker={"size": 22, "symbol": "circle-open", "color": "black", "line": {"width": 2}},
                name="the chunk the plan picks",
                legendgroup="picked",
                showlegend=x == picked_x[0][0],
                offsetgroup=str(size),
                hovertemplate="%{x}: the plan picks " + f"{size:,}" + "<extra></extra>",
            )
        )
    fig.update_yaxes(type="log", title_text="device time per call (µs, log scale)")
    fig.update_xaxes(title_text="batch")
    fig.update_layout(
        scattermode="group",
        height=420,
        margin=margin(),
        legend=legend(-0.15),
    )
    return fig


def special_facts(results) -> dict:
    """m12/special summed: how many of the special rows (NaN, infinities, signed zeros, ties...) and of the
    timed rows failed to return the documented answer on the device, eager or replayed (and how many m12/race
    points returned values other than torch.topk's); and, per timed row
    (``<case>_<batch>``), how many of the first launch's chunks take the exact path (the running threshold included)."""
    special = results("m12/special")
    rows, points = special["special_rows"], special["points"]
    race = results("m12/race")
    return {
        "race_values_differ": sum(not p["values_match"] for p in race["points"] + race["secondary"]),
        "rows": len(rows),
        "rows_failed": sum(not r["checks_pass"] for r in rows),
        "points": len(points),
        "points_failed": sum(not p["checks_pass"] for p in points),
        "exact": {
            f"{p['case']}_{p['batch']}": {"chunks": p["chunks"], "exact_path_chunks": p["exact_path_chunks"]}
            for p in points
        },
    }


def ratios(results) -> dict:
    """Ratios the page states in words. ``flashinfer.<a>_<b>`` (where FlashInfer was raced): its top_k on the
    main grid (float32, V = 262,144, k = 50), batch b's time over batch a's (points timed apart: the worst case
    of both spreads); 16 to 32 is where it leaves the one-launch radix select. ``batch1.last_over_first_extra``: at
    batch 1, what the last launch adds over what the first launch takes beyond the copy (the fixed cost of a
    replayed kernel), round by round (all three timed in the same rounds)."""
    race = results("m12/race")
    t = _race_point(race, 1, **MAIN)["time_us"]
    rounds = zip(t["ours"]["rounds"], t["ours_first_launch"]["rounds"], t["copy"]["rounds"])
    out = {"batch1": {"last_over_first_extra": summarize([(o - f) / (f - c) for o, f, c in rounds], "x")}}
    if race["flashinfer"]["raced"]:  # else not raced in this set: data["flashinfer"]["note"] says why
        fi = {b: _race_point(race, b, **MAIN)["time_us"]["flashinfer"] for b in (1, 16, 32, 64)}
        out["flashinfer"] = {f"{a}_{b}": ratio_spread(fi[b], fi[a], "x") for a, b in ((1, 16), (16, 32), (32, 64))}
    return out
