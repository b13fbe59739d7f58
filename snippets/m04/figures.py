"""Figures and computed values for module 04: what Dynamo's guards cost per call, and what a
first compile costs against the size of the graph.

``results(key)`` returns a stored result's data: "m04/guards" (snippets/m04/guards.py: explain,
the guard tree, the recompile limit, the guard-cost sweep), "m04/failed_routes"
(snippets/m04/failed_routes.py: trace, script, symbolic_trace) and "m04/compile_time"
(snippets/m04/compile_time.py: first calls per backend against graph size).

In the sweep, the variants of one point were timed in the same interleaved rounds, so a
difference or ratio between two of them is taken round by round (``_paired``) and keeps a spread
that a claim can rest on. Two variants are stand-ins: "graph_alone" is the bound method the
backend returned (``_LazyGraphModule._lazy_forward``), where Dynamo calls the generated forward
wrapped in ``torch._dynamo.disable``; "guards_alone" is ``RootGuardManager.check`` on a dict, where
the frame hook runs the same tree from C++ on the frame's locals. So "rest_us" (the whole call
minus the two) also carries their differences, of a sign that was not measured.
"""

import math
import textwrap

import plotly.graph_objects as go

from coursekit.plotting import RUNS, legend, margin

# torch-free: figures run at site-build time without torch
from coursekit.stats import error_bars, summarize

VARIANTS = {  # the sweep's variants, in the order the figure draws them
    "eager": "eager (the function, uncompiled)",
    "guards_alone": "guard check alone (the cache entry's RootGuardManager.check, from Python)",
    "graph_alone": "captured FX graph alone (the backend's bound method, called directly)",
    "dynamo_eager": 'torch.compile(backend="eager"): guards + Dynamo + the graph',
    "inductor": "torch.compile (default, Inductor)",
}
STAGES = {  # compile_time's backends, each stopping one stage later; the stage each adds
    "eager": "Dynamo: bytecode to FX graph, guards",
    "aot_eager": "+ AOTAutograd: ATen graph",
    "inductor": "+ Inductor: fusion, Triton code, kernels compiled",
}


def _paired(values: list[float], unit: str) -> dict:
    """A summary of values computed round by round (one per interleaved round)."""
    return summarize(values, unit, "host")


def _rounds(point: dict, name: str) -> list[float]:
    return point["host_us"][name]["rounds"]


def _per_process(results, key: str) -> list:
    """A pinned ``results`` for each process of ``key`` (process 1 first): a figure drawn from one
    process alone hides how far the processes disagree (at a thousand tensors they do)."""
    count = getattr(results, "processes", lambda k: 1)(key)

    def pinned(i: int):
        return lambda k, hardware=None, process=None: results(k, hardware, process or i)

    return [pinned(i) for i in range(1, count + 1)]


def _middle(values: list[float]) -> float:
    """The median of a few numbers (the processes' medians)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def calls(results) -> dict:
    """Per number of guarded tensors: what Dynamo adds to a call, and how much of it is the guard
    check, each taken round by round; and the marginal cost of one more tensor."""
    data = results("m04/guards")
    by_tensors = {}
    for p in data["sweep"]:
        eager, guards = _rounds(p, "eager"), _rounds(p, "guards_alone")
        graph, dynamo = _rounds(p, "graph_alone"), _rounds(p, "dynamo_eager")
        row = {
            "tensors": p["tensors"],
            "guards": p["guards"],
            # what torch.compile(backend="eager") adds to the uncompiled function
            "dynamo_minus_eager_us": _paired([d - e for d, e in zip(dynamo, eager)], "us"),
            # what it adds to the graph it runs: the guard check and the rest of Dynamo's path
            "dynamo_minus_graph_us": _paired([d - g for d, g in zip(dynamo, graph)], "us"),
            "rest_us": _paired([d - g - c for d, g, c in zip(dynamo, graph, guards)], "us"),
            "guards_over_eager": _paired([c / e for c, e in zip(guards, eager)], ""),
            "guards_over_graph": _paired([c / g for c, g in zip(guards, graph)], ""),
            "guards_share_of_added": _paired([c / (d - g) for c, d, g in zip(guards, dynamo, graph)], ""),
            # the same parts as shares of the whole compiled call, the units Figure 2 draws
            "guards_share_of_call": _paired([c / d for c, d in zip(guards, dynamo)], ""),
            "rest_share_of_call": _paired([(d - g - c) / d for c, d, g in zip(guards, dynamo, graph)], ""),
            "ns_per_guard": _paired([c * 1e3 / p["guards"] for c in guards], "ns"),
            "logged_latency_us": p["logged_latency_us"],
            "logged_over_measured": p["logged_latency_us"] / p["host_us"]["guards_alone"]["median"],
        }
        if "inductor" in p["host_us"]:
            inductor = _rounds(p, "inductor")
            row["inductor_over_eager"] = _paired([i / e for i, e in zip(inductor, eager)], "")
            row["inductor_minus_dynamo_us"] = _paired([i - d for i, d in zip(inductor, dynamo)], "us")
        by_tensors[str(p["tensors"])] = row
    first, last = data["sweep"][0], data["sweep"][-1]
    extra = last["tensors"] - first["tensors"]

    def per_tensor(name: str) -> float:
        """Microseconds one more tensor adds, between the ends of the sweep (medians)."""
        return (last["host_us"][name]["median"] - first["host_us"][name]["median"]) / extra

    # guards per tensor from the second point on (a lone tensor has no aliasing guard to share)
    second = data["sweep"][1]
    per_tensor_guards = (last["guards"] - second["guards"]) / (last["tensors"] - second["tensors"])
    return {
        "by_tensors": by_tensors,
        "guards_per_tensor": per_tensor_guards,
        "guards_fixed": second["guards"] - per_tensor_guards * second["tensors"],
        "ns_per_tensor": {name: per_tensor(name) * 1e3 for name in VARIANTS if name in last["host_us"]},
        "limit": _limit(data),
    }


def _limit(data: dict) -> dict:
    """Past the recompile limit: what a call costs against eager and against a cached shape."""
    timed = data["limit_host_us"]
    eager, cached, past = (timed[k]["rounds"] for k in ("eager", "cached_shape", "past_limit"))
    return {
        "past_minus_eager_us": _paired([p - e for p, e in zip(past, eager)], "us"),
        "past_minus_cached_us": _paired([p - c for p, c in zip(past, cached)], "us"),
        "cached_minus_eager_us": _paired([c - e for c, e in zip(cached, eager)], "us"),
    }


def compile_stages(results) -> dict:
    """compile_time's first calls split by stage (each backend stops one stage later; one cold
    compile per cell, so each stage is a difference of two single samples), and per-op costs."""
    data = results("m04/compile_time")
    rows = {}
    for p in data["points"]:
        s = {b: p["first_call_s"][b]["median"] for b in p["first_call_s"]}
        row = {"ops": p["ops"], "steps": p["steps"], "dynamo_s": s["eager"], "aot_s": s["aot_eager"] - s["eager"]}
        if "inductor" in s:
            row["inductor_s"] = s["inductor"] - s["aot_eager"]
            row["total_s"] = s["inductor"]
            row["inductor_share"] = row["inductor_s"] / s["inductor"]
            row["dynamo_share"] = s["eager"] / s["inductor"]
        rows[str(p["ops"])] = row
    small, large = data["points"][-2], data["points"][-1]  # the two largest graphs
    extra = large["ops"] - small["ops"]
    marginal = {
        name: (rows[str(large["ops"])][name] - rows[str(small["ops"])][name]) / extra * 1e3
        for name in ("dynamo_s", "aot_s", "inductor_s", "total_s")
        if name in rows[str(large["ops"])]
    }
    shares = [r["dynamo_share"] for r in rows.values() if "dynamo_share" in r]
    return {
        "by_ops": rows,
        "dynamo_share_min": min(shares, default=0.0),
        "dynamo_share_max": max(shares, default=0.0),
        "ms_per_op": marginal,  # between the two largest graphs
        "growth": {  # how much each stage grew from the second-largest graph to the largest
            "ops": large["ops"] / small["ops"],
            **{
                name: rows[str(large["ops"])][name] / rows[str(small["ops"])][name]
                for name in ("dynamo_s", "aot_s", "inductor_s")
                if name in rows[str(large["ops"])]
            },
        },
    }


def _wrapped(lines: list[str], width: int = 80) -> str:
    """Long output lines broken at spaces (a word longer than a line, such as the global state's
    settings, is split), continuations indented under their line, so that a code block shows them
    whole without scrolling."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        out.extend(
            textwrap.wrap(line, width, subsequent_indent=indent + "    ", break_long_words=True, break_on_hyphens=False)
            or [line]
        )
    return "\n".join(out)


def texts(results) -> dict:
    """The stored facts as text blocks for the page: the trace's wrong answer, TorchScript's
    errors, explain's breaks, the guard tree and the recompile-limit warning."""
    routes = results("m04/failed_routes")
    guards = results("m04/guards")
    t = routes["trace"]
    trace = [
        f"double_or_negate(-ones)          -> {t['eager_on_negative']}",
        f"traced(-ones), traced on ones    -> {t['traced_on_negative']}",
        "what the trace recorded:",
        *("    " + line for line in t["traced_code"].splitlines()),
        *(f"TracerWarning: {w}" for w in t["tracer_warnings"]),
    ]
    script = {}
    for name, err in routes["script_errors"].items():
        script[name] = _wrapped(f"torch.jit.script({name}) raised {err['type']}:\n{err['message']}".splitlines(), 80)
    e = guards["explain"]
    explain = [f"graphs: {e['graphs']}, graph breaks: {e['graph_breaks']}, ops (call_function nodes): {e['ops']}"]
    for i, b in enumerate(e["breaks"], 1):
        explain.append(f"break {i}: in {b['function']}, at  {b['line']}")
        explain.append(f"    reason: {b['reason']}")
        if b["explanation"]:
            explain.append(f"    {b['explanation']}")
    tree = guards["guard_text"]
    lim = guards["limit"]
    limit = [
        f"recompile_limit = {lim['recompile_limit']}, accumulated_recompile_limit = "
        f"{lim['accumulated_recompile_limit']}; sizes 2 to {lim['shapes'] + 1}, dynamic=False",
        f"graphs after each call:           {lim['graphs_after_call']}",
        f"frames handed to Dynamo so far:   {lim['frames_after_call']}",
        f"every answer right:               {lim['all_correct']}",
        "the warning (logger torch._dynamo.convert_frame):",
        *("    " + line for line in lim["warnings"][0].splitlines()),
    ]
    right = routes["dynamo_correct"]
    dynamo = (
        "equal for all three functions"
        if all(right.values())
        else "unequal for " + ", ".join(name for name, ok in right.items() if not ok)
    )
    f = guards["fail_on_recompile_limit_hit"]
    failure = f"with fail_on_recompile_limit_hit=True: call {f['call']} raised {f['type']}: {f['message']}"
    return {
        "trace": _wrapped(trace, 80),
        "guard_tree_short": _wrapped(_short_tree(tree), 80),
        "limit_short": _wrapped(limit[1:4] + [line.strip() for line in lim["warnings"][0].splitlines()[:3:2]], 80),
        "script_scale_by": script["scale_by"],
        "script_scale_or_keep": script["scale_or_keep"],
        "fx": _wrapped([f"torch.fx.proxy.TraceError: {routes['fx_symbolic_trace_error']}"], 80),
        "explain": _wrapped(explain, 80),
        "guard_tree": _wrapped(tree),
        "limit": _wrapped(limit + [failure]),
        "dynamo": dynamo,
        "script_keeps_branch": "right on both" if routes["script_keeps_the_branch"] else "wrong on one",
    }


def _short_tree(tree: list[str]) -> list[str]:
    """The guard tree cut to the lines the chapter reads: the global-state guard without its
    settings, the managers without their accessors, the leaf guards on k and x; the other global
    guards counted in one marker where the first of them stood, and the logged latency (one cold
    check) left out."""
    out, dropped, at = [], 0, None
    for line in tree:
        body = line.lstrip("| +-")
        if body.startswith(("LAMBDA_GUARD", "TORCH_FUNCTION_MODE_STACK")):
            dropped += 1
            at = len(out) if at is None else at  # the marker goes where the first dropped line was
        elif body.startswith("GLOBAL_STATE"):
            out.append(line.split(" against")[0] + " against {grad_mode, autocast, ...}")
        elif body.startswith("GuardManager"):
            out.append(line.split(", accessed_by")[0])
        elif not body.startswith("Guard eval latency"):
            out.append(line)
    if at is None:
        return out
    return out[:at] + [f"| +- ... ({dropped} more global guards)"] + out[at:]


def guard_cost(results) -> go.Figure:
    """Host time per call against the number of guarded tensors: eager, the guard check alone,
    the captured graph alone, the whole compiled call (and Inductor's). Every process is drawn:
    the line joins the median of the processes' medians, the whiskers span the lowest 10th to the
    highest 90th percentile over all of them, and the hover lists each process's median."""
    runs = [r("m04/guards") for r in _per_process(results, "m04/guards")]
    points = runs[0]["sweep"]
    x = [p["tensors"] for p in points]
    fig = go.Figure()
    for name, label in VARIANTS.items():
        if name not in points[0]["host_us"]:
            continue
        # per point: this variant's summary in every process
        each = [[run["sweep"][i]["host_us"][name] for run in runs] for i in range(len(points))]
        mids = [_middle([s["median"] for s in sums]) for sums in each]
        lows = [min(s["p10"] for s in sums) for sums in each]
        highs = [max(s["p90"] for s in sums) for sums in each]
        medians = [", ".join(f"{s['median']:.1f}" for s in sums) for sums in each]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=mids,
                mode="lines+markers",
                name=label,
                line={"dash": "dot"} if name == "guards_alone" else {},
                marker={"size": 11, "symbol": "diamond" if name == "guards_alone" else "circle"},
                error_y=error_bars(lows, mids, highs),
                customdata=[[p["guards"], m] for p, m in zip(points, medians)],
                hovertemplate="%{x} tensors, %{customdata[0]} guards: %{y:.2f} µs per call; each process's "
                "median: %{customdata[1]}<extra>" + label + "</extra>",
            )
        )
    fig.update_xaxes(
        type="log",
        title_text="guarded tensor inputs (a list of tensors, each 16 floats)",
        tickvals=x,
        ticktext=[f"{n:,}" for n in x],
    )
    ticks = [1, 3, 10, 30, 100, 300, 1000, 3000]
    fig.update_yaxes(
        type="log",
        title_text="host µs per call (median of processes; whiskers: p10–p90 of any process)",
        tickvals=ticks,
        ticktext=[f"{t:,}" for t in ticks],
    )
    fig.update_layout(
        legend=legend(-0.2),
        hovermode="closest",
        height=520,
        margin=margin(),
    )
    return fig


def call_breakdown(results) -> go.Figure:
    """Where a compiled call's host time goes (backend="eager"), stacked: the graph called
    directly, the guard check, and the rest (the remainder, round by round; it also carries the
    difference between the two stand-ins and what Dynamo runs); eager as a marker. Each part is
    the median over the processes of that part's median, as a share of the three parts' sum."""
    pinned = _per_process(results, "m04/guards")
    runs = [r("m04/guards") for r in pinned]
    rows = [calls(r)["by_tensors"] for r in pinned]
    points = runs[0]["sweep"]
    x = [f"{p['tensors']:,}" for p in points]

    def over_processes(value) -> list[tuple[float, str]]:
        """Per point: the median over processes of value(run, row, i), and each process's value."""
        out = []
        for i, p in enumerate(points):
            vals = [value(run, row[str(p["tensors"])], i) for run, row in zip(runs, rows)]
            out.append((_middle(vals), ", ".join(f"{v:.1f}" for v in vals)))
        return out

    def timed(name):
        return over_processes(lambda run, row, i: run["sweep"][i]["host_us"][name]["median"])

    layers = (
        ("the captured graph, called directly", timed("graph_alone")),
        ("the guard check", timed("guards_alone")),
        (
            "the rest: wrapper, frame hook, cache lookup, modified bytecode, disable wrapper",
            over_processes(lambda run, row, i: row["rest_us"]["median"]),
        ),
    )
    # the parts' medians over processes do not add to the call's median: scale them to add to 100%
    totals = [sum(values[i][0] for _, values in layers) for i in range(len(points))]
    fig = go.Figure()
    for name, values in layers:
        fig.add_trace(
            go.Bar(
                x=x,
                y=[v / t for (v, _), t in zip(values, totals)],
                name=name,
                customdata=[[v, p["guards"], each] for (v, each), p in zip(values, points)],
                hovertemplate="%{x} tensors, %{customdata[1]} guards: %{customdata[0]:.2f} µs, %{y:.0%} of the "
                "compiled call (each process: %{customdata[2]} µs)<extra>" + name + "</extra>",
            )
        )
    eager = timed("eager")
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[m / t for (m, _), t in zip(eager, totals)],
            mode="markers",
            name="eager, for scale",
            marker={"symbol": "line-ew-open", "size": 40, "line": {"width": 3}},
            customdata=[[m, each] for m, each in eager],
            hovertemplate="%{x} tensors: eager %{customdata[0]:.2f} µs (each process: %{customdata[1]} µs)"
            "<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", title_text="guarded tensor inputs (hover for the number of guards)")
    fig.update_yaxes(
        title_text="share of a compiled call's host time (medians over the processes, scaled to add to one)",
        tickformat=".0%",
        range=[0, 1.05],
    )
    fig.update_layout(
        barmode="stack",
        legend=legend(-0.2),
        hovermode="closest",
        height=500,
        margin=margin(),
    )
    return fig


def compile_time(results) -> go.Figure:
    """First-call time against the ops in the graph, one line per backend: each stops one stage
    later, so the gap between two lines is the stage the second adds (one cold compile a point)."""
    data = results("m04/compile_time")
    ops = [p["ops"] for p in data["points"]]
    stages = compile_stages(results)["by_ops"]
    fig = go.Figure()
    for backend, name in STAGES.items():
        if backend not in data["points"][0]["first_call_s"]:
            continue
        fig.add_trace(
            go.Scatter(
                x=ops,
                y=[p["first_call_s"][backend]["median"] for p in data["points"]],
                mode="lines+markers",
                name=f'backend="{backend}": {name}',
                marker={"size": 9},
                customdata=[[p["steps"], stages[str(p["ops"])]["dynamo_s"]] for p in data["points"]],
                hovertemplate="%{x} ops (%{customdata[0]} steps): %{y:.2f} s; Dynamo's stage "
                "%{customdata[1]:.2f} s<extra>" + backend + "</extra>",
            )
        )
    fig.update_xaxes(type="log", title_text="operations Dynamo captured (a matmul, a tanh and an add per step)")
    ticks = [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30]
    seconds = [y for trace in fig.data for y in trace.y]
    # the axis runs from the tick below the lowest point to the tick above the highest, so the
    # highest point sits below a labelled tick, never above the last one shown
    low = max([t for t in ticks if t <= min(seconds)], default=ticks[0])
    high = min([t for t in ticks if t >= max(seconds)], default=ticks[-1])
    fig.update_yaxes(
        type="log",
        title_text="first call, seconds, cold caches (one compile each)",
        tickvals=ticks,
        ticktext=[f"{t:g}" for t in ticks],
        range=[math.log10(low), math.log10(high)],
    )
    fig.update_layout(
        legend=legend(-0.2),
        hovermode="closest",
        height=480,
        margin=margin(),
    )
    return fig


def runs(results) -> dict:
    """The cost of a cache hit in the build's two forced runs, side by side (``first``, ``second``,
    as coursekit.plotting.RUNS names them): per run, what torch.compile(backend="eager") adds to the
    uncompiled call at one tensor and at a thousand, and the guard check alone, each a summary
    taken round by round over that run's processes."""
    out = {}
    for name, hardware in RUNS.items():

        def pinned(key, hardware_=None, process=None, hardware=hardware):
            return results(key, hardware=hardware_ or hardware, process=process)

        c = calls(pinned)["by_tensors"]
        out[name] = {
            "hit_us": c["1"]["dynamo_minus_eager_us"],
            "hit_1000_us": c["1000"]["dynamo_minus_eager_us"],
            "ns_per_guard_1000": c["1000"]["ns_per_guard"],
        }
    return out


def compile_runs(results) -> dict:
    """Inductor's stage in each of the build's two forced runs: how many times it grew from the
    second-largest graph to the largest (``growth``, against ``ops_growth``) and its cost per added
    operation, each from single cold compiles."""
    out = {}
    for name, hardware in RUNS.items():

        def pinned(key, hardware_=None, process=None, hardware=hardware):
            return results(key, hardware=hardware_ or hardware, process=process)

        stages = compile_stages(pinned)
        largest = pinned("m04/compile_time")["points"][-1]
        out[name] = {
            "largest_first_call_s": largest["first_call_s"]["inductor"]["median"],
            "growth": stages["growth"]["inductor_s"],
            "ops_growth": stages["growth"]["ops"],
            "ms_per_op": stages["ms_per_op"]["inductor_s"],
            "total_ms_per_op": stages["ms_per_op"]["total_s"],
        }
    return out


def _per_run(results, compute) -> dict:
    """``compute(results)`` on each of the build's two forced runs, by name (``first``, ``second``)."""
    out = {}
    for name, hardware in RUNS.items():

        def pinned(key, hardware_=None, process=None, hardware=hardware):
            return results(key, hardware=hardware_ or hardware, process=process)

        out[name] = compute(pinned)
    return out


def guard_line(results) -> dict:
    """Exercise 1's prediction, per run (``first``, ``second``): the straight line through the
    sweep's medians at 1 and 100 tensors, extended to the largest count (1,000), for the guard
    check alone and for eager's call, beside the medians measured there. Computed on each process's
    data, so ``| range`` spans the processes."""

    def line(pinned) -> dict:
        sweep = {p["tensors"]: p for p in pinned("m04/guards")["sweep"]}
        small, middle, large = sweep[1], sweep[100], sweep[max(sweep)]
        out = {"tensors": large["tensors"]}
        for variant in ("guards_alone", "eager"):
            a, b = (p["host_us"][variant]["median"] for p in (small, middle))
            slope = (b - a) / (middle["tensors"] - small["tensors"])
            out[f"{variant}_us"] = a + slope * (large["tensors"] - small["tensors"])
            out[f"{variant}_measured_us"] = large["host_us"][variant]["median"]
            out[f"{variant}_measured_over_line"] = out[f"{variant}_measured_us"] / out[f"{variant}_us"]
        return out

    return _per_run(results, line)


def bigger_chain(results) -> dict:
    """Exercise 4's prediction, per run (``first``, ``second``): the first call of a chain of 1,024
    steps, from the straight line through the two largest graphs' first calls (default backend),
    extended; and the operations that graph has and adds (single cold compiles)."""

    def predict(pinned) -> dict:
        points = pinned("m04/compile_time")["points"]
        before, last = points[-2], points[-1]
        ops = 1024 * last["ops"] // last["steps"]  # the same operations per step as every graph measured
        total = {p["ops"]: p["first_call_s"]["inductor"]["median"] for p in (before, last)}
        per_op = (total[last["ops"]] - total[before["ops"]]) / (last["ops"] - before["ops"])
        return {
            "ops": ops,
            "extra_ops": ops - last["ops"],
            "first_call_s": total[last["ops"]] + per_op * (ops - last["ops"]),
        }

    return _per_run(results, predict)
