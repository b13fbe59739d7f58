"""The fragmentation workload of fragmentation.py under six allocator settings, each in a fresh child
process (the allocator reads PYTORCH_ALLOC_CONF once, when CUDA initialises): the default;
expandable_segments:True; max_split_size_mb:128; roundup_power2_divisions:4;
garbage_collection_threshold:0.6; and backend:cudaMallocAsync.

The workload, under the same 2 GiB allowance: one 1.5 GiB tensor, freed; 24 tensors of 64 MiB; every
other one freed; then one request of 768 MiB. Stored per setting: the backend torch reports, whether
building the fragmented state and the request succeeded (and where an out-of-memory error came
from), the OOM message verbatim, and memory_stats before and after the request: allocated,
reserved and peak reserved bytes, segments, cudaMalloc and cudaFree counts, retries; and the host time
of the request (successful or not), the fragmented state rebuilt before each, outside the timed call.

Without a GPU the children run the plain-Python model of the allocator (_allocator_model.py), which
models only expandable_segments: on the CPU every other setting behaves as the default, and the
stored result says so."""

# --8<-- [start:imports]
import contextlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

# --8<-- [end:imports]
# isort: split
from _allocator_model import GiB, MiB, Model, from_memory_stats
from fragmentation import ARENA, LIMIT, PIECE, REQUEST, CudaAllocator, fragment, message_numbers, release, request

from coursekit.bench import device_name, host_us_each

PROCESSES = 1  # which request fails and how many bytes each setting reserves are deterministic
REPEATS = 5  # timed requests per setting, each from the fragmented state rebuilt outside the timed call

CONFIGS = [
    "default",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6",
    "backend:cudaMallocAsync",
]

# --8<-- [start:child]
CHILD = """
import importlib.util, json, os, sys
path, config = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(path))  # for its siblings fragmentation.py and _allocator_model.py
spec = importlib.util.spec_from_file_location("knobs", path)
snippet = importlib.util.module_from_spec(spec)
sys.modules["knobs"] = snippet
spec.loader.exec_module(snippet)
print(json.dumps(snippet.child(config)))
"""


def in_child(config: str) -> dict:
    """child(config) in a fresh Python, PYTORCH_ALLOC_CONF set before CUDA initialises there."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    if config != "default":
        env["PYTORCH_ALLOC_CONF"] = config
    args = [sys.executable, "-c", CHILD, os.path.abspath(__file__), config]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the {config} child failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _state(alloc) -> dict:
    """memory_stats' numbers (a backend may keep fewer: those it lacks read 0), and the largest free
    block where the backend can take a snapshot."""
    if isinstance(alloc, Model):
        return alloc.state()
    try:
        segments = torch.cuda.memory_snapshot()
    except Exception:  # cudaMallocAsync keeps no segments of its own to show
        segments = None
    state = from_memory_stats(torch.cuda.memory_stats(), segments)
    state["largest_free_bytes"] = state.get("largest_free_bytes")  # None: not known
    return state


def child(config: str) -> dict:
    cuda = torch.cuda.is_available()
    if cuda:
        alloc, total = CudaAllocator(), torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction(LIMIT / total)
        backend = torch.cuda.get_allocator_backend()
    else:  # the CPU stand-in: the model, which knows only expandable_segments
        expandable = "expandable_segments:True" in os.environ.get("PYTORCH_ALLOC_CONF", "")
        alloc, total, backend = Model(LIMIT, expandable), 0, "model"
    out = {
        "config": config,
        "alloc_conf": os.environ.get("PYTORCH_ALLOC_CONF", ""),
        "backend": backend,
        "allocator": "torch.cuda" if cuda else "model (CPU stand-in; it models only expandable_segments)",
        "device_total_bytes": total,
    }
    try:
        live = fragment(alloc)
    except Exception as exc:  # the fragmented state itself could not be built: what was raised, stored
        return out | {"fragmented": False, "outcome": f"{type(exc).__name__} while fragmenting", "message": str(exc)}
    before = _state(alloc)
    try:
        live["request"] = alloc.malloc(REQUEST)
        outcome, message = "allocated", None
    except alloc.oom_error as exc:
        outcome, message = "out of memory", str(exc)
    except Exception as exc:  # a backend may refuse otherwise: stored, not raised
        outcome, message = type(exc).__name__, str(exc)
    after = _state(alloc)
    release(alloc, live)

    def fragmented():  # the same state before every timed request, all of it freed after
        live.update(fragment(alloc))
        yield
        release(alloc, live)

    def attempt():  # a backend's refusal other than out of memory is stored above, never raised here
        try:
            return request(alloc, live)
        except Exception as exc:
            return {"outcome": type(exc).__name__, "message": str(exc)}

    timed = host_us_each(
        {"request": (attempt, contextlib.contextmanager(fragmented))},
        calls=1,
        repeats=REPEATS,
        warmup=1,
    )
    return out | {
        "fragmented": True,
        "outcome": outcome,
        "message": message,
        "message_numbers": message_numbers(message),
        "before_request": before,
        "after_request": after,
        "request_us": timed["request"],
    }


# --8<-- [end:child]


def measure(small: bool = False) -> dict:
    workers = 1 if torch.cuda.is_available() else 2  # on a GPU one at a time: one allowance each
    with ThreadPoolExecutor(workers) as pool:
        configs = list(pool.map(in_child, CONFIGS))
    return {
        "repetitions": REPEATS,
        "device": configs[0]["allocator"],
        "limit_bytes": LIMIT,
        "arena_bytes": ARENA,
        "piece_bytes": PIECE,
        "pieces": ARENA // PIECE,
        "request_bytes": REQUEST,
        "configs": configs,
        "notes": [
            "each setting ran in a child process with PYTORCH_ALLOC_CONF set: "
            "the allocator reads it when CUDA initialises",
            "the workload is fragmentation.py's: a 1.5 GiB tensor freed, 24 of 64 MiB, every other one freed, "
            "then 768 MiB requested under a 2 GiB allowance",
            "request_us: host time of the 768 MiB request, from a fragmented state rebuilt before each",
            "largest_free_bytes is null where the backend keeps no segments to snapshot (cudaMallocAsync)",
        ]
        + (
            []
            if torch.cuda.is_available()
            else ["no GPU: the children ran the model, which knows only expandable_segments"]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['pieces']} x {r['piece_bytes'] // MiB} MiB from a {r['arena_bytes'] // MiB} MiB tensor, every other")
    print(f"one freed, then {r['request_bytes'] // MiB} MiB requested under a {r['limit_bytes'] // GiB} GiB allowance")
    print(f"({r['device']}, {device_name()})")
    for c in r["configs"]:
        print(f"  {c['config']:<34} backend {c['backend']:<15} {c['outcome']}")
        if c.get("fragmented"):
            b, a = c["before_request"], c["after_request"]
            print(
                f"    reserved {b['reserved_bytes'] // MiB} -> {a['reserved_bytes'] // MiB} MiB, "
                f"peak {a['peak_reserved_bytes'] // MiB} MiB, allocated {a['allocated_bytes'] // MiB} MiB, "
                f"cudaMalloc calls {a['num_device_alloc']}, retries {a['num_alloc_retries']}"
            )
