"""Dynamo's route, seen from outside: torch._dynamo.explain on a function with a print and a branch
on the data (graphs, breaks and why); the guards of one compiled function, as the logging API
prints them (TORCH_LOGS=guards); the recompile limit and what happens past it (new shapes run
eagerly, with a warning; or a hard error with fail_on_recompile_limit_hit); and what the guards
cost per call as the number of guarded tensors grows, against eager, against the captured graph
run alone, and against the guard check alone, timed interleaved."""

# --8<-- [start:imports]
import contextlib
import logging
import re
import types

import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # host-bound: per-call overheads, repeated in fresh processes for run-to-run spread
TENSORS = [1, 10, 100, 1000]  # guarded tensor inputs in the sweep


# --8<-- [start:captured]
def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)


@contextlib.contextmanager
def captured(logger: str, **artifacts):
    """The messages of one of torch's loggers inside the block, kept instead of printed;
    artifacts switch on TORCH_LOGS-style output (guards=True is TORCH_LOGS=guards)."""
    kept = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: kept.append(short_paths(record.getMessage()))
    torch._logging.set_logs(**artifacts)
    log = logging.getLogger(logger)
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False  # to torch's handlers, which print it
    try:
        yield kept
    finally:
        log.removeHandler(handler)
        log.propagate = propagate
        torch._logging.set_logs()


GUARDS_LOG = "torch._dynamo.guards.__guards"  # the "guards" artifact of torch._dynamo.guards
WARNINGS_LOG = "torch._dynamo.convert_frame"  # where the recompile-limit warning comes from
# --8<-- [end:captured]


# --8<-- [start:explain]
# --8<-- [start:noisy_branch]
def noisy_branch(x):
    y = x * 2
    print("  (from noisy_branch) y's norm:", y.norm())  # I/O: a graph break
    if y.sum() > 0:  # a branch on the data: another
        return y + 1
    return y - 1


# --8<-- [end:noisy_branch]
def explain_breaks(x) -> dict:
    """How many graphs Dynamo captures from noisy_branch, and why it broke where it did."""
    report = torch._dynamo.explain(noisy_branch)(x)
    breaks = []
    for b in report.break_reasons:
        where = b.user_stack[-1]  # the user's line; after the first break, in a resume function
        said = [line.strip() for line in b.reason.splitlines()]
        explained = [line for line in said if line.startswith("Explanation:")]
        breaks.append(
            {
                "reason": said[0],
                "explanation": (explained or [""])[0],
                "line": where.line.split("  #")[0],
                "function": where.name,
            }
        )
    return {
        "graphs": report.graph_count,
        "graph_breaks": report.graph_break_count,
        "ops": report.op_count,
        "breaks": breaks,
    }


# --8<-- [end:explain]


# --8<-- [start:guards]
def affine(x, k):
    return x * k + 1


def guard_text(x, k) -> list[str]:
    """The guard tree Dynamo builds for affine(x, k), as TORCH_LOGS=guards prints it (source comments cut)."""
    torch._dynamo.reset()
    with captured(GUARDS_LOG, guards=True) as said:
        torch.compile(affine, backend="eager")(x, k)
    tree = next(m for m in said if "TREE_GUARD_MANAGER" in m)
    return [re.sub(r"\s+# .*$", "", line) for line in tree.strip().splitlines()] + [
        m for m in said if m.startswith("Guard eval latency")
    ]


# --8<-- [end:guards]


# --8<-- [start:limit]
# --8<-- [start:limit_main]
def double_plus_one(x):
    return x * 2 + 1


def past_the_limit(dev: str = "cpu") -> tuple[dict, object]:
    """Call a dynamic=False compile with recompile_limit + 2 distinct shapes: after each call, how many
    graphs exist and how many frames Dynamo was asked to compile; are the answers still right?"""
    limit = torch._dynamo.config.recompile_limit  # cache_size_limit before; in 2.11 an alias of it
    torch._dynamo.reset()
    counters.clear()
    run = torch.compile(double_plus_one, backend="eager", dynamic=False)  # a new shape: a new graph
    graphs, frames, right = [], [], []
    with captured(WARNINGS_LOG) as warned:
        for size in range(2, limit + 4):
            x = torch.randn(size, device=dev)
            right.append(torch.equal(run(x), double_plus_one(x)))
            graphs.append(counters["stats"]["unique_graphs"])
            frames.append(counters["frames"]["total"])  # frames handed to Dynamo to compile
    facts = {
        "recompile_limit": limit,
        "accumulated_recompile_limit": torch._dynamo.config.accumulated_recompile_limit,
        "shapes": len(right),
        "graphs_after_call": graphs,
        "frames_after_call": frames,
        "all_correct": all(right),
        "warnings": warned,
    }
    return facts, run


# --8<-- [end:limit_main]
def hard_failure(dev: str = "cpu") -> dict:
    """The same calls with fail_on_recompile_limit_hit=True: at which call, and what is raised."""
    torch._dynamo.reset()
    run = torch.compile(double_plus_one, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True), captured(WARNINGS_LOG):
        for call, size in enumerate(range(2, torch._dynamo.config.recompile_limit + 4), start=1):
            try:
                run(torch.randn(size, device=dev))
            except torch._dynamo.exc.FailOnRecompileLimitHit as exc:
                return {"call": call, "type": type(exc).__name__, "message": str(exc)}
    return {"call": None, "type": None, "message": "no error"}


def graphs_with_automatic_dynamic(dev: str = "cpu", shapes: int = 10) -> int:
    """The default (dynamic=None): the second shape recompiles with a symbolic size, then it is reused."""
    torch._dynamo.reset()
    counters.clear()
    run = torch.compile(double_plus_one, backend="eager")
    for size in range(2, shapes + 2):
        run(torch.randn(size, device=dev))
    return counters["stats"]["unique_graphs"]


# --8<-- [end:limit]


# --8<-- [start:sweep]
# --8<-- [start:sweep_helpers]
def bump_all(xs):
    torch._foreach_add_(xs, 1.0)  # one op over every tensor: the work stays trivial however many


def own_copy(fn):
    """fn with its own code object: Dynamo keeps compiled code, and its guards, per code object."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


def count_guards(manager) -> int:
    return len(manager.get_leaf_guards()) + sum(count_guards(m) for m in manager.get_child_managers())


# --8<-- [end:sweep_helpers]
# --8<-- [start:sweep_main]
def sweep_variants(n: int, dev: str, inductor: bool) -> tuple[dict, dict]:
    """What is timed for n guarded tensors (call under torch.no_grad, as they were compiled)."""
    torch._dynamo.reset()
    xs = [torch.randn(16, device=dev) for _ in range(n)]
    captured_graphs = []

    def keep_graph(gm, example_inputs):  # a backend: run Dynamo's FX graph as it is, and keep it
        captured_graphs.append(gm.forward)
        return gm.forward

    fn = own_copy(bump_all)
    dynamo = torch.compile(fn, backend=keep_graph, dynamic=False)
    with torch.no_grad(), captured(GUARDS_LOG, guards=True) as said:
        dynamo(xs)
    (entry,) = _debug_get_cache_entry_list(fn)  # the one compiled version of fn: its guards, and its code
    check, frame_locals = entry.guard_manager.root.check, {"xs": xs}  # what Dynamo checks before each call
    graph = captured_graphs[0]
    variants = {
        "eager": lambda: bump_all(xs),
        # the lazy forward the backend returned (Dynamo installs the
        # disable-wrapped generated forward instead)
        "graph_alone": lambda: graph(*xs),
        "guards_alone": lambda: check(frame_locals),
        "dynamo_eager": lambda: dynamo(xs),  # guards + Dynamo's bytecode + the graph
    }
    if inductor:
        compiled = torch.compile(own_copy(bump_all), dynamic=False)
        with torch.no_grad():
            compiled(xs)
        variants["inductor"] = lambda: compiled(xs)
    with torch.no_grad():
        assert check(frame_locals), "the guards should pass on the inputs they were built for"
    logged = re.search(r"Guard eval latency = ([\d.]+) us", "\n".join(said))
    facts = {
        "guards": count_guards(entry.guard_manager.root),
        "logged_latency_us": float(logged[1]) if logged else None,
    }
    return variants, facts


# --8<-- [end:sweep_main]
# --8<-- [end:sweep]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    repeats = 3 if small else 20
    tensors = TENSORS[:2] if small else TENSORS
    explained = explain_breaks(torch.randn(8, device=dev))
    tree = guard_text(torch.randn(4, 3, device=dev), 2)
    limit, past = past_the_limit(dev)
    failure = hard_failure(dev)
    automatic = graphs_with_automatic_dynamic(dev)
    # What a call costs past the limit: the cached shapes' guards fail, one by one, then the frame runs
    # eagerly (it is no longer handed to Dynamo). Against eager, and against a shape with a graph.
    cached, new = torch.randn(2, device=dev), torch.randn(limit["shapes"] + 10, device=dev)
    limit_us = host_us_each(
        {
            "eager": (lambda: double_plus_one(new), contextlib.nullcontext),
            "cached_shape": (lambda: past(cached), contextlib.nullcontext),  # grad mode as compiled
            "past_limit": (lambda: past(new), contextlib.nullcontext),  # limit + 10 elements: no graph has it
        },
        calls=10 if small else 500,
        repeats=repeats,
        warmup=5,
    )
    points = []
    for n in tensors:
        variants, facts = sweep_variants(n, dev, inductor=cuda)  # no Inductor on a CPU: its first compile is slow
        calls = max(5, 100 // n) if small else max(50, 1000 // n)
        timed = host_us_each({k: (f, torch.no_grad) for k, f in variants.items()}, calls, repeats, warmup=5)
        points.append({"tensors": n, "calls_per_repetition": calls, **facts, "host_us": timed})
    torch._dynamo.reset()
    return {
        "device": dev,
        "repetitions": repeats,
        "explain": explained,
        "guard_text": tree,
        "limit": limit,
        "fail_on_recompile_limit_hit": failure,
        "graphs_with_automatic_dynamic": automatic,
        "limit_host_us": limit_us,
        "sweep": points,
        "notes": [] if cuda else ["no Inductor variant on a CPU: a cold Inductor CPU cache probes ISAs for ~16 s"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    e = r["explain"]
    print(f"explain(noisy_branch): {e['graphs']} graphs, {e['graph_breaks']} breaks, {e['ops']} ops")
    for b in e["breaks"]:
        print(f"  at {b['line']!r} in {b['function']}: {b['reason']}")
    print("guards of affine(x, k) with k=2 (TORCH_LOGS=guards):")
    for line in r["guard_text"]:
        print("  " + (line if len(line) < 150 else line[:147] + "..."))
    lim = r["limit"]
    print(f"recompile_limit {lim['recompile_limit']}, {lim['shapes']} shapes with dynamic=False:")
    print(f"  graphs after each call {lim['graphs_after_call']}, frames {lim['frames_after_call']}")
    print(f"  all answers right: {lim['all_correct']}; warned: {(lim['warnings'] or [''])[0].splitlines()[0]}")
    f = r["fail_on_recompile_limit_hit"]
    print(f"  with fail_on_recompile_limit_hit: call {f['call']} raises {f['type']}: {f['message']}")
    print(f"  the default (automatic dynamic) compiles {r['graphs_with_automatic_dynamic']} graphs for 10 shapes")
    print(f"host us per call on {device_name()}:")
    for name, s in r["limit_host_us"].items():
        print(f"  {name:<14} {s['median']:9.2f}")
    names = list(r["sweep"][0]["host_us"])
    print(f"  {'tensors':>8} {'guards':>7} " + " ".join(f"{n:>13}" for n in names))
    for p in r["sweep"]:
        row = " ".join(f"{p['host_us'][n]['median']:13.2f}" for n in names)
        print(f"  {p['tensors']:>8} {p['guards']:>7} {row}")
    for note in r["notes"]:
        print("note:", note)
