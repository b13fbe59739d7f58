"""The routes to a graph that came before Dynamo, and where each fails: torch.jit.trace records one
run and replays it, silently wrong once a branch on the data goes the other way; torch.jit.script
compiles a subset of Python and rejects ordinary Python (an options dict, a try block);
torch.fx.symbolic_trace refuses the branch outright. The same functions under torch.compile
(Dynamo, backend="eager": capture only) run and give the right answers. The facts are kept as
data (outputs, warning and error texts); one timing: each route's call, interleaved."""

# --8<-- [start:imports]
import re
import warnings

import torch

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 1  # the facts are deterministic; the one timing compares the routes within one process


# --8<-- [start:branch]
def double_or_negate(x):
    if x.sum() > 0:  # a branch on the data
        return x * 2
    return -x


# --8<-- [end:branch]


# --8<-- [start:trace]
def trace_route(dev: str = "cpu") -> dict:
    """Trace on a positive input, then call the trace on a negative one."""
    positive, negative = torch.ones(3, device=dev), -torch.ones(3, device=dev)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(double_or_negate, (positive,))  # runs it once: the x * 2 branch
    said = {str(w.message) for w in caught if issubclass(w.category, torch.jit.TracerWarning)}
    return {
        "traced": traced,
        "eager_on_negative": double_or_negate(negative).tolist(),  # -x: [1, 1, 1]
        "traced_on_negative": traced(negative).tolist(),  # still x * 2: [-2, -2, -2], and no error
        "tracer_warnings": sorted(said),
        "traced_code": traced.code.strip(),  # the branch is gone from what was recorded
    }


# --8<-- [end:trace]


# --8<-- [start:script]
# --8<-- [start:script_fns]
def scale_by(x, config):  # an options dict, as ordinary Python passes one
    return x * config["scale"]


def scale_or_keep(x, config: dict[str, float]):  # annotated, with a try block
    try:
        return x * config["scale"]
    except KeyError:
        return x


# --8<-- [end:script_fns]
def script_error(fn) -> dict:
    """What torch.jit.script says about fn: the exception's type and text, file paths cut to names."""
    try:
        torch.jit.script(fn)
    except Exception as exc:  # a RuntimeError or one of TorchScript's frontend errors
        text = re.sub(r'File "[^"]*?([^"/\\]+)"', r'File "\1"', str(exc)).strip()
        return {"type": type(exc).__name__, "message": text}
    return {"type": None, "message": "scripted without an error"}


# --8<-- [end:script]


# --8<-- [start:fx]
def fx_error() -> str:
    """torch.fx.symbolic_trace runs the function on proxies: a proxy has no truth value to branch on."""
    try:
        torch.fx.symbolic_trace(double_or_negate)
    except torch.fx.proxy.TraceError as exc:
        return str(exc)
    return "traced without an error"


# --8<-- [end:fx]


# --8<-- [start:dynamo]
def dynamo_route(dev: str = "cpu") -> dict:
    """The same functions under torch.compile: do they give eager's answers?"""
    positive, negative = torch.ones(3, device=dev), -torch.ones(3, device=dev)
    config = {"scale": 3.0}
    # backend="eager": capture only, the graphs run as eager code
    branch = torch.compile(double_or_negate, backend="eager")
    return {
        "double_or_negate": all(
            torch.equal(
                branch(x),
                double_or_negate(x),
            )
            for x in (positive, negative)
        ),
        "scale_by": torch.equal(
            torch.compile(scale_by, backend="eager")(positive, config),
            positive * 3,
        ),
        "scale_or_keep": torch.equal(
            torch.compile(scale_or_keep, backend="eager")(positive, {}),
            positive,
        ),
    }


# --8<-- [end:dynamo]


def measure(small: bool = False) -> dict:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    calls, repeats = (50, 5) if small else (1000, 30)
    trace = trace_route(dev)
    dynamo = dynamo_route(dev)
    torch._dynamo.reset()  # the timed compiled version starts from an empty cache
    traced = trace.pop("traced")
    scripted = torch.jit.script(double_or_negate)  # TorchScript keeps the branch: this one it can compile
    compiled = torch.compile(double_or_negate, backend="eager")
    positive = torch.ones(3, device=dev)
    # Host microseconds per call on the positive input, where every route is right: eager, the trace,
    # the script, torch.compile(backend="eager"). On a GPU all but the trace read the sum back to branch.
    timed = host_us_each(
        {
            "eager": (lambda: double_or_negate(positive), torch.no_grad),
            "jit_trace": (lambda: traced(positive), torch.no_grad),
            "jit_script": (lambda: scripted(positive), torch.no_grad),
            "compile_eager": (lambda: compiled(positive), torch.no_grad),
        },
        calls=calls,
        repeats=repeats,
        warmup=10,
    )
    return {
        "device": dev,
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "trace": {**trace, "wrong": trace["traced_on_negative"] != trace["eager_on_negative"]},
        "script_errors": {fn.__name__: script_error(fn) for fn in (scale_by, scale_or_keep)},
        "script_keeps_the_branch": torch.equal(scripted(-positive), double_or_negate(-positive)),
        "fx_symbolic_trace_error": fx_error(),
        "dynamo_correct": dynamo,
        "host_us": timed,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    t = r["trace"]
    print(f"torch.jit.trace of double_or_negate, traced on ones, called on -ones (on {r['device']}):")
    print(f"  eager {t['eager_on_negative']}, traced {t['traced_on_negative']}: wrong = {t['wrong']}")
    print("  the recorded code:", t["traced_code"].replace("\n", " "))
    for w in t["tracer_warnings"]:
        print("  TracerWarning:", w)
    for name, err in r["script_errors"].items():
        print(f"torch.jit.script({name}): {err['type']}")
        print("  " + err["message"].replace("\n", "\n  "))
    print("torch.jit.script(double_or_negate) right on both branches:", r["script_keeps_the_branch"])
    print("torch.fx.symbolic_trace(double_or_negate):", r["fx_symbolic_trace_error"])
    print("torch.compile(backend='eager') gives eager's answers:", r["dynamo_correct"])
    print(f"host us per call on {device_name()}:")
    for name, s in r["host_us"].items():
        print(f"  {name:<14} {s['median']:8.2f}   (p10 {s['p10']:.2f}, p90 {s['p90']:.2f})")
