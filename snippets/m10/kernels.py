"""Specialised against dynamic kernels: one block, y = x + gelu(layer_norm(x)), compiled by Inductor with
static shapes (dynamic=False, one compile per size) and with symbolic shapes (dynamic=True, one compile at
the first size, reused for the others), timed on the device (coursekit.bench.gpu_us_each: CUDA events, L2
flushed, the two variants in interleaved rounds, so that their ratio is paired round by round).

Two cases. "rows": the number of rows varies (1,024 to 65,536 rows of 1,024, bf16: 2 to 128 MiB), the
layer norm has weights (nn.Parameters keep static shapes, torch._dynamo.config.force_parameter_static_shapes),
so only the row count is symbolic; the reduction over a row stays 1,024 long. "row_length": the length of
the row, the reduction, varies (256 to 4,096, rows * length = 2**25 elements, 64 MiB) without weights, so the
dynamic kernel does not know how long its reduction is. Inductor keeps a whole row in registers (a
"persistent" reduction, kernel names triton_per_*) only when it can prove the row is at most 1,024 long for
a row-wise (INNER) reduction (InductorChoices.should_use_persistent_reduction, torch/_inductor/choices.py);
with a symbolic length it cannot, and writes a looped reduction (triton_red_*) for every length.

Stored for every compile: the Triton kernels Inductor wrote (captured as GraphLowering.save_output_code,
the hook run_and_get_code uses, with the FX graph cache off so the code is generated), their kind, the
sizes written into them as constants (xnumel = 65536) and the size arguments (ks0) they take instead, and
x's size as Dynamo's graph saw it (s77 is a symbol). On a CPU (small) the backend is aot_eager: the
graphs and their symbols are the same, there are no kernels, and the times are host times."""

# --8<-- [start:imports]
import contextlib
import logging
import re
import types
from unittest import mock

import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch._inductor.graph import GraphLowering

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, summarize

PROCESSES = 1  # device times (CUDA events) in interleaved rounds; the generated code and the counts are deterministic
# Rows of 1,024 elements, 128 MiB down to 2 MiB in bf16. The dynamic compile is at the first shape, so not at 1,024
# rows of 1,024: duck sizing would give both dimensions one symbol, and the weights would then fix it at 1,024.
ROWS = [65536, 16384, 4096, 1024]
ROW_LENGTHS = [256, 512, 1024, 2048, 4096]  # the reduction's length; rows * length = 2**25 elements
ELEMENTS = 2**25


# --8<-- [start:blocks]
def norm_gelu(x, w, b):  # "rows": w and b are nn.Parameters, so the row length is fixed by them
    return x + F.gelu(F.layer_norm(x, w.shape, w, b))


def norm_gelu_plain(x):  # "row_length": no weights, the row is as long as x says
    return x + F.gelu(F.layer_norm(x, x.shape[-1:]))


def own_copy(fn):
    """fn with its own code object: Dynamo keeps compiled graphs, guards and its recompile count per code
    object, so the static and the dynamic compiles of one function do not share them."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


# --8<-- [end:blocks]


# --8<-- [start:inspect]
@contextlib.contextmanager
def generated_code():
    """The Python module Inductor writes for each graph compiled inside the block, and x's size in each
    graph Dynamo captured (TORCH_LOGS=graph_code)."""
    kept = {"modules": [], "x_in_graph": []}
    handler = logging.Handler(logging.DEBUG)
    uncoloured = lambda record: re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage())  # coloured on a terminal
    handler.emit = lambda record: kept["x_in_graph"].extend(re.findall(r'L_x_: "([^"]+)"', uncoloured(record)))
    log = logging.getLogger("torch._dynamo.output_graph.__graph_code")
    torch._logging.set_logs(graph_code=True)
    saved = log.handlers[:], log.propagate
    log.handlers, log.propagate = [handler], False
    try:
        with (
            mock.patch.object(GraphLowering, "save_output_code", kept["modules"].append),
            torch._inductor.config.patch(fx_graph_cache=False),  # generate the code, do not load it
        ):
            yield kept
    finally:
        log.handlers, log.propagate = saved
        torch._logging.set_logs()


KINDS = {"triton_per_": "persistent reduction", "triton_red_": "looped reduction", "triton_poi_": "pointwise"}


def kernel_facts(module: str) -> list[dict]:
    """Each Triton kernel in one generated module: its name and kind, the sizes written into it as
    constants, and the size arguments it takes instead (ks0, ks1: symbolic sizes)."""
    kernels = []
    for source in re.findall(r"async_compile\.triton\(.*?'''\n?(.*?)'''", module, re.S):
        found = re.search(r"^def (\w+)\((.*)\):$", source, re.M)
        name, args = found.groups() if found else ("unparsed", "")
        kernels.append(
            {
                "name": name,
                "kind": next((kind for prefix, kind in KINDS.items() if name.startswith(prefix)), "other"),
                "signature": f"def {name}({args}):",
                "constant_sizes": re.findall(r"^\s+(\w*numel = \d+|R0_BLOCK: tl\.constexpr = \d+)$", source, re.M),
                "size_args": [a for a in (a.strip() for a in args.split(",")) if re.fullmatch(r"ks\d+", a)],
            }
        )
    return kernels


def compile_and_look(fn, args, dynamic: bool, backend: str) -> tuple:
    """fn compiled (static or dynamic), called once on args: the compiled function, and what was generated."""
    compiled = torch.compile(own_copy(fn), dynamic=dynamic, backend=backend)
    with generated_code() as kept:
        compiled(*args)
    kernels = [k for module in kept["modules"] for k in kernel_facts(module)]
    return compiled, {"x_in_graph": kept["x_in_graph"], "kernel_count": len(kernels), "kernels": kernels}


# --8<-- [end:inspect]


def one_case(fn, shapes: list[tuple], params: tuple, backend: str, dev: str, dtype, rounds: int) -> dict:
    """The static and the dynamic compile of fn at each shape, and their device times."""
    inputs = [torch.randn(shape, device=dev, dtype=dtype) for shape in shapes]
    torch._dynamo.reset()
    counters.clear()
    dynamic, dynamic_code = compile_and_look(fn, (inputs[0], *params), True, backend)  # compiled at the first size
    points = []
    for shape, x in zip(shapes, inputs):
        graphs = counters["stats"]["unique_graphs"]
        dynamic(x, *params)  # the dynamic graph again: is a new graph compiled for this shape?
        recompiled = counters["stats"]["unique_graphs"] > graphs
        static, static_code = compile_and_look(fn, (x, *params), False, backend)
        times = gpu_us_each(
            {"static": lambda: static(x, *params), "dynamic": lambda: dynamic(x, *params)}, rounds=rounds
        )
        ratio = [d / s for d, s in zip(times["dynamic"]["rounds"], times["static"]["rounds"])]
        points.append(
            {
                "rows": shape[0],
                "row_length": shape[1],
                "mib": x.numel() * x.element_size() / 2**20,
                "dynamic_recompiled": recompiled,
                "time_us": times,
                "dynamic_over_static": summarize(ratio, "x", times["static"].get("clock")),
                "static": static_code,
            }
        )
    return {"dynamic": dynamic_code, "graphs": counters["stats"]["unique_graphs"], "points": points}


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    backend = "inductor" if cuda else "aot_eager"  # a cold Inductor C++ compile alone outlasts the CPU budget
    rows, lengths, elements, width = ([256, 64], [32, 64], 2**12, 64) if small else (ROWS, ROW_LENGTHS, ELEMENTS, 1024)
    rounds = 3 if small else 15
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(width, device=dev, dtype=dtype))
    b = torch.nn.Parameter(torch.randn(width, device=dev, dtype=dtype))
    with torch.no_grad():
        by_rows = one_case(norm_gelu, [(r, width) for r in rows], (w, b), backend, dev, dtype, rounds)
        by_length = one_case(norm_gelu_plain, [(elements // n, n) for n in lengths], (), backend, dev, dtype, rounds)
    torch._dynamo.reset()
    return {
        "repetitions": rounds,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": backend,
        "torch": torch.__version__,
        "persistent_reductions": torch._inductor.config.triton.persistent_reductions,
        "force_parameter_static_shapes": torch._dynamo.config.force_parameter_static_shapes,
        "cases": [{"case": "rows", **by_rows}, {"case": "row_length", **by_length}],
        "notes": [
            "dynamic: torch.compile(dynamic=True), compiled once at the first shape and reused; static: "
            "dynamic=False, one compile per shape; both on their own code object (own_copy)",
            "dynamic_over_static: the dynamic variant's time over the static one's, round by round",
            "kernels: parsed from the module Inductor generated (GraphLowering.save_output_code)"
            + ("" if cuda else "; none on a CPU, where the backend is aot_eager and times are host times"),
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"x + gelu(layer_norm(x)), {r['dtype']}, backend {r['backend']}, on {device_name()}")
    for case in r["cases"]:
        dyn = case["dynamic"]
        kinds = ", ".join(k["kind"] for k in dyn["kernels"]) or "no kernels"
        print(f"case {case['case']}: dynamic graph x {dyn['x_in_graph']}: {kinds}; {case['graphs']} graphs in all")
        print(f"  {'rows':>7} {'length':>6} {'static us':>10} {'dynamic us':>10} {'ratio':>6}  static kernels")
        for p in case["points"]:
            t = p["time_us"]
            kinds = ", ".join(k["kind"] for k in p["static"]["kernels"]) or "-"
            print(
                f"  {p['rows']:>7} {p['row_length']:>6} {t['static']['median']:>10.1f} {t['dynamic']['median']:>10.1f}"
                f" {p['dynamic_over_static']['median']:>6.3f}  {kinds}"
            )
