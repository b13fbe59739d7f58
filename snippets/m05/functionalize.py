"""Functionalization, the pass AOTAutograd runs before anything else sees the graph: a function
that mutates its input in place and then mutates it again through a view, traced to ATen as it
is (make_fx) and traced after torch.func.functionalize. Before: the in-place ops (add_, mul_) and
the view they act through. After: only out-of-place ops, the view's mutation turned into a
select_scatter that rebuilds the whole tensor, and one copy_ at the end that writes the result back
into the input (the mutation a caller can see survives, as a single copy). Stored: both graphs'
code, and their operators, mutating ones counted. Timed: each trace, on the host."""

# --8<-- [start:imports]
import torch
from torch.fx.experimental.proxy_tensor import make_fx

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us

PROCESSES = 1  # the graphs are deterministic; the trace times are host timings quoted only as rough sizes


# --8<-- [start:mutate]
def mutate(x):
    x.add_(1)  # in place, on the function's input
    row = x[0]  # a view: row shares x's storage
    row.mul_(2)  # in place through the view: x changes too
    return x.sum(dim=0)


# --8<-- [end:mutate]


# --8<-- [start:trace]
def traced(fn, x, functional: bool) -> torch.fx.GraphModule:
    """fn traced to ATen operators, after functionalization or as it is."""
    return make_fx(torch.func.functionalize(fn) if functional else fn)(x)


# --8<-- [end:trace]


# --8<-- [start:inspect]
def operators(gm: torch.fx.GraphModule) -> list[str]:
    """The ATen operators a graph calls, in order."""
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def mutating(gm: torch.fx.GraphModule) -> list[str]:
    """The operators that write into one of their arguments (their schema says so: add_, mul_, copy_)."""
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    return [str(t) for t in calls if getattr(t, "_schema", None) is not None and t._schema.is_mutable]


# --8<-- [end:inspect]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    repeats = 5 if small else 20
    x = torch.randn(4, 8, device=dev)
    expected = mutate(x.clone())
    out = {}
    for name, functional in (("before", False), ("after", True)):
        gm = traced(mutate, x.clone(), functional)
        y = x.clone()
        torch.testing.assert_close(gm(y), expected)  # same result, and the input mutated alike
        torch.testing.assert_close(y, (x + 1) * torch.tensor([[2.0]] + [[1.0]] * 3, device=dev))
        out[name] = {
            "code": gm.code.strip(),
            "operators": operators(gm),
            "mutating": mutating(gm),
            "trace_us": host_us(lambda f=functional: traced(mutate, x.clone(), f), calls=1, repeats=repeats, warmup=2),
        }
    return {
        "repetitions": repeats,
        "device": dev,
        **out,
        "notes": [
            "operators: the call_function targets of the traced graph, in order; mutating: those whose schema "
            "marks an argument as written (torch._C.FunctionSchema.is_mutable)",
            "after: torch.func.functionalize(fn), whose default keeps views and writes input mutations back with "
            "one copy_ at the end",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"an in-place add on the input, then an in-place mul through a view, on {device_name()}")
    for name in ("before", "after"):
        g = r[name]
        print(f"--- {name} functionalization: {len(g['operators'])} operators, mutating: {g['mutating']}")
        print(g["code"])
        print(f"    (traced in {g['trace_us']['median'] / 1e3:.1f} ms)")
