"""Figures, computed values and printouts for module 09: what a CUDA graph replay saves against
eager launches, what a capture costs, the constraints as the H200 run stored them, and a decode
step three ways.

``results(key)`` returns a stored result's data: "m09/chain", "m09/constraints", "m09/apis",
"m09/decode" (snippets/m09/*.py) and "methodology/ceilings" (the copy bandwidth of the same build).
``results(key, process=i)`` returns process i's data (1-based) for the snippets measured in
several processes (chain and decode); the figures draw process 1's medians and whiskers that span
every process's 10th to 90th percentile, since host-side times move between processes.
``results(key, hardware=RERUN)`` is the second forced run of the same snippets at the same code
(``RUNS``); ``runs`` sets the two side by side, for the numbers that moved between them.
"""

import math
import textwrap

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, BROWN, GREEN, GREY, ORANGE, PURPLE, RED, RUNS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import error_bars, paired, ratio_spread

SIZE_LABELS = {"tiny": "tiny kernel", "few_us": "larger kernel"}
VARIANT_LABELS = {
    "eager": "eager",
    "graph": "eager model, captured by hand (torch.cuda.graph)",
    "compiled": 'torch.compile(mode="reduce-overhead")',
}
# one colour, one meaning on the page: orange eager launches, blue a hand capture of the eager code,
# purple a hand capture of the compiled model, green reduce-overhead, grey the GPU's own time,
# brown what a capture costs (host time, pool bytes), red instantiation
COLORS = {
    "eager": ORANGE,
    "graph": BLUE,
    "compiled": GREEN,
    "floor": GREY,
    "gpu": GREY,
    "default_graph": PURPLE,
    "capture": BROWN,
    "instantiate": RED,
}
# bar patterns, fixed per contestant so that a bar reads the same in every figure (figures.js
# otherwise assigns them in order)
PATTERNS = {"graph": "/", "compiled": "\\", "default_graph": "x"}
PRINT_WIDTH = 72  # printed lines wrap here, so that none runs off the page's code block
BF16_MANTISSA_BITS = 7  # bf16 keeps 7 explicit mantissa bits: values in [2^e, 2^(e+1)) are 2^(e-7) apart
MIB = 2**20


# ---------------------------------------------------------------- helpers


def _runs(results, key: str, hardware: str | None = None) -> list[dict]:
    """Every process's data of a result, process 1 first (of the page's set, or of ``hardware``)."""
    n = results.processes(key, hardware=hardware)
    return [results(key, hardware=hardware, process=i) for i in range(1, n + 1)]


def _point(data: dict, size: str, kernels: int) -> dict:
    return next(p for p in data["points"] if p["size"] == size and p["kernels"] == kernels)


def _decode_point(data: dict, batch: int) -> dict:
    return next(p for p in data["points"] if p["batch"] == batch)


def _scaled(s: dict, factor: float, unit: str) -> dict:
    """A summary times a positive constant."""
    return {**{k: s[k] * factor for k in ("median", "p10", "p90", "min", "max")}, "n": s["n"], "unit": unit}


def _sum(a: dict, b: dict) -> dict:
    """a + b for two summaries taken apart: the ends added, the widest spread both allow."""
    return {
        **{k: a[k] + b[k] for k in ("median", "p10", "p90", "min", "max")},
        "n": min(a["n"], b["n"]),
        "unit": a["unit"],
    }


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


def _envelope(summaries: list[dict]) -> tuple[float, float]:
    """The smallest 10th and the largest 90th percentile over several processes."""
    return min(s["p10"] for s in summaries), max(s["p90"] for s in summaries)


def _size_words(elements: int) -> str:
    """A float32 tensor's size as the page says it: its floats and its bytes (256 floats, 1 KiB)."""
    nbytes = elements * 4
    mib = f"{nbytes / MIB:g} MiB" if nbytes >= MIB else f"{nbytes / 1024:g} KiB"
    floats = f"{elements // 2**20} Mi" if elements >= 2**20 else f"{elements:,}"
    return f"{floats} floats, {mib}"


def _pattern(name: str) -> dict:
    """A bar's fixed pattern (PATTERNS), as figures.js draws the ones it assigns; none for the rest."""
    if name not in PATTERNS:
        return {}
    return {"pattern": {"shape": PATTERNS[name], "fillmode": "overlay", "fgopacity": 0.45, "size": 7, "solidity": 0.25}}


def _bf16_step(value: float) -> float:
    """The distance between neighbouring bf16 numbers at |value|."""
    return 2.0 ** (math.floor(math.log2(abs(value))) - BF16_MANTISSA_BITS)


# ---------------------------------------------------------------- computed values


def derived(results) -> dict:
    """Every number the page computes from stored ones.

    ``chain.<size>.<kernels>``: the per-kernel wall times (eager, replay) and the device floor; the
    time one replay saves over one eager call of the chain (paired by round); the one-off cost of
    a graph (capture plus instantiation, the worst case of both spreads) and the calls after which
    it is paid back; capture and instantiation per kernel; each time over the floor.
    ``fix``: what the stale-input fix costs on the host.
    ``decode.<batch>``: the bytes a step must read (weights and the whole KV cache), their time at
    the copy ceiling, each variant's step over that floor, the compiled step's logit error in
    bf16 rounding steps, what a replayed step saves against eager (paired by round) and the steps
    after which the hand capture is paid back; ``decode.cudagraph_skips`` and
    ``decode.max_trees_recordings`` from the trees' log. ``host``/``stale``/``rng``: facts of the
    constraints as counts, so that claims can guard the prose."""
    chain = results("m09/chain")
    out = {"chain": {}}
    for size, floor_info in chain["sizes"].items():
        floor = floor_info["device_us_per_kernel"]
        out["chain"][size] = {"floor_us": floor}
        for n in chain["lengths"]:
            p = _point(chain, size, n)
            eager, graph = p["wall_us_per_kernel"]["eager"], p["wall_us_per_kernel"]["graph"]
            saved = paired(eager, graph, lambda e, g, n=n: (e - g) * n, "us")
            setup = _sum(p["capture_us"], p["instantiate_us"])
            out["chain"][size][str(n)] = {
                "eager_us": eager,
                "graph_us": graph,
                "saved_per_call_us": saved,
                "setup_us": setup,
                "setup_ms": _scaled(setup, 1e-3, "ms"),
                "break_even_calls": ratio_spread(setup, saved) if saved["p10"] > 0 else None,
                "capture_per_kernel_us": _scaled(p["capture_us"], 1 / n, "us"),
                "instantiate_per_kernel_us": _scaled(p["instantiate_us"], 1 / n, "us"),
                "eager_issue_per_kernel_us": _scaled(p["issue_us"]["eager"], 1 / n, "us"),
                "graph_over_floor": ratio_spread(graph, floor),
                "eager_over_floor": ratio_spread(eager, floor),
                "pool_out_of_place_mib": p["pool_bytes"]["out_of_place"] / MIB,
                "pool_in_place_mib": p["pool_bytes"]["in_place"] / MIB,
            }
    out["few_us_tensor_mib"] = chain["sizes"]["few_us"]["elements"] * 4 / MIB

    con = results("m09/constraints")
    t = con["host_us"]
    out["fix"] = {
        "copy_cost_us": paired(t["copy_then_replay"], t["replay"], lambda a, b: a - b, "us"),
        "eager_over_fixed": paired(t["eager"], t["copy_then_replay"], lambda a, b: a / b, "x"),
    }
    out["stale"] = {
        "rebinding_correct": int(con["stale_input"]["after_rebinding"] == con["stale_input"]["expected"]),
        "copy_correct": int(con["stale_input"]["after_copy"] == con["stale_input"]["expected"]),
    }
    first_messages = {h["errors"][0]["message"] for h in con["host_work"] if h["errors"]}
    out["host"] = {
        "raised": sum(bool(h["raised"]) for h in con["host_work"]),
        "tried": len(con["host_work"]),
        "distinct_first_errors": len(first_messages),
        "usable_after": sum(bool(h["device_usable_after"]) for h in con["host_work"]),
    }
    rng = con["rng"]
    out["rng"] = {
        "replays_that_differ": sum(rng["replays_differ"]),
        "replay_pairs": len(rng["replays_differ"]),
        "reseeded_equal": int(rng["reseeded_replays_equal"]),
        "equals_eager": int(rng["replay_equals_eager_after_same_seed"]),
    }

    apis = results("m09/apis")
    pools = apis["pools"]
    out["pools"] = {
        "separate_mib": pools["separate"]["pool_bytes"] / MIB,
        "shared_mib": pools["shared"]["pool_bytes"] / MIB,
        "saved_fraction": 1 - pools["shared"]["pool_bytes"] / pools["separate"]["pool_bytes"],
    }

    decode = results("m09/decode")
    copy = results("methodology/ceilings")["copy"]["GBps"]
    out["decode"] = {"copy_GBps": copy}
    for batch in (p["batch"] for p in decode["points"]):
        p = _decode_point(decode, batch)
        step_bytes = decode["step_weight_bytes"] + p["kv_cache_bytes"]
        floor = _over(step_bytes / 1e3, copy, "us")  # bytes / (GB/s * 1e3) = us
        entry = {
            "step_MB": step_bytes / 1e6,
            "kv_cache_MB": p["kv_cache_bytes"] / 1e6,
            "floor_us": floor,
            "compiled_logit_steps": p["max_abs_logit_diff"]["compiled"] / _bf16_step(p["max_abs_logit"]),
            "graph_pool_mib": p["graph_pool_bytes"] / MIB,
            "capture_ms": _scaled(p["capture_s"], 1e3, "ms"),
        }
        for name, step in p["step_us"].items():
            entry[f"{name}_over_floor"] = ratio_spread(step, floor)
        entry["compiled_minus_graph_us"] = paired(
            p["step_us"]["compiled"], p["step_us"]["graph"], lambda a, b: a - b, "us"
        )
        saved = paired(p["step_us"]["eager"], p["step_us"]["graph"], lambda a, b: a - b, "us")
        entry["graph_saved_per_step_us"] = saved
        # the hand capture (its warm-ups included) over what one replayed step saves against eager
        entry["capture_break_even_steps"] = ratio_spread(_scaled(p["capture_s"], 1e6, "us"), saved)
        out["decode"][str(batch)] = entry
    out["decode"]["weights_MB"] = decode["step_weight_bytes"] / 1e6
    out["decode"]["cudagraph_skips"] = sum(len(p["cudagraph_skips"]) for p in decode["points"])
    out["decode"]["max_trees_recordings"] = max(p["trees_recordings"] for p in decode["points"])
    out["decode"]["params_M"] = decode["params"] / 1e6
    return out


def _spread(summaries: list[dict]) -> dict:
    """Several processes' summaries of one quantity: ``lo`` the smallest 10th percentile, ``hi``
    the largest 90th, ``median_lo`` and ``median_hi`` the range of their medians."""
    return {
        "lo": min(s["p10"] for s in summaries),
        "hi": max(s["p90"] for s in summaries),
        "median_lo": min(s["median"] for s in summaries),
        "median_hi": max(s["median"] for s in summaries),
    }


def _run_summaries(results, hardware: str) -> dict:
    """One forced run's host-bound summaries, each as a list with one entry per process (per
    process and chain length for ``chain.few_us_all.eager_us``)."""
    chain = _runs(results, "m09/chain", hardware)
    decode = _runs(results, "m09/decode", hardware)
    entry = {"chain": {}, "decode": {}, "fix": {}}
    for size in chain[0]["sizes"]:
        for n in chain[0]["lengths"]:
            points = [_point(c, size, n) for c in chain]
            entry["chain"][f"{size}_{n}"] = {
                "eager_us": [p["wall_us_per_kernel"]["eager"] for p in points],
                "graph_us": [p["wall_us_per_kernel"]["graph"] for p in points],
                "replay_issue_us": [p["issue_us"]["graph"] for p in points],
                "speedup": [p["speedup"] for p in points],
                "eager_minus_graph_us": [
                    paired(p["wall_us_per_kernel"]["eager"], p["wall_us_per_kernel"]["graph"], lambda a, b: a - b, "us")
                    for p in points
                ],
            }
        entry["chain"][f"{size}_all"] = {
            "eager_us": [_point(c, size, n)["wall_us_per_kernel"]["eager"] for c in chain for n in chain[0]["lengths"]]
        }
    for batch in (p["batch"] for p in decode[0]["points"]):
        points = [_decode_point(d, batch) for d in decode]
        entry["decode"][str(batch)] = {
            **{f"{k}_us": [p["step_us"][k] for p in points] for k in points[0]["step_us"]},
            "compiled_minus_graph_us": [
                paired(p["step_us"]["compiled"], p["step_us"]["graph"], lambda a, b: a - b, "us") for p in points
            ],
            "graph_minus_compiled_us": [
                paired(p["step_us"]["graph"], p["step_us"]["compiled"], lambda a, b: a - b, "us") for p in points
            ],
            "tokens_per_s_compiled": [p["tokens_per_s"]["compiled"] for p in points],
            "capture_ms": [_scaled(p["capture_s"], 1e3, "ms") for p in points],
            "capture_break_even_steps": [
                ratio_spread(
                    _scaled(p["capture_s"], 1e6, "us"),
                    paired(p["step_us"]["eager"], p["step_us"]["graph"], lambda a, b: a - b, "us"),
                )
                for p in points
            ],
            "tokens_per_s_eager": [p["tokens_per_s"]["eager"] for p in points],
            "graph_speedup": [p["speedup_over_eager"]["graph"] for p in points],
        }
    t = [
        results("m09/constraints", hardware=hardware, process=i)
        for i in range(1, results.processes("m09/constraints", hardware) + 1)
    ]
    entry["fix"]["copy_cost_us"] = [
        paired(c["host_us"]["copy_then_replay"], c["host_us"]["replay"], lambda a, b: a - b, "us") for c in t
    ]
    return entry


def _spreads(tree: dict) -> dict:
    """_spread applied to every list of summaries in a nested dict."""
    return {k: _spreads(v) if isinstance(v, dict) else _spread(v) for k, v in tree.items()}


def _merged(a: dict, b: dict) -> dict:
    """Two runs' nested lists of summaries, list by list, concatenated."""
    return {k: _merged(a[k], b[k]) if isinstance(a[k], dict) else a[k] + b[k] for k in a}


def runs(results) -> dict:
    """The host-bound numbers of the two forced runs of the build, read by name (``RUNS``), each
    over all its processes (``_spread``): ``first`` and ``second``, and ``both``, the envelope
    over every process of both runs. Per-kernel wall times of the chains (and eager minus replay,
    paired by round), eager over every chain length (``<size>_all``), the replay call's return
    time, the decode step of each variant, the hand capture's time and the steps that repay it
    (``capture_ms``, ``capture_break_even_steps``), the hand capture's speed-up over eager and the
    difference of the compiled and hand-captured steps both ways (paired by round), and the
    stale-input fix's cost (paired by round)."""
    per_run = {run: _run_summaries(results, hardware) for run, hardware in RUNS.items()}
    out = {run: _spreads(tree) for run, tree in per_run.items()}
    out["both"] = _spreads(_merged(per_run["first"], per_run["second"]))
    return out


# ---------------------------------------------------------------- printouts of stored facts


def _error_chain(errors: list[dict]) -> str:
    """Errors as Python prints a chain of them: the first raised, then each raised while handling it."""
    parts = [f"{e['type']}: {e['message']}" for e in errors]
    return "\n\nDuring handling of the above exception, another exception occurred:\n\n".join(parts)


def _wrapped(text: str) -> str:
    """Each line of text wrapped at PRINT_WIDTH, its continuation indented two spaces."""
    return "\n".join(
        "\n".join(textwrap.wrap(line, PRINT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)) or line
        for line in text.split("\n")
    )


def printouts(results) -> dict:
    """The constraints as the H200 run stored them, as text blocks, each line wrapped at
    PRINT_WIDTH: ``host_item`` the whole chain of errors, ``host_item_first`` its first line;
    ``rng`` every fact of the random-number test, ``rng_short`` the three the page's text needs."""
    con = results("m09/constraints")
    s = con["stale_input"]
    shape = con["static_shape"]
    host = {h["work"]: h for h in con["host_work"]}
    rng = con["rng"]
    apis = results("m09/apis")
    overwritten = next(c for c in apis["reduce_overhead"] if c["previous_output"].startswith("error"))
    return {
        "stale": (
            f"expected          {s['expected']}\n"
            f"after rebinding   {s['after_rebinding']}\n"
            f"after copy_       {s['after_copy']}"
        ),
        "shape": _wrapped(
            f"captured shape: {shape['captured_shape']}\n"
            f"static_x.copy_(torch.arange(16.)): RuntimeError: {shape['copy_16_error']}\n"
            f"5 values padded to 8, replayed: {shape['padded_5_output']}"
        ),
        "host_item": _wrapped(_error_chain(host["item"]["errors"])),
        "host_item_first": _wrapped(_error_chain(host["item"]["errors"]).split("\n")[0]),
        "rng": (
            f"philox offset before and after each replay: {rng['offsets']}\n"
            f"offset advanced by one replay: {rng['offset_per_replay']}, by one eager dropout: "
            f"{rng['offset_per_eager_call']}\n"
            f"fraction of elements kept, replays 1-3: {[round(f, 4) for f in rng['kept_fraction']]}\n"
            f"consecutive replays draw different masks: {rng['replays_differ']}\n"
            f"after manual_seed(0), replay == eager dropout: {rng['replay_equals_eager_after_same_seed']}"
        ),
        "rng_short": (
            f"offset advanced by one replay: {rng['offset_per_replay']}, by one eager dropout: "
            f"{rng['offset_per_eager_call']}\n"
            f"masks differ between replays: {rng['replays_differ']}\n"
            f"after manual_seed(0), replay == eager: {rng['replay_equals_eager_after_same_seed']}"
        ),
        "trees_error": _wrapped(overwritten["previous_output"].removeprefix("error: ")),
    }


# ---------------------------------------------------------------- figures


def per_kernel(results) -> go.Figure:
    """Wall time per kernel, eager launches against a graph replay, against the chain's length, for
    the two kernel sizes; the device time of one kernel inside a graph as the floor; and the
    eager line of the build's second run, whose host was faster."""
    runs = _runs(results, "m09/chain")
    second = _runs(results, "m09/chain", RUNS["second"])
    first = runs[0]
    sizes = [s for s in SIZE_LABELS if s in first["sizes"]] + [s for s in first["sizes"] if s not in SIZE_LABELS]
    fig = make_subplots(
        rows=1,
        cols=len(sizes),
        subplot_titles=[f"{SIZE_LABELS.get(s, s)}<br>{_size_words(first['sizes'][s]['elements'])}" for s in sizes],
        horizontal_spacing=0.1,
    )
    names = {
        "eager": "eager: one Python call per kernel",
        "graph": "graph.replay(): one call per chain",
    }
    for col, size in enumerate(sizes, 1):
        ns = first["lengths"]
        for name in ("eager", "graph"):
            per_run = [[_point(r, size, n)["wall_us_per_kernel"][name] for n in ns] for r in runs]
            mids = [s["median"] for s in per_run[0]]
            env = [_envelope([run[i] for run in per_run]) for i in range(len(ns))]
            if name == "eager":
                eager_hi = max(e[1] for e in env)
            others = [[f"{run[i]['median']:.2f}" for run in per_run] for i in range(len(ns))]
            fig.add_trace(
                go.Scatter(
                    x=ns,
                    y=mids,
                    mode="lines+markers",
                    name=names[name],
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": COLORS[name]},
                    error_y=error_bars([e[0] for e in env], mids, [e[1] for e in env]),
                    customdata=[[", ".join(o)] for o in others],
                    hovertemplate="%{x} kernels: %{y:.2f} µs per kernel (process medians %{customdata[0]})<extra>"
                    + name
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
        again = [[_point(r, size, n)["wall_us_per_kernel"]["eager"]["median"] for r in second] for n in ns]
        fig.add_trace(
            go.Scatter(
                x=ns,
                y=[a[0] for a in again],
                mode="lines+markers",
                name="eager, second run (its host launched faster)",
                legendgroup="eager2",
                showlegend=col == 1,
                line={"color": COLORS["eager"], "dash": "dot"},
                marker={"symbol": "circle-open"},
                customdata=[[", ".join(f"{v:.2f}" for v in a)] for a in again],
                hovertemplate="%{x} kernels: %{y:.2f} µs per kernel (process medians %{customdata[0]})"
                "<extra>eager, second run</extra>",
            ),
            row=1,
            col=col,
        )
        floor = first["sizes"][size]["device_us_per_kernel"]["median"]
        fig.add_trace(
            go.Scatter(
                x=[ns[0], ns[-1]],
                y=[floor, floor],
                mode="lines",
                line={"dash": "dash", "color": COLORS["floor"]},
                name="floor: one kernel's device time inside a graph",
                legendgroup="floor",
                showlegend=col == 1,
                hovertemplate=f"floor {floor:.2f} µs per kernel<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(type="log", title_text="kernels in the chain", row=1, col=col)
        if size == "few_us":  # the point to look at: the host keeps up, yet eager stays above the replay
            eager2, replay = again[-1][0], _point(first, size, ns[-1])["wall_us_per_kernel"]["graph"]["median"]
            fig.update_yaxes(range=[0, eager_hi * 1.1], row=1, col=col)
            fig.add_annotation(
                x=math.log10(ns[-1]),
                y=eager2,
                text=f"second run: eager {eager2:.1f},<br>replay {replay:.1f} µs",
                showarrow=True,
                arrowhead=2,
                ax=-70,
                ay=95,
                font={"size": 12},
                row=1,
                col=col,
            )
        else:
            fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_yaxes(title_text="µs per kernel, wall time", row=1, col=1)
    fig.update_layout(
        height=470,
        margin=margin(l=60, r=10, t=60, b=40),
        legend=legend(-0.22),
        hovermode="closest",
    )
    return fig


def capture_cost(results) -> go.Figure:
    """The host time to capture a chain and to instantiate it, against one eager call of the same
    chain, for both kernel sizes (whiskers: the fastest and slowest of the five captures)."""
    data = results("m09/chain")
    ns = data["lengths"]
    fig = go.Figure()
    dashes = {"tiny": "solid", "few_us": "dot"}
    short = {"tiny": "tiny kernels", "few_us": "larger kernels"}
    for size in [s for s in dashes if s in data["sizes"]]:
        points = [_point(data, size, n) for n in ns]
        series = (
            ("capture", [p["capture_us"] for p in points], COLORS["capture"]),
            ("instantiate", [p["instantiate_us"] for p in points], COLORS["instantiate"]),
            (
                "one eager call of the chain",
                [_scaled(p["wall_us_per_kernel"]["eager"], n, "us") for p, n in zip(points, ns)],
                COLORS["eager"],
            ),
        )
        for what, summaries, color in series:
            mids = [s["median"] for s in summaries]
            fig.add_trace(
                go.Scatter(
                    x=ns,
                    y=mids,
                    mode="lines+markers",
                    line={"color": color, "dash": dashes[size]},
                    name=f"{what}, {short[size]}",
                    error_y=error_bars([s["p10"] for s in summaries], mids, [s["p90"] for s in summaries]),
                    hovertemplate="%{x} kernels: %{y:,.0f} µs<extra>" + what + ", " + short[size] + "</extra>",
                )
            )
    tiny = [_point(data, "tiny", n) for n in ns] if "tiny" in data["sizes"] and 100 in ns else []
    if tiny:  # where the takeaway starts: capture meets one eager call
        at = tiny[ns.index(100)]
        fig.add_annotation(
            x=2,  # log axis: 10**2 = 100 kernels
            y=math.log10(at["capture_us"]["median"]),
            text="from ~100 kernels:<br>capture ≈ one eager call",
            showarrow=True,
            arrowhead=2,
            ax=-70,
            ay=-50,
            font={"size": 12},
        )
    fig.update_xaxes(type="log", title_text="kernels in the chain")
    fig.update_yaxes(type="log", title_text="µs, host time")
    fig.update_layout(
        height=460,
        margin=margin(l=60, r=10, t=10, b=40),
        legend=legend(-0.18),
        hovermode="closest",
    )
    return fig


def pool_size(results) -> go.Figure:
    """The bytes a chain's private pool holds after capture, against the chain's length: the
    in-place chain (no allocation) and the out-of-place one (a new tensor per step), both sizes."""
    data = results("m09/chain")
    ns = data["lengths"]
    fig = go.Figure()
    short = {"tiny": "tiny tensor", "few_us": "larger tensor"}
    symbols = {"out_of_place": "circle", "in_place": "square"}  # the kind by shape, the size by fill and dash
    for size in [s for s in short if s in data["sizes"]]:
        points = [_point(data, size, n) for n in ns]
        for kind in ("out_of_place", "in_place"):
            held = [p["pool_bytes"][kind] for p in points]
            fig.add_trace(
                go.Scatter(
                    x=ns,
                    y=[b / MIB for b in held],
                    mode="lines+markers",
                    marker={"symbol": symbols[kind] + ("" if size == "tiny" else "-open"), "size": 9},
                    line={"color": COLORS["capture"], "dash": "solid" if size == "tiny" else "dot"},
                    name=f"{kind.replace('_', '-')} chain, {short[size]}" + ("" if any(held) else " (on zero)"),
                    hovertemplate="%{x} kernels: %{y:.0f} MiB<extra>" + kind.replace("_", "-") + "</extra>",
                )
            )
    fig.update_xaxes(type="log", title_text="kernels in the chain")
    fig.update_yaxes(title_text="MiB held by the graph's pool", rangemode="tozero")
    fig.update_layout(
        height=380,
        margin=margin(l=60, r=10, t=10, b=40),
        legend=legend(-0.22),
        hovermode="closest",
    )
    return fig


def decode_tokens(results) -> go.Figure:
    """Tokens per second of the decode step, eager, hand-captured and reduce-overhead, one panel per
    batch size: bars are process 1's medians with its 10th-90th percentile, markers every
    process's median, in this run and in the build's second run."""
    runs = _runs(results, "m09/decode")
    second = _runs(results, "m09/decode", RUNS["second"])
    batches = [p["batch"] for p in runs[0]["points"]]
    fig = make_subplots(
        rows=1, cols=len(batches), subplot_titles=[f"batch {b}" for b in batches], horizontal_spacing=0.12
    )
    short = {"eager": "eager<br>launches", "graph": "captured<br>by hand", "compiled": "reduce-<br>overhead"}
    order = ("eager", "graph", "compiled")
    for col, b in enumerate(batches, 1):
        for x, name in enumerate(order):
            rate = _decode_point(runs[0], b)["tokens_per_s"][name]
            fig.add_trace(
                go.Bar(
                    x=[x],
                    y=[rate["median"]],
                    name=VARIANT_LABELS[name],
                    legendgroup=name,
                    showlegend=col == 1,
                    marker={"color": COLORS[name], **_pattern(name)},
                    error_y=error_bars([rate["p10"]], [rate["median"]], [rate["p90"]]),
                    hovertemplate="%{y:,.0f} tokens/s (process 1)<extra>" + VARIANT_LABELS[name] + "</extra>",
                ),
                row=1,
                col=col,
            )
            for label, procs, symbol, shift in (
                ("each process's median", runs, "circle-open", -0.18),
                ("each process's median, second run", second, "diamond-open", 0.18),
            ):
                fig.add_trace(
                    go.Scatter(
                        x=[x + shift] * len(procs),
                        y=[_decode_point(r, b)["tokens_per_s"][name]["median"] for r in procs],
                        mode="markers",
                        marker={"color": "black", "symbol": symbol, "size": 8},
                        name=label,
                        legendgroup=label,
                        showlegend=col == 1 and name == "eager",
                        hovertemplate="%{y:,.0f} tokens/s<extra>" + VARIANT_LABELS[name] + ", " + label + "</extra>",
                    ),
                    row=1,
                    col=col,
                )
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
        fig.update_xaxes(
            tickvals=list(range(len(order))),
            ticktext=[short[n] for n in order],
            title_text="how the step runs",
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="tokens per second", row=1, col=1)
    fig.update_layout(
        height=460,
        margin=margin(r=10, t=40, b=40),
        legend=legend(-0.12),
        hovermode="closest",
        bargap=0.35,
    )
    return fig


# ---------------------------------------------------------------- the race and its control (m09/control)

CONTROL_VARIANTS = ("eager_graph", "default_graph", "reduce_overhead")
CONTROL_LABELS = {
    "eager_graph": "eager, captured by hand",
    "default_graph": 'compiled (mode="default"), captured by hand',
    "reduce_overhead": 'compiled (mode="reduce-overhead")',
}
CONTROL_SHORT = {
    "eager_graph": "eager<br>by hand",
    "default_graph": "compiled<br>by hand",
    "reduce_overhead": "reduce-<br>overhead",
}


def race(results) -> dict:
    """reduce-overhead against the hand capture in the decode race (m09/decode), by forced run
    (``RUNS``) and batch: in how many processes the median of reduce-overhead's step minus the hand
    capture's, paired by round, was below zero (``faster``) and above it (``slower``)."""
    out = {}
    for run, hardware in RUNS.items():
        procs = _runs(results, "m09/decode", hardware)
        out[run] = {}
        for batch in (p["batch"] for p in procs[0]["points"]):
            points = [_decode_point(d, batch) for d in procs]
            diffs = [paired(p["step_us"]["compiled"], p["step_us"]["graph"])["median"] for p in points]
            out[run][str(batch)] = {
                "faster": sum(d < 0 for d in diffs),
                "slower": sum(d > 0 for d in diffs),
                "processes": len(diffs),
            }
    return out


def _control_run(results, hardware: str) -> dict:
    """One forced run of m09/control: per variant, a list with one summary per process of its step
    (host), its issue time (host), and the profiled steps' GPU busy time and span (device); and,
    paired by round, reduce-overhead minus the hand capture of the compiled module (what the trees'
    wrapper adds), the eager hand capture minus the compiled one (what Inductor's kernels save)."""
    procs = _runs(results, "m09/control", hardware)
    entry = {
        v: {
            "step_us": [p["step_us"][v] for p in procs],
            "issue_us": [p["issue_us"][v] for p in procs],
            "busy_us": [p["gpu_busy_us"][v] for p in procs],
            "span_us": [p["span_us"][v] for p in procs],
            "tokens_per_s": [p["tokens_per_s"][v] for p in procs],
        }
        for v in CONTROL_VARIANTS
    }
    sub = lambda a, b: a - b  # noqa: E731
    entry["trees_minus_default_graph_us"] = [
        paired(p["step_us"]["reduce_overhead"], p["step_us"]["default_graph"], sub, "us") for p in procs
    ]
    entry["eager_graph_minus_default_graph_us"] = [
        paired(p["step_us"]["eager_graph"], p["step_us"]["default_graph"], sub, "us") for p in procs
    ]
    entry["eager_graph_minus_trees_us"] = [
        paired(p["step_us"]["eager_graph"], p["step_us"]["reduce_overhead"], sub, "us") for p in procs
    ]
    entry["trees_minus_eager_graph_us"] = [
        paired(p["step_us"]["reduce_overhead"], p["step_us"]["eager_graph"], sub, "us") for p in procs
    ]
    return entry


def fair_control(results) -> dict:
    """The fair control of the decode race (m09/control, batch 1), per forced run over its processes
    (``_spread``: ``lo``/``hi`` the 10th/90th percentile envelope, ``median_lo``/``median_hi`` the
    range of process medians), and ``both``, the envelope over both runs. Per variant: the step and
    its issue time (host), the profiled steps' GPU busy time and span (device), tokens/s. Paired by
    round: ``trees_minus_default_graph_us`` (reduce-overhead against the same compiled module
    captured by hand: the wrapper), ``eager_graph_minus_default_graph_us`` (what Inductor's kernels
    save inside a hand capture), ``eager_graph_minus_trees_us``. Plus, per run and variant, the
    kernels one step runs (``kernels``: ``lo``/``hi`` over processes) and, for reduce-overhead
    against the compiled hand capture, how many processes' paired medians were ``faster``/``slower``;
    ``busy_saved_fraction``: the share of the eager capture's GPU busy time that Inductor's kernels
    removed (process medians, first process of each run)."""
    per_run = {run: _control_run(results, hardware) for run, hardware in RUNS.items()}
    out = {run: _spreads(tree) for run, tree in per_run.items()}
    out["both"] = _spreads(_merged(per_run["first"], per_run["second"]))
    for run, hardware in RUNS.items():
        procs = _runs(results, "m09/control", hardware)
        out[run]["kernels"] = {
            v: {"lo": min(p["kernels_per_step"][v] for p in procs), "hi": max(p["kernels_per_step"][v] for p in procs)}
            for v in CONTROL_VARIANTS
        }
        diffs = [s["median"] for s in per_run[run]["trees_minus_default_graph_us"]]
        out[run]["trees_vs_default_graph"] = {
            "faster": sum(d < 0 for d in diffs),
            "slower": sum(d > 0 for d in diffs),
            "processes": len(diffs),
        }
        busy = {v: procs[0]["gpu_busy_us"][v]["median"] for v in CONTROL_VARIANTS}
        out[run]["busy_saved_fraction"] = (
            1 - busy["default_graph"] / busy["eager_graph"] if busy["eager_graph"] else 0.0
        )
    return out


def control_steps(results) -> go.Figure:
    """The decode step at batch 1 three ways, each replaying a CUDA graph: the eager model and the
    compiled one (mode="default") captured by hand, and reduce-overhead. A bar per contestant, in
    its colour and pattern (as in decode_tokens): process 1's median host time per step (whiskers:
    its 10th to 90th percentile); on it a grey mark, the GPU's busy time per profiled step (the
    kernels' summed durations, median); markers: every process's median step in both forced runs.
    The hover gives the kernels per step and the issue time."""
    first = _runs(results, "m09/control", RUNS["first"])
    second = _runs(results, "m09/control", RUNS["second"])
    xs = list(range(len(CONTROL_VARIANTS)))
    fig = go.Figure()
    colour = {"eager_graph": "graph", "default_graph": "default_graph", "reduce_overhead": "compiled"}
    for x, v in zip(xs, CONTROL_VARIANTS):
        step = first[0]["step_us"][v]
        fig.add_trace(
            go.Bar(
                x=[x],
                y=[step["median"]],
                width=0.5,
                name=CONTROL_LABELS[v] + ": step, wall time",
                marker={"color": COLORS[colour[v]], **_pattern(colour[v])},
                error_y=error_bars([step["p10"]], [step["median"]], [step["p90"]]),
                customdata=[[f"{first[0]['issue_us'][v]['median']:.1f}"]],
                hovertemplate="%{y:.1f} µs per step (process 1); one step issued from an idle GPU in "
                "%{customdata[0]} µs<extra>" + CONTROL_LABELS[v] + "</extra>",
            )
        )
    busy = [first[0]["gpu_busy_us"][v] for v in CONTROL_VARIANTS]
    kernels = [first[0]["kernels_per_step"][v] for v in CONTROL_VARIANTS]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[b["median"] for b in busy],
            mode="markers",
            name="GPU busy per step (profiled)",
            marker={"color": COLORS["gpu"], "symbol": "line-ew-open", "size": 54, "line": {"width": 6}},
            customdata=[[CONTROL_LABELS[v], k] for v, k in zip(CONTROL_VARIANTS, kernels)],
            hovertemplate="%{customdata[0]}: %{y:.1f} µs of kernels, %{customdata[1]} kernels and copies per step"
            "<extra>GPU busy</extra>",
        )
    )
    for label, procs, symbol, shift in (
        ("each process's median step", first, "circle-open", -0.36),
        ("each process's median step, the second run", second, "diamond-open", 0.36),
    ):
        fig.add_trace(
            go.Scatter(
                x=[x + shift for x in xs for _ in procs],
                y=[p["step_us"][v]["median"] for v in CONTROL_VARIANTS for p in procs],
                mode="markers",
                marker={"color": "black", "symbol": symbol, "size": 8},
                name=label,
                customdata=[[CONTROL_LABELS[v]] for v in CONTROL_VARIANTS for _ in procs],
                hovertemplate="%{customdata[0]}: %{y:.1f} µs per step<extra>" + label + "</extra>",
            )
        )
    fig.update_xaxes(
        tickvals=xs, ticktext=[CONTROL_SHORT[v] for v in CONTROL_VARIANTS], title_text="how the step is replayed"
    )
    fig.update_yaxes(title_text="µs per decode step, batch 1", rangemode="tozero")
    fig.update_layout(
        height=480,
        margin=margin(l=60, r=10, t=10, b=40),
        legend=legend(y=-0.25),
        hovermode="closest",
        barmode="overlay",
    )
    return fig


def control_kernels(results) -> dict:
    """The eager hand capture's kernels in one profiled step of m09/control (process 1), against
    the copy bandwidth of the same build: the matrix-vector products are cuBLAS's ``nvjet``
    kernels, in each block the QKV projection (3 d x d bf16 weights), the output projection
    (d x d) and the MLP's two (4 d x d each), then the LM head (vocab x d). Per product: the bytes
    of its weights over its device time, as a fraction of the copy rate. ``head``: the LM head;
    ``block``: the range over the blocks' products; ``busy_share``: the step's GPU busy time over
    its host-timed step (medians), the share of the step that is kernel time, not gaps."""
    data = results("m09/control")
    copy = results("methodology/ceilings")["copy"]["GBps"]["median"]
    d, vocab, layers = data["d"], data["vocab"], data["layers"]
    gemvs = [t for name, t in data["kernels"]["eager_graph"] if name.startswith("nvjet")]
    bf16 = 2
    per_block = [3 * d * d * bf16, d * d * bf16, 4 * d * d * bf16, 4 * d * d * bf16]
    sizes = per_block * layers + [vocab * d * bf16]
    if len(gemvs) != len(sizes):
        raise ValueError(f"m09/control: {len(gemvs)} nvjet kernels in one step, expected {len(sizes)}")

    def entry(nbytes: int, us: float) -> dict:
        return {"MB": nbytes / 1e6, "us": us, "GBps": nbytes / us / 1e3, "of_copy": nbytes / us / 1e3 / copy}

    block = [entry(b, t) for b, t in zip(sizes[:-1], gemvs[:-1])]
    busy = data["gpu_busy_us"]["eager_graph"]["median"]
    step = data["step_us"]["eager_graph"]["median"]
    return {
        "head": entry(sizes[-1], gemvs[-1]),
        "block": {k: {"lo": min(e[k] for e in block), "hi": max(e[k] for e in block)} for k in ("MB", "us", "of_copy")},
        "busy_us": busy,
        "step_us": step,
        "busy_share": busy / step,
    }


def decode_captures(results) -> dict:
    """The decode step's hand capture, per batch size, over every process of both forced runs: its
    host time in ms (one sample per process), ``lo``/``hi`` over all of them, and ``rest_hi``, the
    slowest but one: ``lo`` to ``rest_hi`` spans ``rest`` of the ``processes``. Each process runs one
    untimed eager step first (its one-time set-up); batch 8 is captured after batch 1."""
    out = {}
    procs = [d for hardware in RUNS.values() for d in _runs(results, "m09/decode", hardware)]
    for batch in (p["batch"] for p in procs[0]["points"]):
        ms = sorted(_decode_point(d, batch)["capture_s"]["median"] * 1e3 for d in procs)
        out[str(batch)] = {
            "lo": ms[0],
            "hi": ms[-1],
            "rest_hi": ms[-2],
            "rest": len(ms) - 1,
            "processes": len(ms),
        }
    return out
