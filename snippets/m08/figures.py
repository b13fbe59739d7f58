"""Figures and computed values for module 08: PyTorch's CUDA caching allocator on the H200.

``results(key)`` returns a stored result's data: "m08/alloc_cost" (torch.empty served from the cache
or by cudaMalloc, by size), "m08/free_sync" (empty_cache and a free-then-reallocate while a kernel
runs), "m08/fragmentation" (an out-of-memory error with memory free, and the same workload with
expandable segments), "m08/timeline" (a training run's allocator history) and "m08/record_stream"
(a block reused across streams). Each computed-value function reads only the results it needs, so a
number's provenance names only those. Differences of two variants timed in the same interleaved
rounds are taken round by round (``coursekit.stats.paired``); nothing here imports torch.
"""

import math
import textwrap

import plotly.graph_objects as go

from coursekit.plotting import BLUE, GREEN, ORANGE, RUNS, legend, margin, number
from coursekit.stats import error_bars, paired

MiB, GiB = 2**20, 2**30
SYNC_CASES = {  # short key: the case's name in m08/free_sync (the names hold commas, which selectors cannot)
    "empty_nothing": "empty_cache, nothing cached",
    "empty_segment": "empty_cache, a free segment cached",
    "realloc": "free and reallocate",
}
SYNC_LABELS = {  # on two lines each, so that the bars keep the figure's width
    "empty_nothing": "empty_cache(),<br>nothing cached",
    "empty_segment": "empty_cache(), one free<br>segment cached (a cudaFree)",
    "realloc": "del x; torch.empty(same size)<br>(served from the cache)",
}
COLORS = {"uncached": ORANGE, "cached": BLUE, "floor": "grey", "steady": GREEN}


def _size_key(nbytes: int) -> str:
    return str(nbytes)


def _size_label(nbytes: int) -> str:
    if nbytes >= GiB and nbytes % GiB == 0:
        return f"{nbytes // GiB} GiB"
    if nbytes >= MiB and nbytes % MiB == 0:
        return f"{nbytes // MiB} MiB"
    if nbytes >= 1024 and nbytes % 1024 == 0:
        return f"{nbytes // 1024} KiB"
    return f"{nbytes:,} B"


# ---------------------------------------------------------------- allocation cost


def _every_process(results, key: str) -> list:
    """The stored data of ``key`` for each of its processes (1-based), process 1 first."""
    return [results(key, process=i) for i in range(1, results.processes(key) + 1)]


def _by_size(data: dict) -> dict:
    """One process's alloc_cost, per request size (key: the size in bytes)."""
    by = {}
    for p in data["points"]:
        h = p["host_us"]
        by[_size_key(p["size_bytes"])] = {
            "label": _size_label(p["size_bytes"]),
            "cudamalloc_extra_us": paired(h["uncached"], h["cached"]),
            "uncached_over_cached": paired(h["uncached"], h["cached"], lambda x, y: x / y, ""),
            "steady_us": paired(p["alloc_free_us"], data["no_allocation_us"]),
            "cached_extra_us": paired(h["cached"], h["floor"]),  # one cached call beyond no call
            "reserved_MiB": p["per_call"]["uncached"]["reserved_bytes"] / MiB,
            "allocated_MiB": p["per_call"]["uncached"]["allocated_bytes"] / MiB,
        }
    return by


def _ordinals(rounds: list) -> str:
    """1-based round numbers as ordinals in words' order: "2nd, 10th and 18th"."""

    def ordinal(n: int) -> str:
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"

    words = [ordinal(n) for n in rounds]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def cost(results) -> dict:
    """Per request size (key: the size in bytes): what a cudaMalloc adds to a torch.empty (uncached
    minus cached, round by round), the ratio of the two, what one cached call costs beyond no call
    (cached minus floor, round by round; ``cached_extra_growth_us_lo``: its median at 2 GiB less its
    median at 1 MiB, the least over processes), and what a cached allocation costs in a loop
    beyond a tensor that allocates nothing (torch.empty(size) minus torch.empty(0), round by round).
    The ranges over the sizes (``*_lo``, ``*_hi``) are taken over the medians of every size in every
    process, so that one sentence can quote the extremes of all processes; and the rounds of the
    256 MiB uncached request that were among each process's fastest four in every process."""
    data = results("m08/alloc_cost")
    by = _by_size(data)
    every = [_by_size(d) for d in _every_process(results, "m08/alloc_cost")]
    # the plain-Python model of the allocator (_allocator_model.py) against memory_stats, count by count
    disagreements = sum(
        p["per_call"][path][k] != p["per_call_model"][path][k]
        for p in data["points"]
        for path in p["per_call"]
        for k in p["per_call"][path]
    )
    steady = [v["steady_us"]["median"] for b in every for v in b.values()]
    extra = [v["cudamalloc_extra_us"]["median"] for b in every for v in b.values()]
    # how much more one cached call costs beyond no call at 2 GiB than at 1 MiB: the least over processes
    growth = min(
        b[_size_key(2 * GiB)]["cached_extra_us"]["median"] - b[_size_key(MiB)]["cached_extra_us"]["median"]
        for b in every
    )
    fastest = None
    for d in _every_process(results, "m08/alloc_cost"):
        point = next(p for p in d["points"] if p["size_bytes"] == 256 * MiB)
        rounds = point["host_us"]["uncached"]["rounds"]
        four = set(sorted(range(len(rounds)), key=rounds.__getitem__)[:4])
        fastest = four if fastest is None else fastest & four
    return {
        "by_size": by,
        "steady_us_lo": min(steady),
        "steady_us_hi": max(steady),
        "cudamalloc_extra_us_lo": min(extra),
        "cudamalloc_extra_us_hi": max(extra),
        "cached_extra_growth_us_lo": growth,
        "sizes": len(by),
        "model_disagreements": disagreements,
        "fast_rounds_256MiB": _ordinals(sorted(i + 1 for i in fastest)) if fastest else "none",
        "fast_rounds_256MiB_count": len(fastest or ()),
    }


def alloc_cost(results) -> go.Figure:
    """Host time of one torch.empty against the request size: served by a new cudaMalloc (the cache
    emptied first), served from the cache, and nothing at all between the same two synchronisations;
    and, in a loop, a cached allocation and its free. Log-log; whiskers from the 10th to the 90th
    percentile."""
    data = results("m08/alloc_cost")
    points = data["points"]
    sizes = [p["size_bytes"] for p in points]
    labels = [_size_label(s) for s in sizes]
    fig = go.Figure()
    series = (
        ("uncached", "uncached: empty_cache() first, so a cudaMalloc", lambda p: p["host_us"]["uncached"]),
        ("cached", "cached: a free block of that size waits in the cache", lambda p: p["host_us"]["cached"]),
        ("floor", "no call: only the two synchronisations around it", lambda p: p["host_us"]["floor"]),
        ("steady", "allocate-and-free loop, back to back", lambda p: p["alloc_free_us"]),
    )
    for key, name, pick in series:
        s = [pick(p) for p in points]
        mids = [x["median"] for x in s]
        fig.add_trace(
            go.Scatter(
                x=sizes,
                y=mids,
                mode="lines+markers",
                name=name,
                line={"color": COLORS[key], "dash": "dot" if key in ("floor", "steady") else "solid"},
                error_y=error_bars([x["p10"] for x in s], mids, [x["p90"] for x in s]),
                customdata=[
                    [lab, p["segment_bytes"] / MiB, p["per_call"]["uncached"]["num_device_alloc"]]
                    for lab, p in zip(labels, points)
                ],
                hovertemplate="%{customdata[0]}: %{y:.1f} µs (median)<br>a new segment would be "
                "%{customdata[1]:,.0f} MiB; cudaMalloc calls per uncached request: %{customdata[2]:.0f}"
                "<extra>" + name + "</extra>",
            )
        )
    empty0 = data["no_allocation_us"]
    fig.add_trace(  # the loop's baseline: the same loop around a tensor with no memory
        go.Scatter(
            x=[sizes[0], sizes[-1]],
            y=[empty0["median"]] * 2,
            mode="lines",
            name="torch.empty(0) in the same loop, no memory at all",
            line={"color": "black", "dash": "dash", "width": 1},
            hovertemplate="torch.empty(0) in the same loop: %{y:.2f} µs (median)<extra></extra>",
        )
    )
    c = data["constants"]
    # on a log axis a shape takes the value itself and an annotation its log10; the two names sit on
    # the far sides of their lines, so that they cannot run into each other at any width
    for x, text, anchor, hover in (
        (
            c["kSmallSize"],
            f"{_size_label(c['kSmallSize'])}: small pool ends",
            "right",
            "kSmallSize: the small pool ends here",
        ),
        (
            c["kMinLargeAlloc"],
            f"{_size_label(c['kMinLargeAlloc'])}: own segments",
            "left",
            "kMinLargeAlloc: from here a new segment is the request's own size",
        ),
    ):
        fig.add_vline(x=x, line_dash="dash", line_width=2, line_color="black", opacity=0.5)
        fig.add_annotation(
            x=math.log10(x),
            y=1.0,
            yref="paper",
            yanchor="bottom",
            text=text,
            hovertext=hover,
            showarrow=False,
            xanchor=anchor,
        )
    fig.update_xaxes(
        type="log", title_text="bytes requested (log scale)", tickvals=sizes, ticktext=labels, tickangle=-40
    )
    ticks = [m * 10**e for e in range(4) for m in (1, 2, 5)]  # 1, 2, 5 per decade: the loops near 2 µs read
    fig.update_yaxes(
        type="log", tickvals=ticks, ticktext=[number(v) for v in ticks], title_text="host time per call (µs, log scale)"
    )
    fig.update_layout(
        height=500,
        margin=margin(t=40),
        legend=legend(-0.22, whiskers=True),
    )
    return fig


# ---------------------------------------------------------------- synchronisation on free


def _sync_case(data: dict, key: str, stream: str) -> dict:
    name = SYNC_CASES[key]
    return next(c for c in data["cases"] if c["case"] == name and c["stream"] == stream)


def sync(results) -> dict:
    """Per case (empty_nothing, empty_segment, realloc) and stream state (idle, busy): the host time
    to return, the counts per call, and how much longer the call took behind the busy stream
    (busy minus idle, round by round; the busy variant includes queuing the sleep kernel). And the
    worked sum for empty_cache with a free segment behind a busy stream: the sleep kernel's launch,
    its device time and an idle empty_cache that calls cudaFree, added up."""
    data = results("m08/free_sync")
    out = {}
    for key in SYNC_CASES:
        idle, busy = _sync_case(data, key, "idle"), _sync_case(data, key, "busy")
        out[key] = {
            stream: {
                "returned_us": c["returned_us"],
                "returned_and_drained_us": c["returned_and_drained_us"],
                "cudafree_per_call": c["num_device_free"],
                "sync_all_streams_per_call": c["num_sync_all_streams"],
            }
            for stream, c in (("idle", idle), ("busy", busy))
        }
        out[key]["behind_busy_us"] = paired(busy["returned_us"], idle["returned_us"])
    idle_free = out["empty_segment"]["idle"]["returned_us"]["median"]
    out["sum_launch_sleep_free_us"] = data["sleep_launch_us"]["median"] + data["sleep_device_us"]["median"] + idle_free
    out["sleep_device_us"] = data["sleep_device_us"]
    out["sleep_launch_us"] = data["sleep_launch_us"]
    out["segment_MiB"] = data["segment_bytes"] / MiB
    return out


def free_sync(results) -> go.Figure:
    """Host time from the call to its return, with the device idle and with a kernel of known length
    queued just before, for the three calls; the queued kernel's device time as a line. Log axis."""
    data = results("m08/free_sync")
    fig = go.Figure()
    keys = list(SYNC_CASES)
    for stream, color, name in (
        ("idle", BLUE, "device idle"),
        ("busy", ORANGE, "behind a kernel queued just before (queuing it included)"),
    ):
        s = [_sync_case(data, k, stream)["returned_us"] for k in keys]
        mids = [x["median"] for x in s]
        fig.add_trace(
            go.Bar(
                y=[SYNC_LABELS[k] for k in keys],
                x=mids,
                orientation="h",
                name=name,
                marker_color=color,
                error_x=error_bars([x["p10"] for x in s], mids, [x["p90"] for x in s]),
                customdata=[[_sync_case(data, k, stream)["num_device_free"]] for k in keys],
                hovertemplate="%{y}: %{x:,.1f} µs; cudaFree calls: %{customdata[0]:.0f}<extra>" + name + "</extra>",
            )
        )
    sleep = data["sleep_device_us"]["median"]
    fig.add_vline(x=sleep, line_dash="dash", line_color="black", opacity=0.6)  # a shape: the value, not its log
    fig.add_annotation(
        x=math.log10(sleep),
        y=1.0,
        yref="paper",
        yanchor="bottom",
        xanchor="right",
        text=f"the queued kernel's device time, {sleep:,.0f} µs",
        showarrow=False,
    )
    launch = data["sleep_launch_us"]["median"]
    fig.add_vline(x=launch, line_dash="dot", line_color="black", opacity=0.6)
    fig.add_annotation(
        x=math.log10(launch),
        y=1.0,
        yref="paper",
        yanchor="bottom",
        yshift=18,  # a row above the kernel's own label, so that the two never meet
        xanchor="left",
        text=f"queuing that kernel alone, {launch:,.0f} µs",
        showarrow=False,
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="call")
    fig.update_xaxes(type="log", dtick=1, title_text="host time from call to return (µs, log scale)")
    fig.update_layout(
        barmode="group",
        height=420,
        margin=margin(l=10, t=60),
        legend=legend(-0.25, whiskers=True),
    )
    return fig


# ---------------------------------------------------------------- out of memory with memory free


def _config(data: dict, name: str) -> dict:
    return next(c for c in data["configs"] if c["config"] == name)


def _whole_pages(lo: int, hi: int, page: int) -> int:
    """Bytes of the whole pages (aligned to the segment's start) strictly inside [lo, hi)."""
    first, last = -(-lo // page) * page, hi // page * page
    return max(0, last - first)


def _parse_size(text: str) -> float:
    """Bytes from a size as the allocator's format_size prints it ("2.01 GiB", "512 bytes")."""
    value, unit = text.split()
    return float(value) * {"bytes": 1, "KiB": 2**10, "MiB": MiB, "GiB": GiB}[unit]


def oom(results) -> dict:
    """The default run's OOM message, one clause a line; its numbers in MiB; the arithmetic that makes
    the request fail (reserved plus the new segment against the allowance); and, for expandable
    segments, the pages the holes give back and the pages the request maps, worked from the stored
    sizes (whole pages of kLargeBuffer inside each hole; the request's shortfall past the mapped tail,
    rounded up to pages), set against the reserved bytes measured after the request."""
    data = results("m08/fragmentation")
    default = _config(data, "default")
    expandable = _config(data, "expandable_segments:True")
    message = default["message"] or ""
    for mark in (". ", "; ", ", and "):  # a line per clause, as the page reads them
        message = message.replace(mark, mark.strip() + "\n")
    message = "\n".join(
        textwrap.fill(line.strip(), 72, break_long_words=False, break_on_hyphens=False) for line in message.splitlines()
    )
    b = default["before_request"]
    page, piece, pieces = data["page_bytes"], data["piece_bytes"], data["pieces"]
    holes = range(0, pieces, 2)  # the workload frees every other piece, from the first
    unmapped = sum(_whole_pages(i * piece, (i + 1) * piece, page) for i in holes)
    e_before = expandable["before_request"]
    tail = e_before["reserved_bytes"] - data["arena_bytes"]  # mapped and free past the last live piece
    mapped = -(-(data["request_bytes"] - tail) // page) * page
    return {
        "message": message.strip(),
        "allocated_MiB": b["allocated_bytes"] / MiB,
        "reserved_MiB": b["reserved_bytes"] / MiB,
        "free_in_cache_MiB": (b["reserved_bytes"] - b["allocated_bytes"]) / MiB,
        "largest_free_MiB": b["largest_free_bytes"] / MiB,
        "request_MiB": data["request_bytes"] / MiB,
        "limit_MiB": data["limit_bytes"] / MiB,
        "needed_MiB": (b["reserved_bytes"] + data["request_bytes"]) / MiB,
        "allocated_plus_request_MiB": (b["allocated_bytes"] + data["request_bytes"]) / MiB,
        "over_limit_MiB": (b["reserved_bytes"] + data["request_bytes"] - data["limit_bytes"]) / MiB,
        "holes": len(holes),
        "model_disagreements": sum(not c["model_agrees"] for c in data["configs"]),
        # NVML's count for the process, less what the allocator reserved: the CUDA context and libraries
        # (the message rounds to hundredths of a GiB, so this is as coarse)
        "outside_allocator_GiB": _parse_size(default["message_numbers"]["process_in_use"]) / GiB
        - b["reserved_bytes"] / GiB,
        "expandable": {
            "pages_unmapped_MiB": unmapped / MiB,
            "pages_unmapped": unmapped // page,
            "tail_MiB": tail / MiB,
            "pages_mapped_MiB": mapped / MiB,
            "pages_mapped": mapped // page,
            "reserved_before_MiB": e_before["reserved_bytes"] / MiB,
            "predicted_reserved_after_bytes": e_before["reserved_bytes"] - unmapped + mapped,
            "reserved_after_MiB": expandable["after_request"]["reserved_bytes"] / MiB,
            "growth_MiB": (expandable["after_request"]["reserved_bytes"] - e_before["reserved_bytes"]) / MiB,
            "headroom_MiB": (data["limit_bytes"] - expandable["after_request"]["peak_reserved_bytes"]) / MiB,
            "us_per_page": expandable["request_us"]["median"] / (unmapped // page + mapped // page),
        },
        "request_over_oom": {
            k: expandable["request_us"][k] / default["request_us"][q]
            for k, q in (("median", "median"), ("p10", "p90"), ("p90", "p10"), ("min", "max"), ("max", "min"))
        }
        | {"n": expandable["request_us"]["n"], "unit": ""},
    }


def oom_budget(results) -> go.Figure:
    """Where the allowance went, before and after the request, in both configurations: bytes held by
    live tensors, bytes reserved but free, and (for the request that failed) the segment it asked
    for; the allowance of set_per_process_memory_fraction as a line."""
    data = results("m08/fragmentation")
    rows = []
    for name, label in (("default", "default"), ("expandable_segments:True", "expandable_segments:True")):
        c = _config(data, name)
        for when, when_label in (("before_request", "before the request"), ("after_request", "after it")):
            s = c[when]
            after = when == "after_request"
            asked = data["request_bytes"] if after and c["outcome"] != "allocated" else 0
            outcome = (" (" + c["outcome"] + ")") if after else ""
            rows.append(
                {
                    "label": f"{label}, {when_label}{outcome}",
                    "allocated": s["allocated_bytes"] / MiB,
                    "free": (s["reserved_bytes"] - s["allocated_bytes"]) / MiB,
                    "asked": asked / MiB,
                    "largest": s["largest_free_bytes"] / MiB,
                }
            )
    labels = [r["label"] for r in rows]
    fig = go.Figure()
    for key, name, color, pattern in (
        ("allocated", "allocated: blocks held by live tensors", BLUE, ""),
        ("free", "reserved but unallocated: free blocks inside the segments", "#9ecae1", ""),
        ("asked", "the new segment the failed request asked for", ORANGE, "/"),
    ):
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[r[key] for r in rows],
                orientation="h",
                name=name,
                marker={"color": color, "pattern": {"shape": pattern}},
                customdata=[[r["largest"]] for r in rows],
                hovertemplate="%{y}: %{x:,.0f} MiB; largest free block %{customdata[0]:,.0f} MiB<extra>"
                + name
                + "</extra>",
            )
        )
    limit = data["limit_bytes"] / MiB
    fig.add_vline(x=limit, line_dash="dash", line_color="black")
    fig.add_annotation(
        x=limit,
        y=1.0,
        yref="paper",
        yanchor="bottom",
        xanchor="right",
        text=f"allowance: set_per_process_memory_fraction, {limit:,.0f} MiB",
        showarrow=False,
    )
    fig.update_yaxes(autorange="reversed", automargin=True, title_text="configuration and moment")
    fig.update_xaxes(title_text="MiB", rangemode="tozero")
    fig.update_layout(
        barmode="stack",
        height=440,
        margin=margin(l=10, t=40, b=110),
        legend=legend(-0.25, traceorder="normal"),
    )
    return fig


# ---------------------------------------------------------------- the timeline


def timeline_facts(results) -> dict:
    """From the reduced history: the largest request of the first forward (no tensor of the model is
    that size), how many requests of that size the run made and never freed, what empty_cache gave
    back, and the step's host time with the history on, less with it off, round by round; and, over
    every process, in how many the spread of those differences stayed clear of zero."""
    data = results("m08/timeline")
    events = data["events"]
    forward = [e for e in events if e["phase"] == "step 1 forward" and e["action"] == "alloc"]
    workspace = max(e["size_bytes"] for e in forward)
    allocs = sum(e["action"] == "alloc" and e["size_bytes"] == workspace for e in events)
    frees = sum(e["action"] == "free" and e["size_bytes"] == workspace for e in events)
    phases = {p["phase"]: p for p in data["phases"]}
    before = phases["step 2 zero_grad"]["reserved_bytes_end"]
    after = phases["empty_cache"]["reserved_bytes_end"]
    step = data["step_us"]
    # the recording's cost in every process: which processes' spreads stay clear of zero
    history_every, stacks_every = [], []
    for d in _every_process(results, "m08/timeline"):
        history_every.append(paired(d["step_us"]["history"], d["step_us"]["off"]))
        stacks_every.append(paired(d["step_us"]["history_python_stacks"], d["step_us"]["off"]))
    return {
        "workspace_MiB": workspace / MiB,
        "workspace_allocs": allocs,
        "workspace_frees": frees,
        "held_at_end_MiB": data["final"]["allocated_bytes"] / MiB,
        "params_MiB": data["parameter_bytes"] / MiB,
        "optimizer_state_MiB": data["optimizer_state_bytes"] / MiB,
        "reserved_before_empty_cache_MiB": before / MiB,
        "reserved_after_empty_cache_MiB": after / MiB,
        "empty_cache_gave_back_MiB": (before - after) / MiB,
        "step1_segments": sum(p["segment_allocs"] for n, p in phases.items() if n.startswith("step 1")),
        "step2_segments": sum(p["segment_allocs"] for n, p in phases.items() if n.startswith("step 2")),
        "peak_allocated_MiB": max(p["peak_allocated_bytes"] for p in data["phases"]) / MiB,
        "peak_reserved_MiB": max(p["reserved_bytes_end"] for p in data["phases"]) / MiB,
        "history_cost_us": paired(step["history"], step["off"]),
        "stacks_cost_us": paired(step["history_python_stacks"], step["off"]),
        "processes": len(history_every),
        "history_p10_below_zero_processes": sum(x["p10"] < 0 for x in history_every),
        "stacks_median_above_zero_processes": sum(x["median"] > 0 for x in stacks_every),
        "stacks_p10_above_zero_processes": sum(x["p10"] > 0 for x in stacks_every),
    }


def timeline(results) -> go.Figure:
    """Allocated and reserved bytes after each event of the allocator's history, in the order the
    events happened (the history's order, not a clock), the phases shaded and named."""
    data = results("m08/timeline")
    events = data["events"]
    x = list(range(len(events)))
    text = [f"{e['phase']}: {e['action']} of {e['size_bytes']:,} bytes" for e in events]
    fig = go.Figure()
    for key, name, color, shape in (
        ("reserved_bytes", "reserved: segments the allocator holds from the driver", ORANGE, "hv"),
        ("allocated_bytes", "allocated: blocks held by live tensors", BLUE, "hv"),
    ):
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[e[key] / MiB for e in events],
                mode="lines",
                line={"color": color, "shape": shape, "width": 2},
                fill="tozeroy" if key == "allocated_bytes" else None,
                name=name,
                text=text,
                hovertemplate="event %{x}: %{text}<br>%{y:,.1f} MiB<extra>" + name.split(":")[0] + "</extra>",
            )
        )
    # one band per phase: the events that fall in it
    spans, start = [], 0
    for i in range(1, len(events) + 1):
        if i == len(events) or events[i]["phase"] != events[start]["phase"]:
            spans.append((events[start]["phase"], start, i - 1))
            start = i
    for n, (_, lo, hi) in enumerate(spans):
        fig.add_vrect(
            x0=lo - 0.5, x1=hi + 0.5, fillcolor="grey", opacity=0.08 if n % 2 else 0.0, line_width=0, layer="below"
        )
    fig.update_xaxes(  # each phase named once, under its band
        title_text="the allocator's events, in the order they happened, grouped by training phase",
        tickvals=[(lo + hi) / 2 for _, lo, hi in spans],
        ticktext=[phase for phase, _, _ in spans],
        tickangle=-45,
    )
    fig.update_yaxes(title_text="MiB", rangemode="tozero")
    fig.update_layout(
        height=500,
        margin=margin(l=60, t=20),
        legend=legend(-0.5),
        hovermode="x unified",
    )
    return fig


# ---------------------------------------------------------------- streams


def streams(results) -> dict:
    """Per fix (none, record_stream, wait_stream): runs, runs where y got x's block, runs that read a
    wrong value, MiB reserved after y's allocation; what record_stream adds to the reserved bytes; the
    side stream's sleep in milliseconds' worth of microseconds; and each fix's host time less the
    unfixed case's, round by round."""
    data = results("m08/record_stream")
    fixes = {f["fix"]: f for f in data["fixes"]}
    out = {
        name: {
            "runs": f["cases"],
            "same_block": f["same_block_cases"],
            "corrupted": f["corrupted_cases"],
            "clean": f["cases"] - f["corrupted_cases"],
            "values": ", ".join(f"{v:g}" for v in f["doubled_values_seen"]),
            "reserved_MiB": f["reserved_bytes"] / MiB,
        }
        for name, f in fixes.items()
    }
    out["record_stream_extra_MiB"] = (fixes["record_stream"]["reserved_bytes"] - fixes["none"]["reserved_bytes"]) / MiB
    out["tensor_MiB"] = data["tensor_bytes"] / MiB
    for name in ("record_stream", "wait_stream"):
        out[name]["host_cost_us"] = paired(fixes[name]["run_us"], fixes["none"]["run_us"])
    return out


# ---------------------------------------------------------------- what the cache saves a training step


def step_arithmetic(results) -> dict:
    """The timeline's second training step, had every allocation in it been a cudaMalloc: its count
    of allocations times the extra cost of an uncached 1 MiB request (the median request of the
    step is about that size), against the step's measured host time with the cache."""
    tl = results("m08/timeline")
    extra = cost(results)["by_size"][_size_key(MiB)]["cudamalloc_extra_us"]
    allocs = sum(e["action"] == "alloc" and e["phase"].startswith("step 2") for e in tl["events"])
    sizes = sorted(e["size_bytes"] for e in tl["events"] if e["action"] == "alloc" and e["phase"].startswith("step 2"))
    scaled = {k: extra[k] * allocs for k in ("median", "p10", "p90", "min", "max")}
    return {
        "allocs": allocs,
        "median_request_MiB": sizes[len(sizes) // 2] / MiB,
        "all_uncached_us": scaled | {"n": extra["n"], "unit": "us"},
        "step_us": tl["step_us"]["off"],
        "all_uncached_over_step": {
            "median": scaled["median"] / tl["step_us"]["off"]["median"],
            "p10": scaled["p10"] / tl["step_us"]["off"]["p90"],
            "p90": scaled["p90"] / tl["step_us"]["off"]["p10"],
            "min": scaled["min"] / tl["step_us"]["off"]["max"],
            "max": scaled["max"] / tl["step_us"]["off"]["min"],
            "n": extra["n"],
            "unit": "",
        },
    }


# ---------------------------------------------------------------- the two forced runs side by side


class _OnSet:
    """``results`` bound to one stored set, so that the functions above read another run's data."""

    def __init__(self, results, hardware: str):
        self._results, self._hardware = results, hardware

    def __call__(self, key: str, process: int | None = None, hardware: str | None = None):
        return self._results(key, hardware=self._hardware, process=process)

    def processes(self, key: str, hardware: str | None = None) -> int:
        return self._results.processes(key, hardware=self._hardware)


def runs(results) -> dict:
    """The numbers that moved between the build's two forced runs (``RUNS``), per run: the range over
    every size and process (medians) of what a cached allocate-and-free costs beyond a tensor without
    memory and of what a cudaMalloc adds; the rounds of the uncached 256 MiB request that were among
    every process's fastest four; the timeline's second step, had every allocation been a cudaMalloc,
    over the step (process 1: median and spread; and the range over every pairing of a process's 1 MiB
    price with a process's step, the two being measured in different processes); and the
    expandable-segment request over the failed one (medians). ``both``: the ranges' envelope over the two runs."""
    out = {}
    for run, hardware in RUNS.items():
        on = _OnSet(results, hardware)
        c = cost(on)
        arithmetic = step_arithmetic(on)
        steps = arithmetic["all_uncached_over_step"]
        # the 1 MiB price and the step come from different snippets run in different processes, so no
        # process's price belongs with any process's step: the range covers every pairing of the two
        prices = [
            _by_size(d)[_size_key(MiB)]["cudamalloc_extra_us"]["median"] for d in _every_process(on, "m08/alloc_cost")
        ]
        step_medians = [d["step_us"]["off"]["median"] for d in _every_process(on, "m08/timeline")]
        ratios = [
            arithmetic["allocs"] * min(prices) / max(step_medians),
            arithmetic["allocs"] * max(prices) / min(step_medians),
        ]
        out[run] = {
            "steady_us_lo": c["steady_us_lo"],
            "steady_us_hi": c["steady_us_hi"],
            "cudamalloc_extra_us_lo": c["cudamalloc_extra_us_lo"],
            "cudamalloc_extra_us_hi": c["cudamalloc_extra_us_hi"],
            "fast_rounds_256MiB": c["fast_rounds_256MiB"],
            "step_ratio_median": steps["median"],
            "step_ratio_p10": steps["p10"],
            "step_ratio_p90": steps["p90"],
            "step_ratio_lo": min(ratios),
            "step_ratio_hi": max(ratios),
            "malloc_1MiB_us_lo": min(prices),
            "malloc_1MiB_us_hi": max(prices),
            "step_us_lo": min(step_medians),
            "step_us_hi": max(step_medians),
            "request_over_oom": oom(on)["request_over_oom"]["median"],
        }
    first, second = out["first"], out["second"]
    out["both"] = {  # the envelope of the two runs, for a sentence that quotes one range for both
        k: (min if k.endswith("_lo") else max)(first[k], second[k])
        for k in (
            "steady_us_lo",
            "steady_us_hi",
            "cudamalloc_extra_us_lo",
            "cudamalloc_extra_us_hi",
            "step_ratio_lo",
            "step_ratio_hi",
        )
    }
    return out


# ---------------------------------------------------------------- the message's lines the page reads


def oom_lines(results) -> dict:
    """The default run's OOM message (``oom``'s, one clause a line) cut to the lines the page reads:
    the error, the size asked for, the allowance, allocated and reserved-but-unallocated memory, and
    the remedy it names. The driver's view of the GPU and the documentation link are left out (the
    page's box quotes the former's numbers)."""
    keep = ("CUDA out of memory", "Tried to allocate", "allowed", "allocated by PyTorch", "reserved by PyTorch")
    keep += ("If reserved but unallocated", "expandable_segments")
    lines = oom(results)["message"].splitlines()
    return {"message": "\n".join(line for line in lines if any(k in line for k in keep))}
