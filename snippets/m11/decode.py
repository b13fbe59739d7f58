"""The MoE layer at decode sizes: a few tokens per call, one to a few rows per expert, where the layer
reads most of its experts' weights for a few rows each (from 32 tokens on that read is about half its
time). Per shape (_moe.py: "mixtral", hidden 4096, FFN
14336, 8 experts, top-2; "qwen3", hidden 2048, FFN 768, 128 experts, top-8; bf16) and 1, 8, 32 and
128 tokens (random activations and the random router), the whole layer, router included (gate,
softmax, top-k), then sort-permute, the experts, unpermute, three ways:

- "loop": _moe.experts_loop, one expert at a time: the counts copied to the host (a sync), so it
  cannot be captured in a CUDA graph; eager;
- "torch": _moe.experts_grouped, torch._grouped_mm with the offsets on the device: every shape in the
  layer is fixed by the token count (T k rows, whatever the routing), so the whole layer is captured
  once in a CUDA graph ("torch_graph", replayed) and also run eager ("torch_eager");
- "triton": the same with the course's Triton grouped GEMM (_grouped_gemm.py) at one fixed tile, the
  candidates' smallest row tile (64 rows, of which decode fills one to four; no autotuning, whose
  timing would cost more device time than this whole run), captured ("triton_graph") and eager
  ("triton_eager").

The floor: the weights the call must read, the gate and w13 and w2 of every expert hit by at least
one token (at 128 tokens every expert of both shapes, in practice), at the HBM copy rate. "copy" is
measured in the same rounds: a device-to-device copy of half those bytes (read once, written once:
the weights' bytes of HBM traffic), captured in a CUDA graph like the layer; the bytes are stored, so
a page can also use another copy rate. Clock: gpu_us_each, CUDA events around each call (a graph
replay, or the eager call with its host gaps and its sync), the L2 flushed before every call
(triton.testing.do_bench), every variant of a point in the same 10 interleaved rounds, so ratios are
paired round by round. Also stored: the largest difference of every way's output from an fp32 loop
over the experts and from the bf16 loop, and the CUDA kernels each eager way launches in one call
(torch.profiler, after all timing) at 1 and 128 tokens.

On the CPU (small=True): tiny shapes (_moe.SMALL_SHAPES) in float16, 1 and 8 tokens, the Triton
kernel in its interpreter, torch._grouped_mm's CPU path; no CUDA graphs, so no captured variant,
the copy eager, host times of no meaning. The data says so."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
# isort: split
from _grouped_gemm import TUNED, grouped_mm
from _moe import SHAPES, SMALL_SHAPES, experts_grouped, experts_loop, make_layer, route, timed
from routes import kernels_per_call

from coursekit.bench import device_name, gpu_us_each, rate, summarize

PROCESSES = 1  # one process: every number is a device-side time (CUDA events around each call) or a count
DECODE_TOKENS = [1, 8, 32, 128]  # tokens per layer call: a decode batch
SMALL_DECODE_TOKENS = [1, 8]
ROUNDS = 10
REP_MS = 10  # each round's sample: the median of about 10 ms of calls (do_bench)
WARMUP_MS = 25
KERNEL_COUNT_TOKENS = (1, 128)  # the token counts at which the eager ways' kernels are counted
# The Triton kernel's tile here: the candidates' smallest row tile (on the GPU 64 x 128 x 64, 4 stages,
# 4 warps, 2 programs per SM; on the CPU the interpreter's one tile).
DECODE_CONFIG = min(TUNED, key=lambda c: c.kwargs["BLOCK_M"])
WAYS = ["loop", "torch_eager", "torch_graph", "triton_eager", "triton_graph"]
GRAPHED = ("torch_graph", "triton_graph")  # need CUDA


# --8<-- [start:layer]
def triton_mm(x_sorted, w, offs):
    """The course's grouped GEMM at the decode tile (no autotuning)."""
    return grouped_mm(x_sorted, w, offs, config=DECODE_CONFIG)


def layer_grouped(x, layer, top_k, mm=torch._grouped_mm):
    """The whole layer with a grouped GEMM: router, sort-permute, two grouped GEMMs, unpermute.
    Nothing reaches the host, and every shape is fixed by x's: it can be captured."""
    ids, weights = route(x, layer["gate"], top_k)
    return experts_grouped(x, ids, weights, layer["w13"], layer["w2"], mm=mm)


def layer_loop(x, layer, top_k):
    """The whole layer with the loop over experts: its .tolist() waits for the GPU every call."""
    ids, weights = route(x, layer["gate"], top_k)
    return experts_loop(x, ids, weights, layer["w13"], layer["w2"])


def captured(fn):
    """fn() captured once into a CUDA graph: the returned function replays it and returns the output
    tensor the capture recorded (overwritten by each replay)."""
    side = torch.cuda.Stream()  # warm-up on a side stream, as torch.cuda.graph's documentation has it
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()  # recorded, not run
    return lambda: (graph.replay(), out)[1]


# --8<-- [end:layer]


# --8<-- [start:floor]
def weight_bytes(ids, shape, itemsize) -> dict:
    """The bytes of weights one call must read: the gate, and w13 [h, 2f] and w2 [f, h] of every
    expert at least one token goes to."""
    h, f, experts = shape["hidden"], shape["ffn"], shape["experts"]
    hit = ids.unique().numel()
    per_expert = 3 * h * f * itemsize
    gate = h * experts * itemsize
    return {
        "experts_hit": hit,
        "gate": gate,
        "experts": hit * per_expert,
        "total": gate + hit * per_expert,
        "all_experts": experts * per_expert,
    }


# --8<-- [end:floor]


def paired(a: dict, b: dict, op, unit="x") -> dict:
    """A summary of op(a_i, b_i) over the rounds two variants were timed in together."""
    return summarize([op(x, y) for x, y in zip(a["rounds"], b["rounds"])], unit, a.get("clock"))


def time_point(name, shape, layer, tokens, dev, dtype) -> dict:
    cuda = dev == "cuda"
    k = shape["top_k"]
    torch.manual_seed(tokens)
    x = torch.randn(tokens, shape["hidden"], device=dev, dtype=dtype)
    ids, weights = route(x, layer["gate"], k)
    nbytes = weight_bytes(ids, shape, x.element_size())
    counts = torch.bincount(ids.flatten(), minlength=shape["experts"])
    src = torch.randn(nbytes["total"] // (2 * x.element_size()), device=dev, dtype=dtype)  # half the bytes
    dst = torch.empty_like(src)
    copy_bytes = 2 * src.numel() * src.element_size()  # read plus written

    eager = {
        "loop": lambda: layer_loop(x, layer, k),
        "torch_eager": lambda: layer_grouped(x, layer, k),
        "triton_eager": lambda: layer_grouped(x, layer, k, mm=triton_mm),
        "copy": lambda: dst.copy_(src),
    }
    calls = dict(eager)
    if cuda:
        calls["torch_graph"] = captured(eager["torch_eager"])
        calls["triton_graph"] = captured(eager["triton_eager"])
        calls["copy"] = captured(eager["copy"])  # a weight-sized copy, replayed like the layer
    ways = [w for w in WAYS if w in calls]

    # Agreement: each way's output against an fp32 loop over the experts (the same routing) and the bf16 loop.
    expected = experts_loop(x.float(), ids, weights.float(), layer["w13"].float(), layer["w2"].float())
    outs = {w: calls[w]().float().clone() for w in ways}
    vs_fp32 = {w: (outs[w] - expected).abs().max().item() for w in ways}
    vs_loop = {w: (outs[w] - outs["loop"]).abs().max().item() for w in ways if w != "loop"}
    triton_vs_torch = (outs["triton_eager"] - outs["torch_eager"]).abs().max().item()
    largest = expected.abs().max().item()
    del expected, outs

    times = gpu_us_each(calls, rounds=ROUNDS, warmup_ms=WARMUP_MS, rep_ms=REP_MS) if cuda else timed(calls)
    copy = times["copy"]
    return {
        "shape": name,
        "tokens": tokens,
        "rows": tokens * k,
        "rows_per_expert": {"max": int(counts.max()), "hit_mean": tokens * k / nbytes["experts_hit"]},
        "weight_bytes": nbytes,
        "copy_bytes": copy_bytes,
        "time_us": {w: times[w] for w in [*ways, "copy"]},
        "copy_GBps": rate(copy, copy_bytes / 1e9, "GB/s"),
        # above 1: slower than the copy of the weights' bytes
        "over_copy": {w: paired(times[w], copy, lambda t, c: t / c) for w in ways},
        # above 1: faster than the loop
        "loop_over": {w: paired(times["loop"], times[w], lambda lo, t: lo / t) for w in ways if w != "loop"},
        # above 1: the captured layer is faster than the same layer eager
        "graph_speedup": (
            {
                way: paired(times[f"{way}_eager"], times[f"{way}_graph"], lambda e, g: e / g)
                for way in ("torch", "triton")
            }
            if cuda
            else {}
        ),
        "max_abs_diff_vs_fp32": vs_fp32,
        "max_abs_diff_vs_loop": vs_loop,
        "max_abs_diff_triton_vs_torch": triton_vs_torch,
        "max_abs_reference": largest,
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float16)
    shapes, token_counts = (SMALL_SHAPES, SMALL_DECODE_TOKENS) if small else (SHAPES, DECODE_TOKENS)
    points, kernels = [], []
    for name, shape in shapes.items():
        layer = make_layer(shape, dev, dtype)
        points += [time_point(name, shape, layer, t, dev, dtype) for t in token_counts]
        del layer
        if cuda:
            torch.cuda.empty_cache()
    if cuda:  # last: once the profiler has traced kernels, launches stay slower in the process (m03/modes)
        for name, shape in shapes.items():
            layer = make_layer(shape, dev, dtype)
            for tokens in KERNEL_COUNT_TOKENS:
                x = torch.randn(tokens, shape["hidden"], device=dev, dtype=dtype)
                k = shape["top_k"]
                eager = {
                    "loop": lambda: layer_loop(x, layer, k),
                    "torch_eager": lambda: layer_grouped(x, layer, k),
                    "triton_eager": lambda: layer_grouped(x, layer, k, mm=triton_mm),
                }
                kernels.append({"shape": name, "tokens": tokens} | {w: kernels_per_call(f) for w, f in eager.items()})
            del layer
    cfg = DECODE_CONFIG
    notes = [
        "time_us: device microseconds per layer call (CUDA events around each call, L2 flushed before each); "
        "loop: eager, with its host sync; *_eager: launched from Python; *_graph: one CUDA graph replay",
        "copy: a device-to-device copy of copy_bytes / 2 bytes (copy_bytes of HBM traffic, about "
        "weight_bytes.total), captured and replayed like the layer: the floor of a call that reads its weights once",
        "weight_bytes: gate and every hit expert's w13 and w2 (experts_hit of them); all_experts: every expert's",
        "over_copy: each way's time over the copy's, round by round; loop_over: the loop's time over each way's",
        "max_abs_diff_vs_fp32: each way's output against an fp32 loop over the experts with the same routing; "
        "max_abs_reference: the largest |output| of that loop",
        f"triton: one tile, no autotuning: {cfg.kwargs['BLOCK_M']}x{cfg.kwargs['BLOCK_N']}x{cfg.kwargs['BLOCK_K']}, "
        f"{cfg.num_stages} stages, {cfg.num_warps} warps, {cfg.kwargs['PROGRAMS_PER_SM']} programs per SM",
    ]
    if not cuda:
        notes += [
            "CPU run: no CUDA graphs, so no captured variant (skipped: " + ", ".join(GRAPHED) + "); the copy ran eager",
            "CPU run: the Triton kernel ran in the interpreter, in float16 (its tl.dot mistakes bfloat16); "
            "torch._grouped_mm took its CPU path, a loop of mm over the groups; host times of no meaning",
        ]
    return {
        "repetitions": min(p["time_us"][w]["n"] for p in points for w in p["time_us"]),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "cuda_graphs": cuda,
        "shapes": shapes,
        "tokens": token_counts,
        "ways": [w for w in WAYS if w in points[0]["time_us"]],
        "triton_config": {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages},
        "points": points,
        "kernels_per_call": kernels,
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"MoE layer at decode sizes on {device_name()} ({r['dtype']}): us per call (x the copy of its weights)")
    print(f"{'shape':>8} {'tokens':>6} {'hit':>4} {'MB':>7} {'copy':>7} " + " ".join(f"{w:>17}" for w in r["ways"]))
    for p in r["points"]:
        t = p["time_us"]
        cells = " ".join(f"{t[w]['median']:8.1f} ({p['over_copy'][w]['median']:5.1f}x)" for w in r["ways"])
        hit, mb = p["weight_bytes"]["experts_hit"], p["weight_bytes"]["total"] / 1e6
        print(f"{p['shape']:>8} {p['tokens']:>6} {hit:>4} {mb:7.1f} {t['copy']['median']:7.1f} {cells}")
    for kc in r["kernels_per_call"]:
        print(f"  kernels per call, {kc['shape']} {kc['tokens']} tokens: loop {kc['loop']}, torch {kc['torch_eager']}")
    for note in r["notes"]:
        print("note:", note)
