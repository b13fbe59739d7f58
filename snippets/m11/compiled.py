"""What torch.compile does with each way to run the experts (_moe.py: "loop", "padded_bmm",
"grouped_torch", "triton_grouped"), at the "mixtral" shape (8 experts, top-2) and the "qwen3" shape
(128 experts, top-8), 4,096 tokens, bf16, with three routings of the random router (three seeds: the
same layer, different tokens, so different counts per expert):

- explain: torch._dynamo.explain on the first routing: graphs, graph breaks, each break's reason as
  Dynamo words it (its first line and its "Explanation:" line) and the line it broke at; the seconds
  the capture took (one sample, host clock);
- fullgraph: torch.compile(route, fullgraph=True, backend="eager") on the first routing: "ok", or the
  error's type and message verbatim (file paths cut to the file's name); for the loop also with
  torch._dynamo.config.capture_scalar_outputs=True, where .tolist() gives unbacked symbols, not a break;
- recompiles: torch.compile(route, backend="eager") (Dynamo alone: its decisions without an Inductor
  compile each) called on the three routings in turn: Dynamo's graphs and frames after each call
  (torch._dynamo.utils.counters) and every recompile's reason (TORCH_LOGS=recompiles) verbatim;
- helps: torch.compile(route) (Inductor, default mode) compiled on the first routing (first-call
  seconds), then eager and compiled timed in the same interleaved rounds on the device clock
  (gpu_us_each), with the largest difference between their outputs.

Not everything runs everywhere. The loop at 128 experts is explained only (one capture, its seconds
stored): Dynamo unrolls the Python loop, 128 experts of slicing and GEMMs, specialised on the counts,
and a recapture for each new routing would cost as much again or more (with the counts as symbols);
its recompiles and its Inductor compile are measured at 8 experts. Inductor compiles run where the
question is open: the loop at 8 experts, the other three routes at 128.

On the CPU: the small "mixtral" shape (_moe.SMALL_SHAPES) only, two routings, bf16 (torch._grouped_mm's
fake-tensor rule accepts bf16 only, though its CPU kernel takes float16 too), no Triton route (there
Dynamo meets the interpreter's Python, not a compiled kernel, and fails after tracing it for half a
minute), and one route compiled and timed, with backend "aot_eager" in place of Inductor (a C++ compile
per graph would not fit the CPU budget)."""

# --8<-- [start:imports]
import contextlib
import logging
import re
import time

import torch
from torch._dynamo.utils import counters

# --8<-- [end:imports]
# isort: split
from _moe import (
    SHAPES,
    SMALL_SHAPES,
    SMALL_TOKENS,
    capacity_for,
    experts_grouped,
    experts_grouped_triton,
    experts_loop,
    experts_padded,
    make_layer,
    route,
    timed,
)

from coursekit.bench import device_name, summarize

PROCESSES = 1  # compiles are one-off events; the eager/compiled times are device-side, paired per round
TOKENS = 4096
ROUTES = {
    "loop": experts_loop,
    "padded_bmm": experts_padded,
    "grouped_torch": experts_grouped,
    "triton_grouped": experts_grouped_triton,
}
CAPTURED_ONLY = {("qwen3", "loop")}  # explain and fullgraph only (see the docstring)
# On the CPU: one shape, no Triton route (Dynamo would trace the interpreter's Python for half a minute),
# two routings, and one route compiled and timed: the CPU budget.
SMALL_ROUTES = {"mixtral": ["loop", "padded_bmm", "grouped_torch"]}
SMALL_INDUCTOR = {("mixtral", "grouped_torch")}
INDUCTOR = {("mixtral", "loop"), ("qwen3", "padded_bmm"), ("qwen3", "grouped_torch"), ("qwen3", "triton_grouped")}
RECOMPILES_LOG = "torch._dynamo.guards.__recompiles"  # the "recompiles" artifact of torch._dynamo.guards


def short(text: str, lines: int = 8) -> str:
    """A message as torch printed it, file paths cut to the file's name, at most `lines` lines."""
    text = re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)
    return "\n".join(text.strip().splitlines()[:lines])


@contextlib.contextmanager
def recompile_reasons():
    """The recompiles log's messages inside the block (TORCH_LOGS=recompiles), kept, not printed."""
    kept = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: kept.append(short(record.getMessage()))
    torch._logging.set_logs(recompiles=True)
    log = logging.getLogger(RECOMPILES_LOG)
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    try:
        yield kept
    finally:
        log.removeHandler(handler)
        log.propagate = propagate
        torch._logging.set_logs()


# --8<-- [start:explain]
def explain(fn, args) -> dict:
    """Dynamo's capture of fn(*args): graphs, breaks, and why it broke where it did."""
    torch._dynamo.reset()
    start = time.perf_counter()
    report = torch._dynamo.explain(fn)(*args)
    seconds = time.perf_counter() - start
    breaks = []
    for b in report.break_reasons:
        said = [line.strip() for line in b.reason.splitlines() if line.strip()]
        breaks.append(
            {
                "reason": said[0],
                "explanation": next((line for line in said if line.startswith("Explanation:")), ""),
                "line": b.user_stack[-1].line.split("  #")[0] if b.user_stack else "",
            }
        )
    return {
        "graphs": report.graph_count,
        "graph_breaks": report.graph_break_count,
        "ops": report.op_count,
        "breaks": breaks,
        "seconds": seconds,
    }


def fullgraph(fn, args, capture_scalar_outputs: bool = False) -> dict:
    """One graph or an error: torch.compile(fullgraph=True) refuses any graph break. With
    capture_scalar_outputs, .tolist() and .item() give symbols (unbacked) instead of a break."""
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(capture_scalar_outputs=capture_scalar_outputs):
            torch.compile(fn, fullgraph=True, backend="eager")(*args)
    except Exception as exc:
        return {"ok": False, "error_type": type(exc).__name__, "error": short(str(exc))}
    return {"ok": True, "error_type": None, "error": None}


def recompiles(fn, routings: list) -> dict:
    """Dynamo alone on each routing in turn: graphs and frames so far after each call, and why it
    compiled again."""
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, backend="eager")
    graphs, frames = [], []
    with recompile_reasons() as reasons:
        for args in routings:
            compiled(*args)
            graphs.append(counters["stats"]["unique_graphs"])
            frames.append(counters["frames"]["total"])  # frames handed to Dynamo to compile
    return {"graphs_after_call": graphs, "frames_after_call": frames, "reasons": reasons}


# --8<-- [end:explain]


def helps(name: str, fn, args, backend: str) -> dict:
    """Compiled (backend) against eager on one routing: first-call seconds, device times, difference.
    A route the backend cannot compile here keeps the error, and its eager time alone."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    calls = {f"{name}_eager": lambda: fn(*args)}
    try:
        start = time.perf_counter()
        out = compiled(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        calls[f"{name}_compiled"] = lambda: compiled(*args)
    except Exception as exc:  # say so, go on
        failed = {"compiled": False, "error_type": type(exc).__name__, "error": short(str(exc))}
        return failed | {"eager_us": timed(calls)[f"{name}_eager"]}
    diff = (out.float() - fn(*args).float()).abs().max().item()
    times = timed(calls)
    eager, fast = times[f"{name}_eager"], times[f"{name}_compiled"]
    return {
        "compiled": True,
        "backend": backend,
        "first_call_s": seconds,
        "eager_us": eager,
        "compiled_us": fast,
        "speedup": summarize([e / c for e, c in zip(eager["rounds"], fast["rounds"])], "x"),  # above 1: compile helps
        "max_abs_diff": diff,
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda" if cuda else "cpu"), torch.bfloat16
    shapes, tokens = ({n: SMALL_SHAPES[n] for n in SMALL_ROUTES}, SMALL_TOKENS) if small else (SHAPES, TOKENS)
    backend = "inductor" if cuda else "aot_eager"
    results, routings_seen = [], []
    for shape_name, shape in shapes.items():
        layer = make_layer(shape, dev, dtype)
        capacity = capacity_for(tokens, shape, 1.25)
        routings = []
        for seed in (10, 11) if small else (10, 11, 12):
            torch.manual_seed(seed)
            x = torch.randn(tokens, shape["hidden"], device=dev, dtype=dtype)
            ids, weights = route(x, layer["gate"], shape["top_k"])
            routings.append((x, ids, weights, layer["w13"], layer["w2"]))
        counts = [torch.bincount(r[1].flatten(), minlength=shape["experts"]) for r in routings]
        for route_name in SMALL_ROUTES[shape_name] if small else ROUTES:
            fn = ROUTES[route_name]
            args_of = [r + ((capacity,) if route_name == "padded_bmm" else ()) for r in routings]
            fn(*args_of[0])  # eager first: the Triton kernel tunes outside any capture
            entry = {"shape": shape_name, "route": route_name, "experts": shape["experts"]}
            try:
                entry["explain"] = explain(fn, args_of[0])
            except Exception as exc:  # Dynamo could not even capture it here: keep the message
                entry["explain"] = {"error_type": type(exc).__name__, "error": short(str(exc))}
            entry["fullgraph"] = fullgraph(fn, args_of[0])
            if route_name == "loop":  # its break is a .tolist(): what if Dynamo keeps the counts as symbols?
                entry["fullgraph_capture_scalar_outputs"] = fullgraph(fn, args_of[0], capture_scalar_outputs=True)
            if (shape_name, route_name) not in CAPTURED_ONLY:
                try:
                    entry["recompiles"] = recompiles(fn, args_of)
                except Exception as exc:
                    entry["recompiles"] = {"error_type": type(exc).__name__, "error": short(str(exc))}
            if (shape_name, route_name) in (SMALL_INDUCTOR if small else INDUCTOR):
                entry["helps"] = helps(route_name, fn, args_of[0], backend)
            results.append(entry)
            torch._dynamo.reset()
        routings_seen.append(
            {
                "shape": shape_name,
                "max_tokens_per_expert": [int(c.max()) for c in counts],
                "min_tokens_per_expert": [int(c.min()) for c in counts],
                "experts_changed_1_to_2": int((counts[0] != counts[1]).sum()),
                "tokens_per_expert": [c.tolist() for c in counts],
            }
        )
    timings = [r["helps"][k] for r in results if "helps" in r for k in ("eager_us", "compiled_us") if k in r["helps"]]
    return {
        "repetitions": min(t["n"] for t in timings),
        "device": dev,
        "dtype": "bfloat16",
        "tokens": tokens,
        "backend": backend,
        "recompile_limit": torch._dynamo.config.recompile_limit,
        "shapes": shapes,
        "routes": results,
        "routings": routings_seen,  # what differs between the routings: tokens per expert
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.compile on the MoE routes, {r['tokens']} tokens, on {device_name()} (backend {r['backend']})")
    for e in r["routes"]:
        ex, fg = e["explain"], e["fullgraph"]
        line = f"  {e['shape']:>8} {e['route']:>14}: "
        line += (
            f"{ex['graphs']} graphs, {ex['graph_breaks']} breaks" if "graphs" in ex else f"explain: {ex['error_type']}"
        )
        line += ", fullgraph ok" if fg["ok"] else f", fullgraph: {fg['error_type']}"
        if "graphs_after_call" in e.get("recompiles", {}):
            line += f", graphs after each routing {e['recompiles']['graphs_after_call']}"
        if e.get("helps", {}).get("compiled"):
            h = e["helps"]
            line += f", compiled {h['speedup']['median']:.2f}x eager (first call {h['first_call_s']:.1f} s)"
        elif "helps" in e:
            line += f", compile failed: {e['helps']['error_type']}"
        print(line)
        for b in ex.get("breaks", []):
            print(f"      break at `{b['line']}`: {b['reason']}")
