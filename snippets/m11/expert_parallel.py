"""Expert parallelism for one MoE layer: the experts split evenly over the GPUs, every token sent to the
GPUs that hold its experts and the results sent back, with torch.distributed.all_to_all_single over
NCCL. The layer is Qwen3-30B-A3B-like: hidden 2,048, expert FFN 768 (SwiGLU: w1, w3 [h -> f], w2 [f ->
h]), 128 experts, top-8, bf16, with 4,096 tokens on every GPU (a prefill or training micro-batch per
GPU) and a random router, so loads are near-uniform (m11/routing measures skewed ones).

Each rank routes its tokens, sorts their 8 copies by expert (experts are numbered rank after rank, so
that is also by destination), exchanges the per-expert counts (a small all_to_all_single), copies the
split sizes to the host (`.tolist()`: the step's one host sync, since all_to_all_single takes its splits
as Python ints), sends the rows (dispatch), regroups what arrived by local expert and runs
torch._grouped_mm, sends the results back (combine), and sums each token's 8 results with its router
weights (one batched matrix product, fp32 accumulation). Every phase is timed with CUDA events on every
rank (device clock), 50 steps after 10 of warm-up, the ranks meeting at a barrier before each step; a
step lasts as long as its slowest rank, so each phase is summarised per rank and as the per-step maximum
over ranks, with its share of the layer. Also stored: the rows each rank sends to each rank, the bytes
per dispatch and the bus bandwidth, the synchronizing CUDA calls in one step
(torch.cuda.set_sync_debug_mode), and the max abs error against a single-process reference (a loop over
all 128 experts, the same seeded weights).

Worlds: 1 (the baseline, every expert on one GPU, no communication, run in this process) and 2, 4, 8 up
to torch.cuda.device_count(); each rank of a larger world is a fresh process that measure() starts with
torchrun's environment variables, NCCL's environment left as it is. On the CPU (small=True): gloo,
worlds 1 and 2, tiny shapes in float32, the same code (torch._grouped_mm runs on the CPU too, as a loop
over groups in ATen), timed on the host clock."""

# --8<-- [start:imports]
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

# --8<-- [end:imports]
from coursekit.bench import device_name, rate, summarize

PROCESSES = 1  # one process: the times are device times (CUDA events); the ranks are processes measure() starts
GPUS = "all"  # a rank per GPU: the build job runs this snippet alone, after the others, with every GPU visible

FULL = {"tokens_per_rank": 4096, "hidden": 2048, "ffn": 768, "experts": 128, "top_k": 8, "warmup": 10, "steps": 50}
SMALL = {"tokens_per_rank": 32, "hidden": 64, "ffn": 32, "experts": 16, "top_k": 4, "warmup": 1, "steps": 3}
SCRIPT = os.path.abspath(__file__)  # what each rank's process runs


# --8<-- [start:layer]
def route(x, router, k):
    """Top-k experts per token, weighted by a softmax over the k chosen logits (the same as Qwen3's
    softmax over all experts, top-k, renormalised)."""
    top, experts = (x.float() @ router.T).topk(k, dim=-1)  # the router in float32, as MoE models run it
    return top.softmax(dim=-1), experts


def expert_ffn(rows, w1, w3, w2, offs):
    """Each local expert's SwiGLU on its own rows: rows sorted by expert, offs[e] the end of expert e's."""
    gate, up = torch._grouped_mm(rows, w1, offs), torch._grouped_mm(rows, w3, offs)
    return torch._grouped_mm(F.silu(gate) * up, w2, offs)


def moe_layer(x, router, w1, w3, w2, k, world=1, mark=lambda phase: None):
    """The layer on this rank's tokens x [T, h] with this rank's experts, w1 and w3 [E_local, h, f], w2
    [E_local, f, h] (rank r holds experts r*E_local to (r+1)*E_local - 1). Returns the output and the
    rows sent to and received from each rank; ``mark(phase)`` is called as each phase ends."""
    tokens, hidden = x.shape
    n_local = w1.shape[0]
    weights, experts = route(x, router, k)
    mark("route")
    flat = experts.flatten()  # slot s: token s // k and its (s % k)-th expert
    order = flat.argsort(stable=True)  # by expert, so by the rank that holds it
    send = x[order // k]  # [T*k, h]: a copy of each token per expert it goes to
    counts = torch.zeros(router.shape[0], dtype=torch.int64, device=x.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))  # rows per expert (torch.bincount would sync on CUDA)
    mark("permute")
    if world > 1:
        send_counts = counts.view(world, n_local)  # [destination rank, its local expert]
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)  # recv_counts[i, e]: rows rank i sends to my expert e
        mark("count_exchange")
        sent, received = torch.stack([send_counts.sum(1), recv_counts.sum(1)]).tolist()  # the host sync
        mark("host_sync")
        recv = send.new_empty(sum(received), hidden)
        dist.all_to_all_single(recv, send, received, sent)  # rows arrive by source rank, then by expert
        mark("dispatch")
        block_expert = torch.arange(n_local, device=x.device).repeat(world)  # expert of each (source, expert) block
        row_expert = block_expert.repeat_interleave(recv_counts.flatten(), output_size=recv.shape[0])
        regroup = row_expert.argsort(stable=True)  # by local expert, whichever rank the rows came from
        done = torch.empty_like(recv)
        done[regroup] = expert_ffn(recv[regroup], w1, w3, w2, recv_counts.sum(0).cumsum(0).to(torch.int32))
        mark("experts")
        back = torch.empty_like(send)
        dist.all_to_all_single(back, done, sent, received)  # the reverse exchange: results to their tokens' ranks
        mark("combine")
    else:  # every expert here: the rows are already grouped by expert, nothing to exchange
        sent = received = [tokens * k]
        back = expert_ffn(send, w1, w3, w2, counts.cumsum(0).to(torch.int32))
        mark("experts")
    slots = torch.empty_like(back)
    slots[order] = back  # each result back in its token's slot
    out = torch.bmm(weights.unsqueeze(1).to(x.dtype), slots.view(tokens, k, hidden))  # one read of the rows
    mark("unpermute")
    return out.view(tokens, hidden), sent, received


# --8<-- [end:layer]


def reference_moe(x, router, w1, w3, w2, k):
    """The same layer in one process with every expert: a loop over experts, no sort, no exchange."""
    weights, experts = route(x, router, k)
    out = torch.zeros(x.shape, device=x.device)
    for e in range(w1.shape[0]):
        token, slot = (experts == e).nonzero(as_tuple=True)
        rows = x[token]
        y = (F.silu(rows @ w1[e]) * (rows @ w3[e])) @ w2[e]
        out.index_add_(0, token, y.float() * weights[token, slot].unsqueeze(-1))
    return out.to(x.dtype)


# --8<-- [start:clock]
class PhaseClock:
    """A timestamp at each phase boundary of one step: CUDA events on the GPU, the host clock on the CPU.

    Not coursekit.bench's gpu_us: do_bench times one callable alone and decides how many calls to make
    from its own first timings, so each rank would call the collectives a different number of times and
    hang; and the phases of one step, with a host sync between them, are not separate callables."""

    def __init__(self, cuda, most=12):
        self.cuda, self.names, self.stamps = cuda, [], []
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(most)] if cuda else []  # made ahead
        self.mark("start")

    def mark(self, phase):
        self.names.append(phase)
        if self.cuda:
            self.events[len(self.names) - 1].record()  # on the current stream, behind the work issued so far
        else:
            self.stamps.append(time.perf_counter())

    def phases_us(self):
        """{phase: microseconds}, once the step has finished on the GPU."""
        if self.cuda:
            spans = [a.elapsed_time(b) * 1e3 for a, b in zip(self.events, self.events[1 : len(self.names)])]
        else:
            spans = [(b - a) * 1e6 for a, b in zip(self.stamps, self.stamps[1:])]
        return dict(zip(self.names[1:], spans))


def sync_calls(step):
    """The synchronizing CUDA calls of one step, as set_sync_debug_mode("warn") reports them (it does
    not cover torch.distributed's own): their messages."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return [str(w.message) for w in caught if "called a synchronizing" in str(w.message)]  # not the mode's notice


# --8<-- [end:clock]


# --8<-- [start:rank]
def make_inputs(rank, cfg, dev, dtype):
    """The router and every expert's weights, the same on every rank (one seed), and this rank's tokens."""
    n, h, f = cfg["experts"], cfg["hidden"], cfg["ffn"]
    torch.manual_seed(0)
    router = torch.randn(n, h, device=dev) / h**0.5
    w1, w3 = (torch.randn(n, h, f, device=dev, dtype=dtype) / h**0.5 for _ in range(2))
    w2 = torch.randn(n, f, h, device=dev, dtype=dtype) / f**0.5
    torch.manual_seed(1 + rank)
    return router, w1, w3, w2, torch.randn(cfg["tokens_per_rank"], h, device=dev, dtype=dtype)


def run_rank(rank, world, small):
    """One rank: the seeded weights (the same on every rank) and its own tokens, warm-up, the timed
    steps, and the check against the reference; the process group set up when world > 1."""
    cfg, cuda = SMALL if small else FULL, torch.cuda.is_available()
    dev, dtype = (torch.device("cuda", rank), torch.bfloat16) if cuda else (torch.device("cpu"), torch.float32)
    if world > 1:
        if cuda:
            torch.cuda.set_device(dev)
        else:
            torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // world))  # the ranks share the cores
        backend, bound = ("nccl", dev) if cuda else ("gloo", None)  # rendezvous: MASTER_ADDR and _PORT
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(minutes=5), device_id=bound)
    router, w1, w3, w2, x = make_inputs(rank, cfg, dev, dtype)
    for weight in (router, w1, w3, w2) if world > 1 else ():
        dist.broadcast(weight, src=0)  # rank 0's: one seed gives the same numbers only on identical devices
    n, k = cfg["experts"], cfg["top_k"]
    mine = slice(rank * n // world, (rank + 1) * n // world)

    def step(mark=lambda phase: None):
        return moe_layer(x, router, w1[mine], w3[mine], w2[mine], k, world, mark)

    for _ in range(cfg["warmup"]):
        step()
    syncs = sync_calls(step) if cuda else None  # no such mode on the CPU
    samples = []
    for _ in range(cfg["steps"]):
        if world > 1:
            dist.barrier()  # every rank starts the step together (NCCL's barrier blocks the host too)
        clock = PhaseClock(cuda)
        out, sent, received = step(clock.mark)
        if cuda:
            torch.cuda.synchronize()
        samples.append(clock.phases_us())
    error = (out.float() - reference_moe(x, router, w1, w3, w2, k).float()).abs().max().item()
    if world > 1:
        dist.destroy_process_group()
    return {
        "rank": rank,
        "phases_us": {phase: [s[phase] for s in samples] for phase in samples[0]},
        "rows_to": sent,
        "rows_from": received,
        "max_abs_error": error,
        "output_max_abs": out.float().abs().max().item(),
        "sync_calls": syncs,
    }


# --8<-- [end:rank]


# --8<-- [start:launch]
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # the OS picks a free port
        return s.getsockname()[1]


def launch(world, small, timeout_s=600):
    """run_rank on each of `world` ranks: what each returned, in rank order. A rank is a fresh process
    running this file with torchrun's environment variables; not multiprocessing's spawn, which
    re-imports a function by its module's name, one that a snippet loaded from a path does not have."""
    if world == 1:
        return [run_rank(0, 1, small)]  # the baseline: every expert here, no process group
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
        procs = []
        for rank in range(world):
            ranked = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), EP_SMALL=str(int(small)), EP_OUT=f"{tmp}/{rank}")
            with open(f"{tmp}/{rank}.log", "w") as log:
                procs.append(subprocess.Popen([sys.executable, SCRIPT], env=ranked, stdout=log, stderr=log))
        deadline = time.monotonic() + timeout_s
        try:  # a rank that fails leaves the others waiting in a collective: stop them all
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                if any(p.poll() not in (None, 0) for p in procs):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        failed = sorted((p.returncode == -9, rank) for rank, p in enumerate(procs) if p.returncode != 0)
        if failed:  # the rank that failed of itself first, then those stopped here
            rank, late = failed[0][1], time.monotonic() >= deadline
            with open(f"{tmp}/{rank}.log") as log:
                tail = log.read()[-3000:]
            why = f"timed out after {timeout_s} s" if late else f"exited with {procs[rank].returncode}"
            raise RuntimeError(f"rank {rank} of {world} {why}:\n{tail}")
        ranks = []
        for rank in range(world):
            with open(f"{tmp}/{rank}") as f:
                ranks.append(json.load(f))
        return ranks


# --8<-- [end:launch]


def summarize_world(ranks, cfg, clock, elem_bytes):
    """Every phase per rank, and as the per-step maximum over ranks (a step waits for its slowest rank)
    with its share of the layer; the bytes each rank sends to other ranks, and the bus bandwidth."""
    world, phases, steps = len(ranks), list(ranks[0]["phases_us"]), len(ranks[0]["phases_us"]["route"])
    for r in ranks:
        r["phases_us"]["layer"] = [sum(r["phases_us"][p][i] for p in phases) for i in range(steps)]
    slowest = {p: [max(r["phases_us"][p][i] for r in ranks) for i in range(steps)] for p in [*phases, "layer"]}
    groups = {p: [p] for p in phases}
    if world > 1:
        groups |= {"dispatch_combine": ["dispatch", "combine"]}
        groups |= {"communication": ["count_exchange", "host_sync", "dispatch", "combine"]}
    shares = {
        name: summarize([sum(slowest[p][i] for p in parts) / slowest["layer"][i] for i in range(steps)], "fraction")
        for name, parts in groups.items()
    }
    row_bytes = cfg["hidden"] * elem_bytes
    remote = sum(sum(r["rows_to"]) - r["rows_to"][r["rank"]] for r in ranks) * row_bytes / world
    point = {
        "world": world,
        "experts_per_rank": cfg["experts"] // world,
        "slowest_us": {p: summarize(s, "us", clock, rounds=True) for p, s in slowest.items()},
        "share_of_layer": shares,
        "send_buffer_bytes": cfg["tokens_per_rank"] * cfg["top_k"] * row_bytes,  # every rank's, to itself included
        "remote_bytes_per_rank": remote,  # the mean over ranks of the bytes a dispatch sends to other ranks
        "max_abs_error": max(r["max_abs_error"] for r in ranks),
        "output_max_abs": max(r["output_max_abs"] for r in ranks),
        "rows_conserved": all(sum(r["rows_to"]) == cfg["tokens_per_rank"] * cfg["top_k"] for r in ranks)
        and all(r["rows_from"][s["rank"]] == s["rows_to"][r["rank"]] for r in ranks for s in ranks),
        "sync_calls_per_step": None if ranks[0]["sync_calls"] is None else len(ranks[0]["sync_calls"]),
        "sync_messages": sorted(set(ranks[0]["sync_calls"] or [])),
        "ranks": [
            {
                "rank": r["rank"],
                "rows_to": r["rows_to"],
                "time_us": {p: summarize(s, "us", clock) for p, s in r["phases_us"].items()},
            }
            for r in ranks
        ],
    }
    if world > 1:  # nccl-tests' bus bandwidth for all-to-all: the bytes leaving each rank over the time
        point["bus_GBps"] = {p: rate(point["slowest_us"][p], remote / 1e9, "GB/s") for p in ("dispatch", "combine")}
    return point


def measure(small: bool = False) -> dict:
    cfg, cuda = SMALL if small else FULL, torch.cuda.is_available()
    gpus = torch.cuda.device_count() if cuda else 0
    most = min(gpus, 2 if small else 8) if cuda else 2  # on the CPU: two gloo processes
    worlds = [w for w in (1, 2, 4, 8) if w <= most and cfg["experts"] % w == 0]
    clock, elem_bytes = ("device", 2) if cuda else ("host", 4)
    points = [summarize_world(launch(w, small), cfg, clock, elem_bytes) for w in worlds]
    for p in points:  # bf16 rounding stays far below this; a row sent to the wrong place does not
        if not p["rows_conserved"] or p["max_abs_error"] > 0.05 * p["output_max_abs"]:
            raise RuntimeError(f"world {p['world']}: the layer does not match the reference: {p['max_abs_error']}")
    return {
        "repetitions": cfg["steps"],
        "device": device_name(),
        "gpus_visible": gpus,
        "backend": "nccl" if cuda else "gloo",
        "dtype": "bfloat16" if cuda else "float32",
        **{name: cfg[name] for name in ("tokens_per_rank", "hidden", "ffn", "experts", "top_k", "warmup")},
        "points": points,
        "notes": [
            "times: one CUDA event at each phase boundary of each step on each rank (host clock on the CPU), "
            "the ranks at a barrier before each step; slowest_us: each step's maximum over ranks",
            "host_sync: the .tolist() of the split sizes, from the end of the count exchange to the next event; "
            "after it the GPU waits for the host again, so dispatch includes the time to issue it",
            "experts: the regroup by local expert, three torch._grouped_mm calls, and the ungroup",
            "share_of_layer: per step, the slowest rank's phase time over the slowest rank's layer time",
            "bus_GBps: remote_bytes_per_rank over the slowest rank's dispatch (combine) time; for even splits "
            "this is nccl-tests' all-to-all bus bandwidth, send buffer x (n - 1) / n over the time",
            "sync_calls_per_step: synchronizing CUDA calls torch.cuda.set_sync_debug_mode('warn') saw in one "
            "step on rank 0 (it does not cover torch.distributed); null on the CPU",
        ],
    }


if __name__ == "__main__":
    if "EP_OUT" in os.environ:  # a rank that launch() started
        data = run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["EP_SMALL"] == "1")
        with open(os.environ["EP_OUT"], "w") as f:
            json.dump(data, f)
    else:
        r = measure(small=not torch.cuda.is_available())
        print(f"MoE layer: {r['tokens_per_rank']} tokens per rank, h {r['hidden']}, f {r['ffn']}, ", end="")
        print(f"{r['experts']} experts, top-{r['top_k']}, {r['dtype']}, {r['backend']}, on {r['device']}")
        print("median us of the slowest rank per step; share of the layer; bus GB/s of dispatch")
        cols = ["layer", "route", "permute", "count_exchange", "host_sync", "dispatch", "experts", "combine"]
        head = " ".join(f"{c[:9]:>9}" for c in cols)
        print(f"{'world':>5} {head} {'a2a share':>9} {'GB/s':>7} {'max err':>8}")
        for p in r["points"]:
            t = p["slowest_us"]
            row = " ".join(f"{t[c]['median']:9.1f}" if c in t else f"{'-':>9}" for c in cols)
            share = p["share_of_layer"].get("dispatch_combine", {"median": 0.0})["median"]
            gbps = p.get("bus_GBps", {"dispatch": {"median": 0.0}})["dispatch"]["median"]
            print(f"{p['world']:>5} {row} {share:9.2f} {gbps:7.1f} {p['max_abs_error']:8.1e}")
