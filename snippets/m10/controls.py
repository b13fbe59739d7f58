"""The controls of dynamic shapes, each run over one fixed sequence of batch sizes (8, 16, 32, 1, 64, 2):
the default (dynamic=None: specialise, then automatic dynamic), dynamic=False, dynamic=True,
torch._dynamo.mark_dynamic and maybe_mark_dynamic on the batch dimension of every input, and
torch._dynamo.decorators.mark_unbacked (the way out of 0/1 specialisation that Dynamo's own recompile
message suggests). For each: the graphs compiled (torch._dynamo.utils.counters), at which sizes, and x's
size in each graph (TORCH_LOGS=graph_code: s77 is a symbol). Then what each marking does when the model
itself fixes the marked dimension (mark_dynamic raises; its ConstraintViolationError stored verbatim), and
duck sizing (two dimensions of equal size at compile time share one symbol).

Then the recompile limit: its config key and value (torch._dynamo.config.recompile_limit), a decode-style
function taking its position as a Python int, compiled with dynamic=False so that every position is a new
graph, called at recompile_limit + 2 positions: graphs after each call, the warning Dynamo logs at the
limit, and the host time per call (device drained at both ends, coursekit.bench.host_us_each, interleaved
rounds) at a position it compiled, at one past the limit (cached graphs' guards fail, then eager), and in
eager mode. The same position as an int attribute of an nn.Module under the default config is specialised
too (torch._dynamo.config.allow_unspec_int_on_nn_module is False). Past the limit,
fail_on_recompile_limit_hit=True and fullgraph=True raise instead; both errors are stored.

The table and the module count use backend="eager": the counts are Dynamo's decisions, made before a
backend runs. The timed function is compiled by Inductor on a GPU, by aot_eager on a CPU (small)."""

# --8<-- [start:imports]
import contextlib
import logging
import re

import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # the per-call host times around the limit: three fresh processes give the run-to-run spread
SIZES = [8, 16, 32, 1, 64, 2]
D = 64


# --8<-- [start:captured]
def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name; terminal colours (on a terminal) removed."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", re.sub(r"\x1b\[[0-9;]*m", "", text))


@contextlib.contextmanager
def captured(logger: str, *quiet: str, **artifacts):
    """The messages of one of torch's loggers inside the block, kept instead of printed; the loggers
    named in quiet are silenced."""
    kept = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: kept.append(short_paths(record.getMessage()))
    torch._logging.set_logs(**artifacts)
    saved = []
    for name in (logger, *quiet):
        log = logging.getLogger(name)
        saved.append((log, log.handlers[:], log.propagate))
        log.handlers, log.propagate = [handler if name == logger else logging.NullHandler()], False
    try:
        yield kept
    finally:
        for log, handlers, propagate in saved:
            log.handlers, log.propagate = handlers, propagate
        torch._logging.set_logs()


GRAPH_CODE_LOG = "torch._dynamo.output_graph.__graph_code"  # TORCH_LOGS=graph_code
WARNINGS_LOG = "torch._dynamo.convert_frame"  # where the recompile-limit warning comes from
GUARD_ERRORS_LOG = "torch._guards"  # logs a guard that failed to build (ConstraintViolationError) before raising it
# --8<-- [end:captured]


# --8<-- [start:table]
def block(x):
    return x + F.gelu(F.layer_norm(x, x.shape[-1:]))


MARKS = {
    "mark_dynamic": torch._dynamo.mark_dynamic,  # this dim is dynamic; an error if it gets specialised
    "maybe_mark_dynamic": torch._dynamo.maybe_mark_dynamic,  # a hint: dynamic unless something specialises it
    "mark_unbacked": torch._dynamo.decorators.mark_unbacked,  # dynamic, never taken to be 0 or 1
}
CONTROLS = {
    "default": ({}, None),  # dynamic=None
    "dynamic_false": ({"dynamic": False}, None),
    "dynamic_true": ({"dynamic": True}, None),
    **{name: ({}, mark) for name, mark in MARKS.items()},
}


def graphs_over(fn, sizes: list[int], options: dict, mark=None) -> dict:
    """fn compiled with options (backend eager) and called at each batch size, the input marked first if asked:
    the graphs compiled, at which sizes, and x's size in each graph. An error is kept, not raised."""
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, backend="eager", **options)
    compiled_at, error = [], None
    with captured(GRAPH_CODE_LOG, GUARD_ERRORS_LOG, graph_code=True) as said:
        for size in sizes:
            x = torch.randn(size, D)
            if mark is not None:
                mark(x, 0)  # marks this tensor object: every new input must be marked again
            graphs = counters["stats"]["unique_graphs"]
            try:
                compiled(x)
            except Exception as exc:  # noqa: BLE001 - the error is the result
                error = {"size": size, "type": type(exc).__name__, "message": short_paths(str(exc))}
                break
            if counters["stats"]["unique_graphs"] > graphs:
                compiled_at.append(size)
    return {
        "graphs": counters["stats"]["unique_graphs"],
        "compiled_at": compiled_at,
        "x_in_graph": [m for text in said for m in re.findall(r'L_x_: "([^"]+)"', text)],
        "error": error,
    }


# --8<-- [end:table]


# --8<-- [start:specialised]
POSITIONS = torch.randn(8, D)  # a learned table of 8 positions: the model only works at 8 rows


def add_positions(x):
    return x + POSITIONS  # broadcasting fixes x.size(0) == 8: the dimension is specialised


def duck_sizing() -> dict:
    """dynamic=True on x @ w, w a 64 x 64 parameter: x's rows get a symbol of their own only if there are not 64
    of them when it compiles; at 64 they share the symbol of x's columns, which w fixes at 64: a static graph."""
    w = nn.Parameter(torch.randn(D, D))  # parameters keep static shapes (force_parameter_static_shapes)
    seen = {}
    for rows in (32, D):
        seen[f"rows_{rows}"] = graphs_over(lambda x: x @ w, [rows], {"dynamic": True})["x_in_graph"]
    return {"use_duck_shape": torch.fx.experimental._config.use_duck_shape, **seen}


# --8<-- [end:specialised]


# --8<-- [start:limit]
def rotate(x, pos: int):  # a decode step's rotation: pos is the position, a Python int
    angle = pos * torch.linspace(0.01, 1.0, x.shape[-1], device=x.device)
    return x * torch.cos(angle) + torch.flip(x, (-1,)) * torch.sin(angle)


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = 0  # set by the decode loop before each step

    def forward(self, x):
        return rotate(x, self.pos)


def past_the_limit(x, backend: str, positions: list[int]) -> tuple[dict, object]:
    """rotate compiled with dynamic=False (every int a constant), called at each position: graphs after each call,
    what Dynamo warned, and whether every answer is right."""
    torch._dynamo.reset()
    counters.clear()
    run = torch.compile(rotate, backend=backend, dynamic=False)
    graphs, right = [], []
    with captured(WARNINGS_LOG) as warned:
        for pos in positions:
            right.append(torch.allclose(run(x, pos), rotate(x, pos), rtol=1e-4, atol=1e-5))  # fused cos, sin
            graphs.append(counters["stats"]["unique_graphs"])
    return {"graphs_after_call": graphs, "all_correct": all(right), "warnings": warned}, run


def module_int_attribute(x, positions: list[int]) -> list[int]:
    """The position as an nn.Module attribute under the default (dynamic=None): graphs after each call."""
    torch._dynamo.reset()
    counters.clear()
    rotary = Rotary()
    run = torch.compile(rotary, backend="eager")
    graphs = []
    with captured(WARNINGS_LOG):
        for pos in positions:
            rotary.pos = pos
            run(x)
            graphs.append(counters["stats"]["unique_graphs"])
    return graphs


def hard_failures(x, positions: list[int]) -> dict:
    """Past the limit with fail_on_recompile_limit_hit=True, and with fullgraph=True: the call that raises, and what."""
    found = {}
    for name, options, patch in (
        ("fail_on_recompile_limit_hit", {}, {"fail_on_recompile_limit_hit": True}),
        ("fullgraph", {"fullgraph": True}, {}),
    ):
        torch._dynamo.reset()
        run = torch.compile(rotate, backend="eager", dynamic=False, **options)
        found[name] = {"call": None, "type": None, "message": "no error"}
        with torch._dynamo.config.patch(patch), captured(WARNINGS_LOG):
            for call, pos in enumerate(positions, start=1):
                try:
                    run(x, pos)
                except torch._dynamo.exc.FailOnRecompileLimitHit as exc:
                    found[name] = {"call": call, "type": type(exc).__name__, "message": short_paths(str(exc))}
                    break
    return found


def graphs_over_int(x, positions: list[int]) -> int:
    """rotate under the default (dynamic=None): the int argument becomes a symbol on its second value."""
    torch._dynamo.reset()
    counters.clear()
    run = torch.compile(rotate, backend="eager")
    for pos in positions:
        run(x, pos)
    return counters["stats"]["unique_graphs"]


# --8<-- [end:limit]


CONFIG_KEYS = """recompile_limit accumulated_recompile_limit fail_on_recompile_limit_hit automatic_dynamic_shapes
    assume_static_by_default allow_unspec_int_on_nn_module force_parameter_static_shapes specialize_int""".split()


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    backend = "inductor" if cuda else "aot_eager"
    config = {key: getattr(torch._dynamo.config, key) for key in CONFIG_KEYS}  # this torch's defaults
    sizes = [8, 16, 1] if small else SIZES
    repeats, calls = (3, 20) if small else (20, 200)
    table = [
        {"control": name, **graphs_over(block, sizes, options, mark)} for name, (options, mark) in CONTROLS.items()
    ]
    specialised = [
        {"control": name, **graphs_over(add_positions, [8], {}, MARKS[name])}
        for name in ("mark_dynamic", "maybe_mark_dynamic")
    ]
    ducks = duck_sizing()
    x = torch.randn(16, D, device=dev)
    # A CPU run lowers the limit to 3 (its compiles are slow; the mechanism is the same); a GPU run keeps the default.
    with torch._dynamo.config.patch(recompile_limit=3 if small else config["recompile_limit"]):
        limit = torch._dynamo.config.recompile_limit
        positions = list(range(2, limit + 4))  # from 2: keeps 0 and 1, which tensor sizes specialise, out of the count
        limit_facts, past = past_the_limit(x, backend, positions)
        with captured(WARNINGS_LOG):  # before any other reset: past's graphs live on rotate's code object
            timed = host_us_each(
                {
                    "eager": (lambda: rotate(x, positions[-1]), contextlib.nullcontext),
                    "compiled_position": (
                        lambda: past(x, positions[0]),
                        contextlib.nullcontext,
                    ),  # grad mode as compiled
                    "past_the_limit": (lambda: past(x, positions[-1]), contextlib.nullcontext),
                },
                calls=calls,
                repeats=repeats,
                warmup=5,
            )
        int_argument_default = graphs_over_int(x, positions)
        module_graphs = module_int_attribute(x, positions)
        failures = hard_failures(x, positions)
    torch._dynamo.reset()
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "backend_timed": backend,
        "torch": torch.__version__,
        "sizes": sizes,
        "config": config,
        "table": table,
        "specialised": specialised,
        "duck_sizing": ducks,
        "limit": {
            "recompile_limit_in_effect": limit,
            "positions": positions,
            **limit_facts,
            "int_argument_default_graphs": int_argument_default,
            "module_attribute_graphs_after_call": module_graphs,
            **failures,
        },
        "host_us": timed,
        "notes": [
            "table, specialised, duck_sizing, module_attribute and the hard failures: backend eager (Dynamo's "
            "decisions); graphs_after_call and host_us: rotate compiled by " + backend,
            "host_us: compiled_position is a position with a graph; past_the_limit one past the limit (the cached "
            "graphs' guards fail, then eager); eager is rotate uncompiled",
        ]
        + (
            [] if cuda else ["a CPU run lowers recompile_limit to 3 (recompile_limit_in_effect); config is the default"]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"batch sizes {r['sizes']}, torch {r['torch']}")
    for row in r["table"] + r["specialised"]:
        error = f"  error: {row['error']['type']} at {row['error']['size']}" if row["error"] else ""
        print(f"  {row['control']:<19} {row['graphs']} graphs, at {row['compiled_at']}: {row['x_in_graph']}{error}")
    print(f"  duck sizing: {r['duck_sizing']}")
    lim = r["limit"]
    print(f"recompile_limit {lim['recompile_limit_in_effect']}; rotate(x, pos), dynamic=False, at {lim['positions']}")
    print(f"  graphs after each call {lim['graphs_after_call']}, all right: {lim['all_correct']}")
    print(f"  the same as a module attribute (default): {lim['module_attribute_graphs_after_call']}")
    print(f"  as an int argument under the default: {lim['int_argument_default_graphs']} graphs")
    print("  warned: " + (lim["warnings"] or ["nothing"])[0].splitlines()[0])
    for name in ("fail_on_recompile_limit_hit", "fullgraph"):
        print(f"  {name}: call {lim[name]['call']} raises {lim[name]['type']}: {lim[name]['message'].splitlines()[0]}")
    print(f"host us per call on {device_name()} ({r['backend_timed']}):")
    for name, s in r["host_us"].items():
        print(f"  {name:<18} {s['median']:8.1f}")
