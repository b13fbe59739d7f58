"""The rules a CUDA graph imposes, each broken once on purpose: a graph captured on one input
tensor and replayed after the new data was bound to a *new* tensor (the stale-input pitfall,
then the fix, a copy into the captured tensor); a larger input than the captured shape; host
work inside a capture (.item(), a Python `if` on a tensor, torch.cuda.synchronize()), each in a
fresh child process because a failed capture may leave the process unusable, with the errors
stored verbatim; and dropout inside a graph, which draws new numbers on every replay because
the graph registers the generator's philox seed and offset (the offsets are stored). One host
timing: what the fix costs, a replay alone against a copy then a replay, against eager, on
8 floats (launch cost, not bandwidth), in interleaved rounds.

On a CPU there are no CUDA graphs. A stand-in, StandInGraph, takes their place: its "capture"
runs the function once on the given tensors, refusing host reads of tensor values as a real
capture does (a dispatch mode that raises on aten._local_scalar_dense, the op behind .item()
and bool()), and its replay() reruns the function on those same tensor objects, copying the
result into the outputs it returned at capture: the static-address semantics in miniature.
The data names which one ran ("graph")."""

# --8<-- [start:imports]
import contextlib
import json
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_each

PROCESSES = 1  # the facts (values, messages, offsets) are deterministic; the one timing is a side number


# --8<-- [start:capture]
def capture(fn, *static_inputs, pool=None, warmup: int = 3):
    """Record fn(*static_inputs) once: (graph, static_outputs).
    graph.replay() reruns the recorded kernels on the same memory: it reads
    static_inputs' storage and overwrites static_outputs'."""
    if not static_inputs[0].is_cuda:  # no CUDA graphs on a CPU: a stand-in
        graph = StandInGraph(fn, static_inputs)
        return graph, graph.outputs
    # warm up outside the capture, on a side stream (torch.cuda.graph's
    # docs): one-off set-up (loading kernels, the cuBLAS handle) unrecorded
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(*static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # kernels are recorded, not run; the capture stream's cuBLAS
    # workspace is made during the capture, from the graph's pool
    with torch.cuda.graph(graph, pool=pool):
        static_outputs = fn(*static_inputs)
    return graph, static_outputs


# --8<-- [end:capture]


# --8<-- [start:standin]
class NoHostReads(TorchDispatchMode):
    """The stand-in's capture: reading a tensor's value on the host is refused, as in a real capture."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            raise RuntimeError("stand-in capture: aten._local_scalar_dense reads a tensor's value on the host")
        return func(*args, **(kwargs or {}))


class StandInGraph:
    """The CPU's stand-in for a captured CUDA graph (there are none on a CPU): replay() reruns fn on
    the tensor objects it was captured with and copies the result into the outputs of the capture."""

    def __init__(self, fn, inputs):
        self.fn, self.inputs = fn, inputs
        with NoHostReads():
            self.outputs = fn(*inputs)

    def replay(self):
        for kept, new in zip(tree_leaves(self.outputs), tree_leaves(self.fn(*self.inputs))):
            kept.copy_(new)


# --8<-- [end:standin]


# --8<-- [start:stale]
def affine(x):
    return x * 2 + 1


def stale_input(dev: str) -> dict:
    """Capture affine on a static input, then feed it the next batch twice."""
    static_x = torch.zeros(8, device=dev)
    graph, static_y = capture(affine, static_x)
    captured_x = static_x  # the graph keeps no reference to its input
    batch = torch.arange(8.0, device=dev)

    # wrong: a new tensor under the old name; the graph reads the old memory
    static_x = batch  # noqa: F841
    graph.replay()
    after_rebinding = static_y.tolist()

    # right: the new data copied into the captured memory
    captured_x.copy_(batch)
    graph.replay()
    return {
        "expected": affine(batch).tolist(),
        "after_rebinding": after_rebinding,  # affine of the captured zeros
        "after_copy": static_y.tolist(),
    }


# --8<-- [end:stale]


# --8<-- [start:shape]
def static_shape(dev: str) -> dict:
    """A graph recorded for 8 elements computes 8: a 16-element input does not fit, a 5-element one
    fits only padded, and the graph computes the padding too."""
    static_x = torch.zeros(8, device=dev)
    graph, static_y = capture(affine, static_x)
    try:
        static_x.copy_(torch.arange(16.0, device=dev))
        error = ""
    except RuntimeError as exc:
        error = str(exc)
    static_x.zero_()  # pad with zeros, then fill the first 5
    static_x[:5].copy_(torch.arange(5.0, device=dev))
    graph.replay()
    return {"captured_shape": list(static_x.shape), "copy_16_error": error, "padded_5_output": static_y.tolist()}


# --8<-- [end:shape]


# --8<-- [start:host]
HOST_WORK = {
    "item": lambda x: (x * 2).sum().item(),  # a Python number: a copy to the host, and a wait for it
    "if_on_a_tensor": lambda x: x * 2 if x.sum() > 0 else x,  # Python's `if` calls bool(): the same
    "synchronize": lambda x: torch.cuda.synchronize(),  # the host waits for the device
}


def capture_error(work: str, dev: str) -> dict:
    """Capture HOST_WORK[work]: what is raised (the first error, then those of ending the failed
    capture), and can the process still use the device afterwards?"""
    x = torch.ones(8, device=dev)
    errors = []
    try:
        capture(HOST_WORK[work], x)
    except Exception as exc:  # noqa: BLE001 - CUDA errors, RuntimeErrors: any of them is the answer
        while exc is not None:  # the last raised first; its __context__ is what it interrupted
            errors.insert(0, {"type": type(exc).__name__, "message": str(exc).strip()})
            exc = exc.__context__
    try:
        usable = torch.ones(2, device=dev).sum().item() == 2.0
    except Exception:  # noqa: BLE001
        usable = False
    return {"work": work, "raised": bool(errors), "errors": errors, "device_usable_after": usable}


CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("constraints_child", sys.argv[1])
snippet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(snippet)
print(json.dumps(snippet.capture_error(sys.argv[2], sys.argv[3])))
"""


def in_child(work: str, dev: str) -> subprocess.Popen:
    """capture_error(work, dev) started in a fresh Python process, which imports this file by its path."""
    command = [sys.executable, "-c", CHILD, __file__, work, dev]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def child_result(work: str, child: subprocess.Popen) -> dict:
    try:
        out, err = child.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    lines = out.strip().splitlines()
    if child.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"work": work, "raised": None, "errors": [], "returncode": child.returncode, "stderr": err[-3000:]}


def host_work_in_capture(dev: str) -> list[dict]:
    """capture_error for each HOST_WORK; on a GPU each in its own fresh process, all at once."""
    if dev == "cpu":  # the stand-in leaves the process as it was; there is no device to wait for
        skipped = {"work": "synchronize", "raised": None, "errors": [], "device_usable_after": None}
        return [capture_error(w, dev) for w in HOST_WORK if w != "synchronize"] + [skipped]
    children = {work: in_child(work, dev) for work in HOST_WORK}
    return [child_result(work, child) for work, child in children.items()]


# --8<-- [end:host]


# --8<-- [start:rng]
def dropout_replays(dev: str) -> dict:
    """Dropout captured in a graph, replayed: a new mask each time? The same as eager's after the
    same seed? (On a GPU, also the philox offset of the default generator after each replay.)"""
    offset = torch.cuda.default_generators[torch.cuda.current_device()].get_offset if dev == "cuda" else lambda: None
    x = torch.ones(4096, device=dev)
    graph, static_y = capture(lambda t: F.dropout(t, p=0.5), x)
    masks, offsets = [], [offset()]
    for _ in range(3):
        graph.replay()
        masks.append(static_y != 0)
        offsets.append(offset())
    torch.manual_seed(0)
    graph.replay()
    replay_after_seed = static_y != 0
    torch.manual_seed(0)
    graph.replay()
    again_after_seed = static_y != 0
    torch.manual_seed(0)
    before_eager = offset()
    eager_after_seed = F.dropout(x, p=0.5) != 0
    return {
        "elements": x.numel(),
        "kept_fraction": [m.float().mean().item() for m in masks],
        "replays_differ": [not torch.equal(a, b) for a, b in zip(masks, masks[1:])],
        "reseeded_replays_equal": torch.equal(replay_after_seed, again_after_seed),
        "replay_equals_eager_after_same_seed": torch.equal(replay_after_seed, eager_after_seed),
        "offsets": offsets,  # the generator's philox offset before and after each replay
        "offset_per_replay": None if dev == "cpu" else offsets[1] - offsets[0],
        "offset_per_eager_call": None if dev == "cpu" else offset() - before_eager,
    }


# --8<-- [end:rng]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    facts = {
        "stale_input": stale_input(dev),
        "static_shape": static_shape(dev),
        "host_work": host_work_in_capture(dev),
        "rng": dropout_replays(dev),
    }
    # What the fix costs: one copy kernel more per step, against the replay alone and against eager.
    static_x = torch.zeros(8, device=dev)
    graph, _ = capture(affine, static_x)
    batch = torch.arange(8.0, device=dev)
    calls, repeats = (100, 5) if small else (1000, 30)
    null = contextlib.nullcontext
    times = host_us_each(
        {
            "replay": (graph.replay, null),
            "copy_then_replay": (lambda: (static_x.copy_(batch), graph.replay()), null),
            "eager": (lambda: affine(batch), null),
        },
        calls=calls,
        repeats=repeats,
        warmup=calls // 10,
    )
    notes = [
        "host_work: each capture attempt ran in a fresh child process; errors are listed first raised first "
        "(the work's own error, then the errors of ending the invalidated capture)"
    ]
    if not cuda:
        notes = [
            "no CUDA graphs on a CPU: 'graph' is StandInGraph, which reruns the function on the captured tensor "
            "objects; host reads are refused by a dispatch mode (aten._local_scalar_dense); synchronize is not "
            "run; the generator offsets are a CUDA generator's and are None; times are the stand-in's"
        ]
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "graph": "torch.cuda.CUDAGraph" if cuda else "StandInGraph (CPU stand-in)",
        **facts,
        "host_us": times,
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"CUDA graph constraints on {device_name()} ({r['graph']})")
    s = r["stale_input"]
    print(f"  expected          {s['expected']}\n  after rebinding   {s['after_rebinding']}")
    print(f"  after copy_       {s['after_copy']}")
    print(f"  a 16-element input into the 8 captured: {r['static_shape']['copy_16_error']}")
    for h in r["host_work"]:
        said = (h["errors"][0]["message"].splitlines() or [""])[0] if h["errors"] else "(no error)"
        print(f"  {h['work']:<15} in a capture: raised {h['raised']}: {said}")
    g = r["rng"]
    print(f"  dropout replays differ: {g['replays_differ']}, offsets {g['offsets']}")
    print(f"  same seed, same mask as eager: {g['replay_equals_eager_after_same_seed']}")
    for name, t in r["host_us"].items():
        print(f"  {name:<17} {t['median']:7.2f} us per call")
    for note in r["notes"]:
        print("note:", note)
