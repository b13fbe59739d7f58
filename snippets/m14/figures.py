"""Figures and computed values for module 14: a small inference server against Hugging Face transformers.

``results(key)`` returns a stored result's data: "m14/race" (the offline race: ours, ours with static
batching and three transformers routes in the same interleaved rounds), "m14/decode1" (batch-1 time per
output token), "m14/poisson" (latency under Poisson arrivals, two rounds), "m14/buckets" (capture cost,
replay time per bucket, padding, and the decode step as eager, whole graph, compiled and piecewise),
"m14/attention" (the Triton paged kernel against SDPA over gathered blocks) and "m14/hf_sweep" (the
tuning of transformers' routes). Values timed in the same rounds
are compared round by round (``coursekit.stats.paired``). Poisson has two rounds, too few for a
spread, so its computed values are plain numbers: the worst and the best round. Nothing here imports
torch.
"""

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from coursekit.plotting import BLUE, BROWN, GREEN, ORANGE, PURPLE, RUNS, WHISKERS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import error_bars, paired

CONTESTANTS = {  # the offline race's contestants, in the order the figure draws them
    "ours": "ours: paged KV, continuous batching, graph buckets",
    "ours_static": "ours, static batching (one batch of 256)",
    "hf_static_compile": "HF generate, static cache + torch.compile",
    "hf_dynamic": "HF generate, dynamic cache",
    "hf_generate_batch": "HF generate_batch (continuous batching)",
}
COLORS = {
    "ours": BLUE,
    "ours_static": GREEN,
    "hf_static_compile": ORANGE,
    "hf_dynamic": "#f2b25c",
    "hf_generate_batch": BROWN,
    "hf_continuous": BROWN,
}
MODES = {
    "eager": "eager (the model, launched op by op)",
    "whole_graph": "whole graph, the eager model captured (the first server)",
    "compiled_whole_graph": "compiled pieces, one graph (the server)",
    "piecewise": "compiled pieces, piecewise graphs, attention eager",
}
MODE_COLORS = {"eager": "#7f7f7f", "whole_graph": BLUE, "compiled_whole_graph": GREEN, "piecewise": ORANGE}
SIDES = {
    "ours": "ours, continuous batching",
    "ours_static": "ours, static batching",
    "hf_continuous": "HF ContinuousBatchingManager",
}
SIDE_SYMBOLS = {"ours": "circle", "ours_static": "square", "hf_continuous": "diamond"}
SIDE_OFFSETS = {"ours": -0.22, "ours_static": 0.0, "hf_continuous": 0.22}  # side by side within a percentile
NEW_TOKENS_AFTER_FIRST = 127  # TPOT's denominator: 128 new tokens, the first one excluded
LAYERS = 12  # _model.CONFIG's num_hidden_layers (figures stay torch-free, so _model is not imported)


def _pick(points: list[dict], **fields) -> dict:
    return next(p for p in points if all(p[k] == v for k, v in fields.items()))


def _rounds(per_round: list[dict], metric: str, q: str | None = None) -> list[float]:
    return [r[metric][q] if q else r[metric] for r in per_round]


# ---------------------------------------------------------------- computed values


def _floor_us(results, batch: int) -> float:
    """A decode step's floor: its weights and its batch's keys and values (the context timed) read once
    at the copy peak's byte rate, in µs."""
    sb = results("m14/buckets")["step_bytes"]
    copy_GBps = results("methodology/ceilings")["copy"]["GBps"]["median"]
    return (sb["weights"] + batch * sb["context"] * sb["kv_per_token"]) / 1e3 / copy_GBps


def derived(results) -> dict:
    """Every number the page computes from stored ones.

    ``race``: each HF route's time per token over ours, per round (``over_ours.<route>``); the wall time
    of one of our offline runs; the decode time the replay model implies for it (buckets' offline
    schedule) and the rest, prefill and host. ``workload``: the mean prompt (attention's contexts less
    the decoded tokens) and the prompt tokens of the 256 requests. ``decode1``: HF static + compile
    over ours, per round. ``poisson``: per side the worst and best round of p50/p99 TTFT and TPOT and
    the achieved throughput; the span it implies, and HF's tail (one request's TTFT plus 127 TPOTs).
    ``buckets``: capture time summed per bucket set, pool MiB, the padding per set and schedule, and the
    modelled decode time per set. ``modes.<batch>``: each mode over the next faster one, per round; the
    whole graph's step over batch 1's; the step's floor (its weights and its batch's keys and values at
    the context buckets timed, read at the copy peak's byte rate) and the whole graph's and the compiled
    graph's step over it. ``attention.<batch>``: the gather's time over the
    kernel's, per round, and the kernel's rate on the bytes of K and V it reads."""
    out = {}
    race = results("m14/race")
    t = race["us_per_token"]
    out["race"] = {"over_ours": {}}
    for name in ("hf_static_compile", "hf_dynamic", "hf_generate_batch", "ours_static"):
        out["race"]["over_ours"][name] = paired(t[name], t["ours"], lambda a, b: a / b, "x")
    tokens = race["generated_tokens"]
    out["race"]["ours_run_s"] = t["ours"]["median"] * tokens * 1e-6
    out["race"]["hf_best_run_s"] = t["hf_static_compile"]["median"] * tokens * 1e-6

    buckets = results("m14/buckets")
    offline = _pick(buckets["padding"], schedule="offline", bucket_set="pow2")
    out["race"]["modelled_decode_s"] = offline["modelled_decode_s"]
    out["race"]["decode_share"] = offline["modelled_decode_s"] / out["race"]["ours_run_s"]
    out["race"]["rest_s"] = out["race"]["ours_run_s"] - offline["modelled_decode_s"]

    attention = results("m14/attention")
    p256 = _pick(attention["points"], batch=256)
    mean_prompt = p256["mean_context"] - attention["config"]["decoded"]
    out["workload"] = {"mean_prompt": mean_prompt, "prompt_tokens": round(mean_prompt * p256["batch"])}
    out["workload"]["padded_prompt_tokens"] = 512 * p256["batch"]  # HF's static cache: every prompt to 512
    out["workload"]["padding_share"] = 1 - out["workload"]["prompt_tokens"] / out["workload"]["padded_prompt_tokens"]

    d1 = results("m14/decode1")["us_per_token"]
    out["decode1"] = {
        "hf_static_over_ours": paired(d1["hf_static_compile"], d1["ours"], lambda a, b: a / b, "x"),
        "hf_dynamic_over_ours": paired(d1["hf_dynamic"], d1["ours"], lambda a, b: a / b, "x"),
        # the host's share per token at batch 1: ours less the compiled step's device time (buckets)
        "host_us": d1["ours"]["median"] - _pick(buckets["modes"], batch=1)["us"]["compiled_whole_graph"]["median"],
    }

    if "m14/poisson" in results.keys():  # the Poisson run: measured in the first run only
        poisson = results("m14/poisson")
        out["poisson"] = {}
        for side, rounds in poisson["per_round"].items():
            s = {}
            for metric in ("ttft_ms", "tpot_ms"):
                for q in ("p50", "p99"):
                    values = _rounds(rounds, metric, q)
                    s[f"{metric[:4]}_{q}_worst"], s[f"{metric[:4]}_{q}_best"] = max(values), min(values)
            rates = _rounds(rounds, "tokens_per_s")
            s["tokens_per_s_lo"], s["tokens_per_s_hi"] = min(rates), max(rates)
            s["of_offered_lo"] = min(rates) / poisson["offered_tokens_per_s"]
            s["of_offered_hi"] = max(rates) / poisson["offered_tokens_per_s"]
            s["span_s_hi"] = tokens / min(rates)  # first arrival to last token
            s["span_s_lo"] = tokens / max(rates)
            out["poisson"][side] = s
        hf = out["poisson"]["hf_continuous"]
        hf_rounds = poisson["per_round"]["hf_continuous"]
        tails = [(r["ttft_ms"]["p50"] + NEW_TOKENS_AFTER_FIRST * r["tpot_ms"]["p50"]) / 1e3 for r in hf_rounds]
        hf["request_s_lo"], hf["request_s_hi"] = min(tails), max(tails)  # one typical request, arrival to last token
        ours = out["poisson"]["ours"]
        out["poisson"]["span_gap_s_lo"] = hf["span_s_lo"] - ours["span_s_hi"]
        out["poisson"]["span_gap_s_hi"] = hf["span_s_hi"] - ours["span_s_lo"]
        out["poisson"]["hf_over_ours_tpot_p99_worst_case"] = hf["tpot_p99_best"] / ours["tpot_p99_worst"]
        out["poisson"]["static_over_continuous_ttft_p50_worst_case"] = (
            out["poisson"]["ours_static"]["ttft_p50_best"] / ours["ttft_p50_worst"]
        )

    caps, fine = buckets["captures"], buckets["fine_captures"]
    replay = {r["batch"]: r["us"] for r in buckets["replay_us"]}
    out["buckets"] = {
        "pow2_count": len(caps),
        "vllm_count": len(fine),
        "pow2_capture_ms": sum(c["capture_s"] for c in caps) * 1e3,
        "vllm_capture_ms": sum(c["capture_s"] for c in fine) * 1e3,
        "capture_ms_lo": min(c["capture_s"] for c in caps) * 1e3,  # the power-of-two captures
        "capture_ms_hi": max(c["capture_s"] for c in caps) * 1e3,
        "pool_MiB": buckets["pool_bytes"] / 2**20,
        "first_capture_released_MiB": -caps[0]["reserved_growth_bytes"] / 2**20,
        "driver_MiB_after_first": sum(max(0, c["device_free_drop_bytes"]) for c in caps[1:]) / 2**20,
        "replay_1_us": replay[1],
        "replay_256_us": replay[256],
        "padding": {},
    }
    for p in buckets["padding"]:
        out["buckets"]["padding"][f"{p['schedule']}_{p['bucket_set']}"] = p
    pw, vl = out["buckets"]["padding"]["poisson_pow2"], out["buckets"]["padding"]["poisson_vllm"]
    out["buckets"]["poisson_modelled_saving"] = 1 - vl["modelled_decode_s"] / pw["modelled_decode_s"]
    out["buckets"]["poisson_mean_batch"] = pw["real_slots"] / pw["decode_steps"]
    # where the two sets differ: steps of 17 to 24 pad to 24 (vLLM's set) or 32 (powers of two), 33 to 40 to 40 or 64
    poisson_batches = next(s for s in buckets["schedules"] if s["schedule"] == "poisson")["decode_batches"]
    out["buckets"]["poisson_share_le_16"] = sum(n <= 16 for n in poisson_batches) / len(poisson_batches)
    out["buckets"]["poisson_max_batch"] = max(poisson_batches)
    out["buckets"]["poisson_first_decode_batch"] = poisson_batches[0]  # how many had piled up by the first decode
    # the arrivals' expected span, n / rate (n: real decode slots over each request's 127 decode steps);
    # the seeded arrivals end a little earlier
    out["buckets"]["poisson_arrival_span_s"] = pw["real_slots"] / NEW_TOKENS_AFTER_FIRST / buckets["poisson_rate_per_s"]
    out["buckets"]["replay_32_minus_24_us"] = replay[32]["median"] - replay[24]["median"]
    out["buckets"]["replay_per_slot_16_to_256_us"] = (replay[256]["median"] - replay[16]["median"]) / (256 - 16)

    out["modes"] = {}
    step_1_us = next(m for m in buckets["modes"] if m["batch"] == 1)["us"]["whole_graph"]["median"]
    compiled_1_us = next(m for m in buckets["modes"] if m["batch"] == 1)["us"]["compiled_whole_graph"]["median"]
    for m in buckets["modes"]:
        u = m["us"]
        floor = _floor_us(results, m["batch"])
        graphs = m["graphs_per_step"]["piecewise"]
        launches = graphs + (graphs - 2) // 2  # the graphs, and one eager attention per layer (2 graphs a layer + 2)
        out["modes"][str(m["batch"])] = {
            "eager_over_whole": paired(u["eager"], u["whole_graph"], lambda a, b: a / b, "x"),
            "whole_over_compiled": paired(u["whole_graph"], u["compiled_whole_graph"], lambda a, b: a / b, "x"),
            "piecewise_minus_compiled_us": paired(u["piecewise"], u["compiled_whole_graph"], lambda a, b: a - b, "us"),
            "piecewise_over_compiled": paired(u["piecewise"], u["compiled_whole_graph"], lambda a, b: a / b, "x"),
            # per boundary: each piece's replay plus each layer's eager attention launch
            "piecewise_extra_per_launch_us": paired(
                u["piecewise"], u["compiled_whole_graph"], lambda a, b: (a - b) / launches, "us"
            ),
            "whole_tokens_per_s": m["batch"] / (u["whole_graph"]["median"] * 1e-6),
            "piecewise_launches": launches,
            "layers": (graphs - 2) // 2,
            "floor_us": floor,
            "whole_over_batch1": u["whole_graph"]["median"] / step_1_us,
            "compiled_over_batch1": u["compiled_whole_graph"]["median"] / compiled_1_us,
            "whole_over_floor": u["whole_graph"]["median"] / floor,
            "compiled_over_floor": u["compiled_whole_graph"]["median"] / floor,
        }

    out["attention"] = {}
    for p in attention["points"]:
        u = p["us"]
        out["attention"][str(p["batch"])] = {
            "gather_over_kernel": paired(u["gathered_sdpa"], u["triton_paged"], lambda a, b: a / b, "x"),
            "kernel_GBps": p["kv_bytes"] / 1e3 / u["triton_paged"]["median"],
            "kv_MB": p["kv_bytes"] / 1e6,
            "gathered_MB": p["gathered_bytes"] / 1e6,
        }
    return out


def sweep(results) -> dict:
    """hf_sweep: tokens/s per configuration, as ``<route>_<config>``, and the
    generate_batch run with CUDA graphs forced on over its defaults (medians of two runs)."""
    data = results("m14/hf_sweep")
    out = {}
    for route, configs in data["results"].items():
        for name, c in configs.items():
            if "error" not in c:
                out[f"{route}_{name}"] = c["tokens_per_s"]["median"]
    out["cb_graphs_over_defaults"] = out["generate_batch_cuda_graphs"] / out["generate_batch_defaults"]
    out["static_over_cb_graphs"] = out["static_compile_256"] / out["generate_batch_cuda_graphs"]
    return out


# ---------------------------------------------------------------- figures


def throughput(results) -> go.Figure:
    """The offline race: tokens per second of each contestant (whiskers 10th to 90th percentile of
    the rounds), one dot each on a log axis."""
    race = results("m14/race")
    rates = race["tokens_per_s"]
    names = list(CONTESTANTS)
    s = [rates[n] for n in names]
    fig = go.Figure(
        go.Scatter(
            y=[CONTESTANTS[n] for n in names],
            x=[r["median"] for r in s],
            # one whisker colour for dots of several: grey reads on both schemes (plotly's default is black)
            error_x={
                **error_bars([r["p10"] for r in s], [r["median"] for r in s], [r["p90"] for r in s]),
                "color": "grey",
            },
            mode="markers",
            marker={"color": [COLORS[n] for n in names], "size": 13},
            hovertemplate="%{y}: %{x:,.0f} tokens/s<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="contestant")
    fig.update_xaxes(type="log", title_text=f"generated tokens per second (log scale; {WHISKERS})")
    fig.update_layout(height=340, margin=margin(l=10), showlegend=False)
    return fig


def decode_modes(results) -> go.Figure:
    """One decode step (context 350) by batch: eager, the eager model as one graph, the compiled
    pieces as one graph, and piecewise; dotted, its floor (``_floor_us``)."""
    modes = sorted(results("m14/buckets")["modes"], key=lambda m: m["batch"])
    batches = [m["batch"] for m in modes]
    fig = go.Figure()
    for mode, label in MODES.items():
        s = [m["us"][mode] for m in modes]
        fig.add_trace(
            go.Scatter(
                x=batches,
                y=[v["median"] for v in s],
                error_y=error_bars([v["p10"] for v in s], [v["median"] for v in s], [v["p90"] for v in s]),
                mode="lines+markers",
                name=label,
                line={"color": MODE_COLORS[mode]},
                hovertemplate="batch %{x}: %{y:,.0f} µs<extra>" + label + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=batches,
            y=[_floor_us(results, b) for b in batches],
            mode="lines",
            name="floor: weights, keys and values read once at the copy rate",
            line={"color": "#7f7f7f", "dash": "dot"},
            hovertemplate="batch %{x}: floor %{y:,.0f} µs<extra></extra>",
        )
    )
    fig.update_xaxes(type="log", title_text="decode batch", tickvals=batches, ticktext=[str(b) for b in batches])
    fig.update_yaxes(type="log", title_text=f"time per decode step (µs, log scale; {WHISKERS})")
    fig.update_layout(
        height=460,
        margin=margin(),
        legend=legend(-0.18),
    )
    return fig


def latency(results) -> go.Figure:
    """Poisson arrivals: p50 and p99 of TTFT and TPOT per side, one marker per round, log axis."""
    poisson = results("m14/poisson")
    panels = [("ttft_ms", "time to first token"), ("tpot_ms", "time per output token")]
    quantiles = ("p50", "p99")
    fig = make_subplots(rows=1, cols=2, subplot_titles=[t for _, t in panels], horizontal_spacing=0.1)
    for col, (metric, _) in enumerate(panels, 1):
        for side, label in SIDES.items():
            rounds = poisson["per_round"][side]
            xs, ys = [], []
            for i, q in enumerate(quantiles):
                for r in rounds:
                    xs.append(i + SIDE_OFFSETS[side])
                    ys.append(r[metric][q])
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="markers",
                    name=label,
                    legendgroup=side,
                    showlegend=col == 1,
                    marker={
                        "color": COLORS.get(side, BLUE),
                        "size": 12,
                        "symbol": SIDE_SYMBOLS[side],
                        "line": {"width": 0},
                    },
                    customdata=[q for q in quantiles for _ in rounds],
                    hovertemplate="%{customdata}: %{y:.2f} ms<extra>" + label + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_yaxes(type="log", row=1, col=col)
        fig.update_xaxes(
            title_text="percentile",
            tickvals=list(range(len(quantiles))),
            ticktext=list(quantiles),
            range=[-0.6, len(quantiles) - 0.4],
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="milliseconds, log scale; one marker per round", row=1, col=1)
    fig.update_layout(
        height=440,
        margin=margin(t=40),
        legend=legend(-0.15),
    )
    return fig


def buckets(results) -> go.Figure:
    """Left: each decode graph's replay (context 350), powers of two and vLLM's sizes (log batch
    axis). Right: how often each decode batch size occurred under Poisson arrivals, both sets'
    buckets marked under the axis."""
    data = results("m14/buckets")
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["replay time per captured batch size", "decode batch sizes under Poisson arrivals"],
        horizontal_spacing=0.1,
    )
    pow2 = set(data["buckets"])
    replay = sorted(data["replay_us"], key=lambda r: r["batch"])
    for name, keep, color in (
        ("vLLM's default sizes", lambda b: True, ORANGE),
        ("powers of two", pow2.__contains__, BLUE),
    ):
        pts = [r for r in replay if keep(r["batch"])]
        fig.add_trace(
            go.Scatter(
                x=[r["batch"] for r in pts],
                y=[r["us"]["median"] for r in pts],
                error_y=error_bars(
                    [r["us"]["p10"] for r in pts], [r["us"]["median"] for r in pts], [r["us"]["p90"] for r in pts]
                ),
                mode="markers" if name.startswith("vLLM") else "lines+markers",
                name=name,
                marker={"color": color, "size": 7 if name.startswith("vLLM") else 9},
                hovertemplate="batch %{x}: %{y:,.0f} µs<extra>" + name + "</extra>",
            ),
            row=1,
            col=1,
        )
    schedule = next(s for s in data["schedules"] if s["schedule"] == "poisson")["decode_batches"]
    counts = {}
    for n in schedule:
        counts[n] = counts.get(n, 0) + 1
    sizes = sorted(counts)
    fig.add_trace(
        go.Bar(
            x=sizes,
            y=[counts[n] for n in sizes],
            marker_color="#3182bd",
            name="decode steps at this batch",
            hovertemplate="batch %{x}: %{y} steps<extra></extra>",
        ),
        row=1,
        col=2,
    )
    top = min(b for b in pow2 if b >= max(sizes))  # the bucket the largest batch pads to
    marks = [  # each set's buckets as ticks under the bars (vLLM's: those that are not powers of two)
        ("power-of-two bucket", sorted(b for b in pow2 if b <= top), BLUE),
        ("vLLM's other buckets", sorted(b for b in set(data["vllm_sizes"]) - pow2 if b <= top), ORANGE),
    ]
    symbols = {BLUE: "triangle-up", ORANGE: "diamond"}  # the two sets differ in shape, not only in colour
    for name, xs, color in marks:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[-0.06 * max(counts.values())] * len(xs),  # just under the axis: no bar hides behind a mark
                mode="markers",
                marker={"symbol": symbols[color], "size": 9, "color": color},
                cliponaxis=False,
                name=name,
                hovertemplate="bucket %{x}<extra>" + name + "</extra>",
            ),
            row=1,
            col=2,
        )
    ticks = sorted(pow2)
    fig.update_xaxes(
        type="log",
        title_text="decode batch (captured size, log scale)",
        tickvals=ticks,
        ticktext=[str(b) for b in ticks],
        row=1,
        col=1,
    )
    fig.update_xaxes(
        title_text="real decode batch (marks: each set's buckets)",
        row=1,
        col=2,
    )
    fig.update_yaxes(title_text=f"device time per replay (µs; {WHISKERS})", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="decode steps", row=1, col=2)
    fig.update_layout(
        height=440,
        margin=margin(t=40),
        legend=legend(-0.18),
    )
    return fig


def attention(results) -> go.Figure:
    """One layer's decode attention by batch: the Triton kernel against the gather and SDPA."""
    points = sorted(results("m14/attention")["points"], key=lambda p: p["batch"])
    batches = [p["batch"] for p in points]
    fig = go.Figure()
    for name, label, color in (
        ("triton_paged", "Triton kernel, reads blocks in place", BLUE),
        ("gathered_sdpa", "gather the blocks, then SDPA", ORANGE),
    ):
        s = [p["us"][name] for p in points]
        fig.add_trace(
            go.Scatter(
                x=batches,
                y=[v["median"] for v in s],
                error_y=error_bars([v["p10"] for v in s], [v["median"] for v in s], [v["p90"] for v in s]),
                mode="lines+markers",
                name=label,
                line={"color": color},
                hovertemplate="batch %{x}: %{y:.1f} µs<extra>" + label + "</extra>",
            )
        )
    fig.update_xaxes(type="log", title_text="decode batch", tickvals=batches, ticktext=[str(b) for b in batches])
    fig.update_yaxes(type="log", title_text=f"device time per layer call (µs, log scale; {WHISKERS})")
    fig.update_layout(
        height=400,
        margin=margin(),
        legend=legend(-0.18),
    )
    return fig


def runs(results) -> dict:
    """Host-bound numbers that moved between the build's two runs, read from both sets by name:
    ours over HF's best offline route (median of the rounds) and ours static over continuous (the
    range of the rounds), the gathered attention at batch 1
    (its launch gaps count), and HF's manager's concurrency under Poisson arrivals (the rate times
    one request's time from arrival to last token, at the medians)."""
    out = {}
    for run, hardware in RUNS.items():
        race = results("m14/race", hardware=hardware)
        attention = results("m14/attention", hardware=hardware)
        out[run] = {
            "speedup_vs_hf_best": race["speedup_vs_hf_best"]["median"],
            "gather_batch1_us": _pick(attention["points"], batch=1)["us"]["gathered_sdpa"]["median"],
            "kernel_batch1_us": _pick(attention["points"], batch=1)["us"]["triton_paged"]["median"],
            "static_over_continuous_min": race["continuous_over_static"]["min"],
            "static_over_continuous_max": race["continuous_over_static"]["max"],
        }
        if "m14/poisson" in results.keys(hardware):  # measured in the first run only
            poisson = results("m14/poisson", hardware=hardware)
            hf = poisson["per_round"]["hf_continuous"]
            request_s = [(r["ttft_ms"]["p50"] + NEW_TOKENS_AFTER_FIRST * r["tpot_ms"]["p50"]) / 1e3 for r in hf]
            out[run]["hf_concurrency"] = poisson["rate_per_s"] * sum(request_s) / len(request_s)
    return out


# ---------------------------------------------------------------- where the offline time goes


LADDER = {  # our engine in the offline race, one switch added per step (race.py's LADDER)
    "ours_v1": "the first server",
    "ours_compiled": "+ compiled layer pieces",
    "ours_one_call": "+ one prefill attention call a layer",
    "ours_overlap": "+ the host a step ahead",
    "ours": "+ prefill from CUDA graphs: the server",
}
PHASES = {
    "prefill_s": ("prefill steps", ORANGE),
    "decode_s": ("decode steps", BLUE),
    "gpu_idle_s": ("GPU idle", "#bdbdbd"),
}


def _median_round(phases: dict) -> dict:
    """The phases of the median round (an odd count): one real round, whose parts add up."""
    walls = phases["wall_s"]["rounds"]
    i = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
    return {k: v["rounds"][i] for k, v in phases.items()}


def ladder(results) -> dict:
    """Per step of our engine: its time per token (median round), its median round's phases, its
    gain over the step before (per round); the decode step against its floor (``floor_us``); HF's
    best run (``hf_best_s``) and the time the target allows (``target_s``)."""
    race = results("m14/race")
    t, tokens, names = race["us_per_token"], race["generated_tokens"], list(LADDER)
    out = {"steps": {}}
    for i, name in enumerate(names):
        step = {"us_per_token": t[name]["median"], **_median_round(race["phases"][name])}
        step["decode_step_us"] = step["decode_s"] / race["engine_stats"][name]["decode_steps"] * 1e6
        if i:
            step["gain"] = paired(t[names[i - 1]], t[name], lambda a, b: a / b, "x")
        out["steps"][name] = step
    out["first_over_server"] = paired(t["ours_v1"], t["ours"], lambda a, b: a / b, "x")
    out["floor_us"] = _floor_us(results, 256)
    out["decode_over_floor"] = out["steps"]["ours"]["decode_step_us"] / out["floor_us"]
    replay = _pick(results("m14/buckets")["modes"], batch=256)["us"]["compiled_whole_graph"]["median"]
    out["replay_over_floor"] = replay / out["floor_us"]
    # the paged attention's share of that replay: twelve layer calls at batch 256 (attention.py's
    # contexts, the workload's prompts plus 64 decoded tokens: about the replay's context of 350)
    layer_us = _pick(results("m14/attention")["points"], batch=256)["us"]["triton_paged"]["median"]
    out["attention_share"] = LAYERS * layer_us / replay
    out["hf_best_s"] = t[race["hf_best"]]["median"] * tokens * 1e-6
    out["target_s"] = out["hf_best_s"] / race["races"][0]["bar"]
    return out


def ladder_split(results) -> go.Figure:
    """One offline run (median round) per ladder step, by phase; HF's best run; the target (dotted)."""
    lad = ladder(results)
    rows = [LADDER[n] for n in lad["steps"]] + ["HF generate, static cache + compile"]
    fig = go.Figure()
    for key, (name, color) in PHASES.items():
        xs = [step[key] * 1e3 for step in lad["steps"].values()] + [None]
        fig.add_trace(go.Bar(y=rows, x=xs, name=name, orientation="h", marker_color=color,
                             hovertemplate="%{y}: %{x:,.0f} ms<extra>" + name + "</extra>"))  # fmt: skip
    fig.add_trace(go.Bar(y=rows, x=[None] * len(lad["steps"]) + [lad["hf_best_s"] * 1e3], name="HF's whole run",
                         orientation="h", marker_color=PURPLE,
                         hovertemplate="%{y}: %{x:,.0f} ms<extra>HF's whole run</extra>"))  # fmt: skip
    fig.add_vline(x=lad["target_s"] * 1e3, line_dash="dot", line_color="#7f7f7f")
    fig.add_annotation(x=lad["target_s"] * 1e3, y=1.0, yref="paper", text="target", showarrow=False, yanchor="bottom")
    fig.update_layout(barmode="stack", height=380, margin=margin(l=10, t=30), legend=legend(-0.3))
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="engine")
    fig.update_xaxes(title_text="one offline run: 256 requests, 128 new tokens each (ms)", rangemode="tozero")
    return fig
