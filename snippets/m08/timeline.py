"""Allocated against reserved memory over a small training run, from the allocator's own history:
torch.cuda.memory._record_memory_history, then torch.cuda.memory._snapshot(). The run: an MLP of two
blocks (d=1024, hidden 4096, float32) built on the GPU, then two training steps (forward, backward,
AdamW step, zero_grad) on 256 tokens, then torch.cuda.empty_cache(). Each phase's end is marked by
the length of the history at that point. The snippet reduces the history to a compact list of events
in time order: the action (alloc, free, segment_alloc, segment_free), its size, and the running
allocated bytes (the live requests, each rounded up to 512 bytes as the allocator rounds it: the
history records the size requested, not the block, which in the large pool can be up to 1 MiB larger
when a cached block is handed out whole) and reserved bytes (exact), set against memory_stats at the
end; capped at 2,000 events.

Timed (host clock): one training step with the history off, on without stack traces (context=None),
and on with Python stack traces for every event (context="all", stacks="python"), interleaved round
by round, each round's recording switched on and off around it.

CPU stand-in: the PyTorch profiler's record of the CPU allocator's calls (profile_memory=True), one
profile per phase, reduced by the same code; the CPU allocator caches nothing, so there is no
segment and what it holds is what is allocated. Its timed variants profile the step with
profile_memory (and with_stack for the stack-trace variant)."""

# --8<-- [start:imports]
import contextlib

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
# isort: split
from _allocator_model import round_size

from coursekit.bench import device_name, host_us_each

PROCESSES = 3  # the step times are host timings: three fresh processes give the run-to-run spread
MAX_EVENTS = 2000  # the stored timeline's cap
MAX_ENTRIES = 100_000  # the history's ring buffer: far more than the run records
ACTIONS = {  # the history's actions that change allocated or reserved bytes, and the names stored
    "alloc": "alloc",
    "free_completed": "free",
    "segment_alloc": "segment_alloc",
    "segment_free": "segment_free",
    "segment_map": "segment_map",  # expandable segments only
    "segment_unmap": "segment_unmap",
}


def mlp(d: int) -> nn.Module:
    return nn.Sequential(*[nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(2)])


def train_step(model, opt, x, phase=lambda name: contextlib.nullcontext()):
    with phase("forward"):
        loss = model(x).square().mean()
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        opt.step()
    with phase("zero_grad"):
        opt.zero_grad()  # set_to_none: the gradients are freed


# --8<-- [start:history]
class CudaHistory:
    """The allocator's history (action, address, size per entry), cut into phases by its length."""

    def __init__(self):
        torch.cuda.init()  # the allocator exists once CUDA is initialised: only then can it record
        self.allocated, self.reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        torch.cuda.memory._record_memory_history("all", context=None, max_entries=MAX_ENTRIES)
        self.ends = []  # (phase, number of entries at its end)

    def entries(self) -> list:
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
        return [(e["action"], e.get("addr"), e.get("size", 0)) for e in trace]

    @contextlib.contextmanager
    def phase(self, name: str):
        yield
        self.ends.append((name, len(self.entries())))

    def finish(self) -> tuple[list, dict]:
        entries = self.entries()
        torch.cuda.memory._record_memory_history(None)
        return entries, {
            "allocated_bytes": torch.cuda.memory_allocated(),
            "reserved_bytes": torch.cuda.memory_reserved(),
        }


# --8<-- [end:history]


class ProfiledHistory:
    """CPU stand-in: the profiler's [memory] events, one profile per phase. No addresses, no cache."""

    def __init__(self):
        self.allocated = self.reserved = 0
        self.all, self.ends = [], []

    @contextlib.contextmanager
    def phase(self, name: str):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            yield
        memory = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        memory.sort(key=lambda e: e.start_ns())
        self.all += [("alloc" if e.nbytes() > 0 else "free_completed", None, abs(e.nbytes())) for e in memory]
        self.ends.append((name, len(self.all)))

    def finish(self) -> tuple[list, dict]:
        return self.all, {}


# --8<-- [start:compact]
def compact(entries: list, ends: list, allocated: int, reserved: int, cached: bool = True) -> dict:
    """Running allocated and reserved bytes after each alloc, free and segment event, in order."""
    events, skipped, live, phases = [], {}, {}, []
    start = {"allocated_bytes": allocated, "reserved_bytes": reserved}
    bounds = iter(ends + [("after", len(entries))])
    phase, end = next(bounds)
    for seq, (action, addr, size) in enumerate(entries):
        while seq >= end:
            phase, end = next(bounds)
        if action not in ACTIONS:
            skipped[action] = skipped.get(action, 0) + 1  # free_requested, snapshot, oom
            continue
        if action == "alloc":
            block = round_size(size) if cached else size  # the request, rounded as the allocator rounds it
            allocated += block
            if addr is not None:
                live[addr] = block
        elif action == "free_completed":
            allocated -= live.pop(addr, None) or (round_size(size) if cached else size)
        elif action in ("segment_alloc", "segment_map"):
            reserved += size
        else:
            reserved -= size
        reserved = reserved if cached else allocated  # the CPU allocator holds only what is allocated
        events.append(
            {"seq": seq, "phase": phase, "action": ACTIONS[action], "size_bytes": size}
            | {"allocated_bytes": allocated, "reserved_bytes": reserved}
        )
    for name, end in ends:
        mine = [e for e in events if e["phase"] == name]
        before_end = [e for e in events if e["seq"] < end]
        last = before_end[-1] if before_end else start  # the state at the phase's end
        phases.append(
            {
                "phase": name,
                "events": len(mine),
                "segment_allocs": sum(e["action"] == "segment_alloc" for e in mine),
                "segment_frees": sum(e["action"] == "segment_free" for e in mine),
                "peak_allocated_bytes": max((e["allocated_bytes"] for e in mine), default=last["allocated_bytes"]),
                "allocated_bytes_end": last["allocated_bytes"],
                "reserved_bytes_end": last["reserved_bytes"],
            }
        )
    return {"events": events[:MAX_EVENTS], "events_dropped": max(0, len(events) - MAX_EVENTS)} | {
        "phases": phases,
        "skipped_actions": skipped,
        "final": {"allocated_bytes": allocated, "reserved_bytes": reserved},
    }


# --8<-- [end:compact]


def recording(cuda: bool, stacks: bool):
    """A context factory: the history (or, on a CPU, the profiler) on around each timed sample."""

    @contextlib.contextmanager
    def context():
        if cuda:
            if stacks:
                torch.cuda.memory._record_memory_history("all", context="all", stacks="python", max_entries=MAX_ENTRIES)
            else:
                torch.cuda.memory._record_memory_history("all", context=None, max_entries=MAX_ENTRIES)
            yield
            torch.cuda.memory._record_memory_history(None)
        else:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True, with_stack=stacks):
                yield

    return context


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    d, tokens = (64, 16) if small else (1024, 256)
    calls, repeats = (2, 3) if small else (20, 15)
    if not cuda:
        torch.set_num_threads(1)  # ops this small only lose to an OpenMP pool's hand-offs
    torch.manual_seed(0)
    history = CudaHistory() if cuda else ProfiledHistory()
    start = {"allocated_bytes": history.allocated, "reserved_bytes": history.reserved}
    with history.phase("init"):
        model = mlp(d).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(tokens, d, device=dev)
    for step in (1, 2):
        train_step(model, opt, x, lambda name, step=step: history.phase(f"step {step} {name}"))
    with history.phase("empty_cache"):
        torch.cuda.empty_cache()  # the cached segments that hold no live block go back to the driver
    entries, stats = history.finish()
    timeline = compact(entries, history.ends, history.allocated, history.reserved, cached=cuda)

    step = lambda: train_step(model, opt, x)
    variants = {
        "off": (step, contextlib.nullcontext),
        "history": (step, recording(cuda, stacks=False)),
        "history_python_stacks": (step, recording(cuda, stacks=True)),
    }
    timed = host_us_each(variants, calls=calls, repeats=repeats, warmup=2)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {
        "repetitions": repeats,
        "steps_per_repetition": calls,
        "device": dev,
        "d_model": d,
        "tokens": tokens,
        "parameter_bytes": params,
        "optimizer_state_bytes": sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()),
        "start": start,
        **timeline,
        "memory_stats_at_end": stats or timeline["final"],
        "entries": len(entries),
        "step_us": timed,
        "notes": [
            "allocated_bytes: live requests rounded up to 512 B (round_size), from the values when recording "
            "started; memory_allocated() also counts a large block's unsplit remainder (up to 1 MiB); "
            "reserved_bytes: the bytes of cudaMalloc'd segments",
            "events: alloc, free (the trace's free_completed) and segment events; free_requested entries skipped",
            "step_us: host time per training step, history off, on without stacks, on with Python stacks",
        ]
        + (
            []
            if cuda
            else ["no GPU: the profiler's CPU allocator events, one profile per phase; reserved equals allocated"]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    mib = 2**20
    print(f"MLP d={r['d_model']}, {r['tokens']} tokens, on {device_name()}: {r['entries']} history entries")
    print(
        f"  {'phase':<22} {'events':>6} {'segments+':>9} {'peak alloc MiB':>14} {'alloc MiB':>9} {'reserved MiB':>12}"
    )
    for p in r["phases"]:
        print(
            f"  {p['phase']:<22} {p['events']:>6} {p['segment_allocs']:>9} {p['peak_allocated_bytes'] / mib:14.1f}",
            end="",
        )
        print(f" {p['allocated_bytes_end'] / mib:9.1f} {p['reserved_bytes_end'] / mib:12.1f}")
    final, stats = r["final"], r["memory_stats_at_end"]
    print(f"  at the end: allocated {final['allocated_bytes']} (stats {stats['allocated_bytes']}),", end="")
    print(f" reserved {final['reserved_bytes']} (stats {stats['reserved_bytes']})")
    print("  host us per step: " + ", ".join(f"{k} {s['median']:.0f}" for k, s in r["step_us"].items()))
