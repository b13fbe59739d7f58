"""Out of memory with memory free: a fragmentation scenario under a 2 GiB allowance
(torch.cuda.set_per_process_memory_fraction, of the H200's 141 GB), run twice, each time in a fresh
child process because the allocator reads PYTORCH_CUDA_ALLOC_CONF once, when CUDA initialises: with
the default settings, and with expandable_segments:True.

The workload: one 1.5 GiB tensor, freed (its 1.5 GiB segment stays in the cache); 24 tensors of
64 MiB, which the allocator carves out of that cached segment (best fit, then a split each time);
every other one freed, leaving 12 holes of 64 MiB (768 MiB) inside a segment that still holds live
blocks, so empty_cache cannot return it; then one request of 768 MiB. Allocated memory would then be
1.5 GiB, under the allowance, but no hole fits the request and a new 768 MiB segment on top of the
1.5 GiB reserved would pass 2 GiB: the default allocator raises torch.OutOfMemoryError. With
expandable segments it unmaps the 20 MiB pages that lie wholly inside the holes and maps new ones at
the end of its one segment, and the request succeeds.

Stored per configuration: the outcome, the OOM message verbatim and the numbers in it, memory_stats
before and after the request, the allocator's actions counted from its history
(_record_memory_history), the host time of the request (the fragmented state rebuilt before each,
outside the timed call), and the prediction of the plain-Python model of the allocator
(_allocator_model.py). That model is also the CPU stand-in: without a GPU the children run it."""

# --8<-- [start:imports]
import contextlib
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

# --8<-- [end:imports]
# isort: split
from _allocator_model import K_LARGE_BUFFER, GiB, MiB, Model, from_memory_stats

from coursekit.bench import device_name, host_us_each

PROCESSES = 1  # the allocator's decisions (which request fails, how many bytes) are deterministic

LIMIT = 2 * GiB  # the process's allowance
ARENA = 1536 * MiB  # one tensor, freed: a 1.5 GiB segment in the cache
PIECE = 64 * MiB  # 24 of them, carved out of that segment
REQUEST = 768 * MiB  # what the 12 holes add up to
CONFIGS = ["default", "expandable_segments:True"]


# --8<-- [start:workload]
def fragment(alloc) -> dict:
    """Leave 12 holes of 64 MiB between live blocks of one 1.5 GiB segment; returns the live pieces."""
    arena = alloc.malloc(ARENA)
    alloc.free(arena)  # back to the cache: the segment stays reserved
    del arena
    pieces = {i: alloc.malloc(PIECE) for i in range(ARENA // PIECE)}  # best fit: the cached segment, split
    for i in range(0, len(pieces), 2):
        alloc.free(pieces.pop(i))  # every other one
    return pieces


def request(alloc, live: dict) -> dict:
    try:
        live["request"] = alloc.malloc(REQUEST)
        return {"outcome": "allocated", "message": None}
    except alloc.oom_error as exc:
        return {"outcome": "out of memory", "message": str(exc)}


def release(alloc, live: dict) -> None:
    for key in list(live):
        alloc.free(live.pop(key))
    alloc.empty_cache()


class CudaAllocator:
    """The workload's operations on PyTorch's CUDA caching allocator (Model has the same ones)."""

    oom_error = torch.cuda.OutOfMemoryError

    def malloc(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def free(self, tensor: torch.Tensor) -> None:
        pass  # a tensor is freed when its last reference goes: the caller's, as this call returns

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def state(self) -> dict:
        return from_memory_stats(torch.cuda.memory_stats(), torch.cuda.memory_snapshot(include_traces=False))

    def actions(self) -> dict:
        """The allocator's history, recorded since the child started, counted by action."""
        counted = {}
        for entry in torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]:
            counted[entry["action"]] = counted.get(entry["action"], 0) + 1
        return counted


# --8<-- [end:workload]


# --8<-- [start:child]
CHILD = """
import importlib.util, json, os, sys
path, config, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, os.path.dirname(path))  # for its sibling _allocator_model.py
spec = importlib.util.spec_from_file_location("fragmentation", path)
snippet = importlib.util.module_from_spec(spec)
sys.modules["fragmentation"] = snippet
spec.loader.exec_module(snippet)
print(json.dumps(snippet.child(config, repeats)))
"""


def in_child(config: str, repeats: int) -> dict:
    """child(config) in a fresh Python, PYTORCH_CUDA_ALLOC_CONF set before CUDA initialises there."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    if config != "default":
        env["PYTORCH_CUDA_ALLOC_CONF"] = config
    args = [sys.executable, "-c", CHILD, os.path.abspath(__file__), config, str(repeats)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the {config} child failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child(config: str, repeats: int) -> dict:
    cuda = torch.cuda.is_available()
    if cuda:
        alloc, total = CudaAllocator(), torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(LIMIT / total)
        torch.cuda.memory._record_memory_history("all", context=None, max_entries=100_000)
    else:  # the CPU stand-in: the model, configured as the environment says
        expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        alloc, total = Model(LIMIT, expandable), 0
    live = fragment(alloc)
    before = alloc.state()
    result = request(alloc, live)
    after, actions = alloc.state(), alloc.actions()
    if cuda:
        torch.cuda.memory._record_memory_history(None)
    release(alloc, live)

    @contextlib.contextmanager
    def fragmented():  # the same state before every timed request, all of it freed after
        live.update(fragment(alloc))
        yield
        release(alloc, live)

    timed = host_us_each({"request": (lambda: request(alloc, live), fragmented)}, calls=1, repeats=repeats, warmup=1)
    return {
        "config": config,
        "allocator": "torch.cuda caching allocator" if cuda else "model (CPU stand-in)",
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        **result,
        "message_numbers": message_numbers(result["message"]),
        "before_request": before,
        "after_request": after,
        "actions": actions,
        "request_us": timed["request"],
        "device_total_bytes": total,
    }


# --8<-- [end:child]


# --8<-- [start:message]
OOM_NUMBERS = {  # the sizes the allocator's message states, as it formats them (format_size)
    "tried_to_allocate": r"Tried to allocate ([\d.]+ \w+)",
    "total_capacity": r"total capacity of ([\d.]+ \w+)",
    "device_free": r"of which ([\d.]+ \w+) is free",
    "process_in_use": r"this process has ([\d.]+ \w+) memory in use",
    "allowed": r"([\d.]+ \w+) allowed",
    "allocated_by_pytorch": r"([\d.]+ \w+) is allocated by PyTorch",
    "reserved_but_unallocated": r"([\d.]+ \w+) is reserved by PyTorch but unallocated",
}


def message_numbers(message: str | None) -> dict:
    found = {name: re.search(pattern, message or "") for name, pattern in OOM_NUMBERS.items()}
    return {name: m[1] for name, m in found.items() if m}


# --8<-- [end:message]


def predicted(config: str) -> dict:
    """What the model of the allocator says the same workload does."""
    model = Model(LIMIT, expandable=config == "expandable_segments:True")
    live = fragment(model)
    before = model.state()
    result = request(model, live)
    return {"outcome": result["outcome"], "before_request": before, "after_request": model.state()}


def measure(small: bool = False) -> dict:
    workers = 1 if torch.cuda.is_available() else len(CONFIGS)  # on a GPU one at a time, so the timings stay apart
    with ThreadPoolExecutor(workers) as pool:
        runs = list(pool.map(lambda config: in_child(config, 3 if small else 10), CONFIGS))
    configs = []
    for config, run in zip(CONFIGS, runs):
        model = predicted(config)
        same = ("allocated_bytes", "reserved_bytes")
        run["model"] = model
        run["model_agrees"] = run["outcome"] == model["outcome"] and all(
            run[when][k] == model[when][k] for when in ("before_request", "after_request") for k in same
        )
        configs.append(run)
    return {
        "repetitions": configs[0]["request_us"]["n"],
        "device": configs[0]["allocator"],
        "limit_bytes": LIMIT,
        "arena_bytes": ARENA,
        "piece_bytes": PIECE,
        "pieces": ARENA // PIECE,
        "request_bytes": REQUEST,
        "page_bytes": K_LARGE_BUFFER,
        "configs": configs,
        "notes": [
            "each configuration ran in a child process: PYTORCH_CUDA_ALLOC_CONF is read when CUDA initialises",
            "request_us: host time of the 768 MiB request, from a fragmented state rebuilt before each",
            "model: _allocator_model.py's prediction of the same workload; model_agrees compares outcome, "
            "allocated and reserved bytes before and after the request",
        ]
        + ([] if torch.cuda.is_available() else ["no GPU: the children ran the model, not torch's allocator"]),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['pieces']} x {r['piece_bytes'] // MiB} MiB from a {r['arena_bytes'] // MiB} MiB segment, every other")
    print(f"one freed, then {r['request_bytes'] // MiB} MiB requested under a {r['limit_bytes'] // GiB} GiB allowance")
    print(f"({r['device']}, {device_name()})")
    for c in r["configs"]:
        b, a = c["before_request"], c["after_request"]
        print(
            f"  {c['config']}: {c['outcome']} in {c['request_us']['median']:.0f} us (model agrees: {c['model_agrees']})"
        )
        print(f"    before: allocated {b['allocated_bytes'] // MiB} MiB, reserved {b['reserved_bytes'] // MiB} MiB")
        print(
            f"    after:  allocated {a['allocated_bytes'] // MiB} MiB, reserved {a['reserved_bytes'] // MiB} MiB",
            end="",
        )
        print(f", peak reserved {a['peak_reserved_bytes'] // MiB} MiB, actions {c['actions']}")
        if c["message"]:
            print(f"    {c['message'][:240]}")
