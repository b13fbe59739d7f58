"""Values that come from the data: .item() (a Python number read from a tensor) and nonzero (an output
whose length is the data's). With the default config Dynamo breaks the graph at each
(torch._dynamo.config.capture_scalar_outputs and capture_dynamic_output_shape_ops are False): the graph
count and the break reasons from torch._dynamo.explain, stored verbatim. With the flags on, the value is
captured as an unbacked symbol (u0: a size with no example value to guard on), shown in the printed graph.
What fails next: a Python branch on u0 (`if n == 0`), which Dynamo cannot decide at compile time (the
data-dependent guard error, stored verbatim), and torch._check(n > 0), which decides it and keeps one graph.
After a break the count reaches the resume function as a Python int, an input like any other: its graph
holds it as a constant (sum / 35 in the stored code) until a second value makes it a symbol.

One timing: the host time per call (device drained at both ends, coursekit.bench.host_us_each, interleaved
rounds) of the .item() function in eager mode, compiled with the default config (two graphs around the
break), and compiled with capture_scalar_outputs and the check (one graph). Every variant reads the count
back to the host, so every one synchronises. Inductor on a GPU, aot_eager on a CPU (small)."""

# --8<-- [start:imports]
import contextlib
import logging
import re
import types

import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # one host-side timing: three fresh processes give the run-to-run spread
CAPTURE = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


# --8<-- [start:functions]
def mean_of_positives(x):
    n = (x > 0).sum().item()  # a Python int from the data
    if n == 0:  # a branch on it
        return x.new_zeros(())
    return x.clamp(min=0).sum() / n


def mean_of_positives_checked(x):
    n = (x > 0).sum().item()
    # the caller's promise, checked at run time: the branch below is now decided
    torch._check(n > 0)
    if n == 0:
        return x.new_zeros(())
    return x.clamp(min=0).sum() / n


def doubled_positives(x):
    index = torch.nonzero(x > 0).squeeze(1)  # as many rows as there are positives
    return x[index] * 2


# --8<-- [end:functions]


# --8<-- [start:explain]
def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)


def graph_lines(gm) -> list[str]:
    """A captured graph as print_readable shows it (sizes and symbols annotated), without source comments."""
    text = gm.print_readable(print_output=False, include_stride=False, include_device=False)
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def explained(fn, x, **config) -> dict:
    """torch._dynamo.explain(fn)(x) under config: graphs, breaks with their reasons, and the graphs themselves."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(config):
        report = torch._dynamo.explain(fn)(x)
    breaks = []
    for b in report.break_reasons:
        lines = [short_paths(line.strip()) for line in b.reason.splitlines() if line.strip()]
        breaks.append({"reason": lines[0], "detail": lines[1:4], "line": b.user_stack[-1].line})
    graphs = [graph_lines(g) for g in report.graphs]
    return {
        "graphs": report.graph_count,
        "graph_breaks": report.graph_break_count,
        "breaks": breaks,
        "graph_code": graphs,
        "unbacked_symbols": sorted({s for g in graphs for line in g for s in re.findall(r"\bu\d+\b", line)}),
    }


@contextlib.contextmanager
def warnings_of(logger: str):
    """The messages of one of torch's loggers inside the block, kept instead of printed."""
    kept = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: kept.append(short_paths(record.getMessage()))
    log = logging.getLogger(logger)
    saved = log.handlers[:], log.propagate
    log.handlers, log.propagate = [handler], False
    try:
        yield kept
    finally:
        log.handlers, log.propagate = saved


ITEM_WARNING_LOG = "torch._dynamo.variables.tensor"  # warns once per process at a graph break on .item()


def fullgraph_error(fn, x, **config) -> dict:
    """What torch.compile(fullgraph=True) raises where explain reported a break: the message users see."""
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(config):
            torch.compile(fn, backend="eager", fullgraph=True)(x)
    except Exception as exc:  # noqa: BLE001 - the error is the result
        said = short_paths(str(exc)).split("\n\n")[0]  # the message, not the stack and the debugging advice
        return {"type": type(exc).__name__, "message": said}
    return {"type": None, "message": "no error"}


# --8<-- [end:explain]


@contextlib.contextmanager
def capturing():
    """No autograd, and the two flags on: how the one-graph variant is compiled and called."""
    with torch.no_grad(), torch._dynamo.config.patch(CAPTURE):
        yield


def own_copy(fn):
    """fn with its own code object, so that its compiled graphs are its own."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    backend = "inductor" if cuda else "aot_eager"
    repeats, calls = (3, 20) if small else (20, 200)
    torch.manual_seed(0)
    x = torch.randn(64 if small else 65536, device=dev)
    with warnings_of(ITEM_WARNING_LOG) as warned:  # the first break on .item() in a process also logs a warning
        facts = {
            "item_default": explained(mean_of_positives, x),
            "item_captured": explained(mean_of_positives, x, **CAPTURE),
            "item_checked": explained(mean_of_positives_checked, x, **CAPTURE),
            "nonzero_default": explained(doubled_positives, x),
            "nonzero_captured": explained(doubled_positives, x, **CAPTURE),
        }
    error = fullgraph_error(mean_of_positives, x, **CAPTURE)
    torch._dynamo.reset()
    broken = torch.compile(own_copy(mean_of_positives_checked), backend=backend)  # default config: two graphs
    whole = torch.compile(own_copy(mean_of_positives_checked), backend=backend)  # compiled with CAPTURE: one graph
    with torch.no_grad(), warnings_of(ITEM_WARNING_LOG):  # the same answers as eager, up to the sum's order
        torch.testing.assert_close(broken(x), mean_of_positives(x), rtol=1e-4, atol=1e-5)
    variants = {
        "eager": (lambda: mean_of_positives_checked(x), torch.no_grad),
        "compiled_two_graphs": (lambda: broken(x), torch.no_grad),
        "compiled_one_graph": (lambda: whole(x), capturing),
    }
    try:
        with capturing():
            torch.testing.assert_close(whole(x), mean_of_positives(x), rtol=1e-4, atol=1e-5)
        one_graph_error = None
    except Exception as exc:  # noqa: BLE001 - the backend refusing the unbacked graph is a result: keep it
        one_graph_error = {"type": type(exc).__name__, "message": short_paths(str(exc)).split("\n\n")[0]}
        del variants["compiled_one_graph"]
    timed = host_us_each(
        variants,
        calls=calls,
        repeats=repeats,
        warmup=5,
    )
    torch._dynamo.reset()
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "backend_timed": backend,
        "torch": torch.__version__,
        "defaults": {key: getattr(torch._dynamo.config, key) for key in CAPTURE},
        **facts,
        "item_captured_fullgraph_error": error,
        "item_break_warning": warned,
        "one_graph_error": one_graph_error,  # None: the backend compiled the graph with u0 and its checks
        "host_us": timed,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch {r['torch']}, defaults {r['defaults']}")
    for key in ("item_default", "item_captured", "item_checked", "nonzero_default", "nonzero_captured"):
        f = r[key]
        print(f"{key}: {f['graphs']} graphs, {f['graph_breaks']} breaks, unbacked {f['unbacked_symbols']}")
        for b in f["breaks"]:
            print(f"  break at {b['line']!r}: {b['reason']}")
        for line in (line for g in f["graph_code"] for line in g if re.search(r"\bu\d+\b", line)):
            print("  " + line.strip()[:140])
    e = r["item_captured_fullgraph_error"]
    print(f"fullgraph=True: {e['type']}: {e['message'].splitlines()[0]}")
    print(f"host us per call on {device_name()} ({r['backend_timed']}):")
    for name, s in r["host_us"].items():
        print(f"  {name:<20} {s['median']:8.1f}")
