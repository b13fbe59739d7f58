"""The three ways PyTorch builds CUDA graphs, and the facts a page quotes about each.

torch.cuda.graph and its private memory pool: two graphs of the same function, whose two 64 MiB
temporaries are freed inside the capture, captured into two pools and then into one shared pool
(pool=first.pool()): the bytes each arrangement holds, and that deleting the graphs returns them.

torch.cuda.make_graphed_callables on a small MLP (d = 1,024, 8 rows, float32) in training: how
many times its Python forward runs while it is graphed (warm-up iterations, then the capture) and
afterwards (never), that a new input tensor is copied into its static input (no stale-input
pitfall here), and its output and gradients against an eager copy of the model.

torch.compile(mode="reduce-overhead"), CUDA graph trees (torch/_inductor/cudagraph_trees.py), on the
same MLP in inference: call by call, what the trees' log says happened (a warm-up run, a recording,
then replays), how long each call took, and what became of the previous call's output (kept,
overwritten in place, or invalidated with an error, quoted); and the config keys that govern it.

On a CPU: no CUDA graphs and no pools. make_graphed_callables is replaced by the module itself,
and the compile uses backend="eager" (Dynamo only), so the call-by-call log is empty; the data
says so. Times are one sample each (one compile, one recording), as the page quotes them."""

# --8<-- [start:imports]
import copy
import inspect
import logging
import re
import time

import torch
from chain import pool_bytes  # bytes of a private pool, from a memory snapshot (chain.py)
from constraints import capture  # warm up on a side stream, then capture (constraints.py)
from torch import nn

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # counts, messages and bytes are deterministic; the times are one-off events (a compile, a recording)
D, ROWS = 1024, 8


# --8<-- [start:pools]
def two_temporaries(t):
    # t * 2 and t * 2 + 1: two tensors of t's size, both freed before the end
    return (t * 2 + 1).sum()


def pools(shared: bool) -> dict:
    """Capture two_temporaries twice, into two private pools or into one: the bytes the pools hold,
    then the bytes left once the graphs and their outputs are deleted."""
    x = torch.randn(4096, 4096, device="cuda")  # 64 MiB
    first, y1 = capture(two_temporaries, x)
    second, y2 = capture(two_temporaries, x, pool=first.pool() if shared else None)
    ids = {tuple(first.pool()), tuple(second.pool())}
    held = sum(pool_bytes(p) for p in ids)
    first.replay()
    second.replay()  # replayed in the order captured: the shared pool's rule
    correct = torch.allclose(y1, two_temporaries(x)) and torch.allclose(y2, two_temporaries(x))
    del first, second, y1, y2
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"pools": len(ids), "pool_bytes": held, "after_delete": sum(pool_bytes(p) for p in ids), "correct": correct}


# --8<-- [end:pools]


# --8<-- [start:graphed]
class CountedMLP(nn.Module):
    """An MLP that counts how often its Python forward runs."""

    def __init__(self, d: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.forwards = 0

    def forward(self, x):
        self.forwards += 1
        return self.net(x)


def graphed_training(model: CountedMLP, sample) -> dict:
    """make_graphed_callables on model: forwards run while graphing and after, one training step on a
    new input tensor against an eager copy of the model (output and gradients)."""
    reference = copy.deepcopy(model)
    start = time.perf_counter()  # one-off: the warm-up and the two captures (forward, backward)
    if sample.is_cuda:
        graphed = torch.cuda.make_graphed_callables(model, (sample,))
    else:
        graphed = model  # no CUDA graphs on a CPU: the module itself stands in
    seconds = time.perf_counter() - start
    while_graphing = model.forwards
    x = torch.randn_like(sample)  # not the sample: the graphed forward copies it into its static input
    out, expected = graphed(x), reference(x)
    out.square().mean().backward()
    expected.square().mean().backward()
    grads = [(p.grad - q.grad).abs().max().item() for p, q in zip(model.parameters(), reference.parameters())]
    return {
        "num_warmup_iters_default": inspect.signature(torch.cuda.make_graphed_callables)
        .parameters["num_warmup_iters"]
        .default,
        "forwards_while_graphing": while_graphing,
        "forwards_in_one_step": model.forwards - while_graphing,
        "max_abs_output_diff": (out - expected).abs().max().item(),
        "max_abs_grad_diff": max(grads),
        "graphing_s": summarize([seconds], "s", "host"),
    }


# --8<-- [end:graphed]


# --8<-- [start:trees]
class TreesLog(logging.Handler):
    """What CUDA graph trees log (TORCH_LOGS=cudagraphs), kept instead of printed while installed."""

    LOGGERS = [f"torch._inductor.{m}.__cudagraphs" for m in ("cudagraph_trees", "cudagraph_utils")]

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())

    def count(self, text: str) -> int:
        return sum(text in m for m in self.seen)

    def __enter__(self):
        import torch._inductor.cudagraph_trees  # noqa: F401  (creates the loggers)

        self.logs = [logging.getLogger(name) for name in self.LOGGERS]
        self.propagate = [log.propagate for log in self.logs]
        torch._logging.set_logs(cudagraphs=True)  # as TORCH_LOGS=cudagraphs: the loggers at DEBUG
        for log in self.logs:
            log.addHandler(self)
            log.propagate = False  # to torch's handlers, which print it
        return self

    def __exit__(self, *exc):
        torch._logging.set_logs()
        for log, propagate in zip(self.logs, self.propagate):
            log.removeHandler(self)
            log.propagate = propagate


def short_paths(text: str) -> str:
    """File paths in torch's messages cut to the file's name."""
    return re.sub(r"(?<=[\s'\"(])/[^\s'\"():]*/", "", text)


def reduce_overhead_calls(model, xs, backend=None) -> list[dict]:
    """Call a fresh torch.compile(model, mode="reduce-overhead") on each of xs (backend: for a CPU)."""
    torch._dynamo.reset()
    run = torch.compile(model, backend=backend) if backend else torch.compile(model, mode="reduce-overhead")
    calls, previous = [], None
    with TreesLog() as log:
        for call, x in enumerate(xs, start=1):
            start = time.perf_counter()  # one-off: the first call compiles, the second records
            out = run(x)
            if x.is_cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            fate = "none"
            if previous is not None:
                kept, copy_of_it = previous
                try:
                    fate = "kept" if torch.equal(kept, copy_of_it) else "overwritten in place"
                except Exception as exc:  # noqa: BLE001 - the trees' message comes as a RuntimeError
                    fate = "error: " + short_paths(str(exc))
                fate += ", same tensor as this call's" if kept is out else ""
            calls.append(
                {
                    "call": call,
                    "seconds": summarize([seconds], "s", "host"),
                    "warmup_runs": log.count("Running warmup function="),  # cumulative, from the trees' log
                    "recordings": log.count("Recording function="),
                    "trees": log.count("Recording cudagraph tree for"),
                    "previous_output": fate,
                }
            )
            previous = (out, out.clone())
    torch._dynamo.reset()
    return calls


# --8<-- [end:trees]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    d = 64 if small else D
    model = CountedMLP(d).to(dev)
    graphed = graphed_training(model, torch.randn(ROWS, d, device=dev))
    mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).to(dev).eval()
    with torch.no_grad():
        xs = [torch.randn(ROWS, d, device=dev) for _ in range(5)]
        calls = reduce_overhead_calls(mlp, xs, backend=None if cuda else "eager")
    config = torch._inductor.config.triton
    notes = []
    if not cuda:
        notes = [
            "no CUDA graphs on a CPU: pools are not measured (None); make_graphed_callables is replaced by the "
            "module itself; the compile uses backend='eager', so the trees' log is empty"
        ]
    return {
        "repetitions": 1,
        "device": dev,
        "d_model": d,
        "rows": ROWS,
        "pools": {"separate": pools(False), "shared": pools(True)} if cuda else None,
        "make_graphed_callables": graphed,
        "reduce_overhead": calls,
        "config": {
            "triton.cudagraph_trees": config.cudagraph_trees,
            "triton.skip_cudagraph_warmup": config.skip_cudagraph_warmup,
            "triton.cudagraph_unexpected_rerecord_limit": config.cudagraph_unexpected_rerecord_limit,
            "triton.cudagraph_dynamic_shape_warn_limit": config.cudagraph_dynamic_shape_warn_limit,
        },
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"CUDA graph APIs on {device_name()}, MLP d={r['d_model']}, {r['rows']} rows")
    if r["pools"]:
        for name, p in r["pools"].items():
            print(f"  two graphs, {name} pools: {p['pools']} pool(s), {p['pool_bytes'] / 2**20:.0f} MiB", end="")
            print(f", {p['after_delete'] / 2**20:.0f} MiB after deleting them; correct: {p['correct']}")
    g = r["make_graphed_callables"]
    print(f"  make_graphed_callables: {g['forwards_while_graphing']} Python forwards while graphing", end="")
    print(f" (num_warmup_iters={g['num_warmup_iters_default']}), {g['forwards_in_one_step']} in a step after")
    print(f"    max abs diff against eager: output {g['max_abs_output_diff']:.2g}, grads {g['max_abs_grad_diff']:.2g}")
    print("  reduce-overhead, call by call (cumulative warm-up runs / recordings; the previous output):")
    for c in r["reduce_overhead"]:
        print(f"    {c['call']}: {c['seconds']['median']:8.3f} s  {c['warmup_runs']}/{c['recordings']}", end="")
        print(f"  {c['previous_output'][:100]}")
    for note in r["notes"]:
        print("note:", note)
