"""The course's Triton grouped GEMM (_grouped_gemm.py) against torch._grouped_mm, on the two GEMMs of
an MoE layer's experts, and against one dense GEMM of the same size.

For each stated shape (_moe.py: "mixtral", hidden 4096, FFN 14336, 8 experts, top-2; "qwen3", hidden
2048, FFN 768, 128 experts, top-8) and 4,096 and 16,384 tokens: the random router's assignments
sorted by expert give the offsets; x_sorted [T k, hidden] and a [T k, FFN] are random bf16 rows.
The two GEMMs: "w13", x_sorted @ w13[e] ([T k, h] x [h, 2f]: w1 and w3 side by side) and "w2",
a @ w2[e] ([T k, f] x [f, h]), each run three ways: torch._grouped_mm (on an sm90 GPU with bf16
operands, ATen's fast path: a CUTLASS grouped GEMM, aten/src/ATen/native/cuda/GroupMM.cu, its tile
chosen by the average group's size; no sync), the Triton kernel (autotuned over
_grouped_gemm.CONFIGS per M, N, K; the winner and every candidate's autotuning time stored), and
torch.mm on all T k rows with expert 0's weight, the dense GEMM of the same FLOPs (cuBLAS). At 4,096
tokens also with the skewed router (alpha 0.5; the autotuner keeps the random routing's choice, its
key being M, N, K). Device clock: gpu_us_each, all variants of a point in the same interleaved rounds;
TFLOP/s count 2 M N K for M = T k rows. Each output is checked against an fp32 loop over the experts.
torch._grouped_mm also runs with its weights K-major (stored [G, N, K] and passed transposed, as
torchtitan passes them), in the same rounds. The races: both GEMMs of the layer, Triton's time
against torch._grouped_mm's with each weight in the layout that is faster for it at that point,
summed per round.

On the CPU: tiny shapes in float16 (the interpreter's tl.dot mistakes bfloat16), torch._grouped_mm's
CPU path (a loop of mm over the groups), host times of no meaning."""

import math

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
# isort: split
from _grouped_gemm import CONFIGS, TMA_CONFIGS, grouped_mm, grouped_mm_kernel, grouped_mm_tma, grouped_mm_tma_kernel
from _moe import (
    SHAPES,
    SKEW_ALPHA,
    SMALL_SHAPES,
    SMALL_TOKENS,
    TOKENS,
    make_gate,
    route,
    skew_bias,
    sort_by_expert,
    timed,
)

from coursekit.bench import device_name, rate, summarize

PROCESSES = 1  # one process: every number here is a device-side time (CUDA events) or a count
SKEWED_AT = 4096  # tokens at which the skewed router is also timed
# On the CPU, two points: each interpreted launch of the kernel costs a program per tile.
SMALL_POINTS = [("mixtral", SMALL_TOKENS, "random"), ("qwen3", SMALL_TOKENS, "skewed")]


def config_dict(cfg) -> dict:
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def tuned(call, cuda: bool, kernel=grouped_mm_kernel) -> tuple:
    """Run call() once (the autotuner tunes on the first call for a new M, N, K): its output, the choice
    and, if it tuned now, every candidate's time in the autotuner's own timing (None for one that failed
    to compile); a key tuned before (the skewed routing has the random one's M, N, K) reports none."""
    known = len(kernel.cache)
    out = call()
    tuned_now = cuda and len(kernel.cache) > known
    timings = kernel.configs_timings if tuned_now else {}
    return out, {
        "tuned_here": tuned_now,
        "config": config_dict(kernel.best_config),
        "autotune": [
            {**config_dict(cfg), "autotune_ms": ms if math.isfinite(ms) else None}
            for cfg, ms in ((c, t[0] if isinstance(t, list | tuple) else t) for c, t in timings.items())
        ],
    }


def fp32_reference(x_sorted, w, offsets) -> torch.Tensor:
    """Each expert's rows times its weight, one expert at a time, in float32."""
    out, start = torch.zeros(x_sorted.shape[0], w.shape[2], device=x_sorted.device), 0
    for e, end in enumerate(offsets.tolist()):
        out[start:end] = x_sorted[start:end].float() @ w[e].float()
        start = end
    return out


def time_point(name, shape, tokens, router, dev, dtype) -> dict:
    """One shape, token count and router: both GEMMs three ways, timed in the same rounds."""
    cuda = dev == "cuda"
    h, f, experts, k = shape["hidden"], shape["ffn"], shape["experts"], shape["top_k"]
    gate = make_gate(shape, dev, dtype)
    bias = skew_bias(experts, SKEW_ALPHA, dev) if router == "skewed" else None
    ids, _ = route(torch.randn(tokens, h, device=dev, dtype=dtype), gate, k, bias)
    _, offsets = sort_by_expert(ids, experts)
    rows = tokens * k
    x_sorted = torch.randn(rows, h, device=dev, dtype=dtype)
    a = torch.randn(rows, f, device=dev, dtype=dtype)
    w13 = torch.randn(experts, h, 2 * f, device=dev, dtype=dtype).mul_(h**-0.5)
    w2 = torch.randn(experts, f, h, device=dev, dtype=dtype).mul_(f**-0.5)
    counts = offsets.diff(prepend=offsets.new_zeros(1)).double()
    gemms, calls = [], {}
    for gemm, inp, w in (("w13", x_sorted, w13), ("w2", a, w2)):
        # --8<-- [start:calls]
        calls[f"torch_{gemm}"] = lambda inp=inp, w=w: torch._grouped_mm(inp, w, offsets)
        calls[f"triton_{gemm}"] = lambda inp=inp, w=w: grouped_mm(inp, w, offsets)
        calls[f"dense_{gemm}"] = lambda inp=inp, w=w: torch.mm(inp, w[0])  # same FLOPs, one expert's weight
        calls[f"tma_{gemm}"] = lambda inp=inp, w=w: grouped_mm_tma(inp, w, offsets)  # the TMA step, same weights
        # --8<-- [end:calls]
        # the peer's other weight layout: stored [G, N, K] (K contiguous) and passed transposed, as torchtitan does
        wk = w.transpose(-2, -1).contiguous()
        calls[f"torch_kmajor_{gemm}"] = lambda inp=inp, wk=wk: torch._grouped_mm(inp, wk.transpose(-2, -1), offsets)
        _, choice = tuned(calls[f"triton_{gemm}"], cuda)
        _, choice_tma = tuned(calls[f"tma_{gemm}"], cuda, grouped_mm_tma_kernel)
        # each winner alone into a NaN-filled output (while tuning, every candidate wrote the same buffer):
        # an element the winner does not write stays NaN
        nan_out = lambda: torch.full((rows, w.shape[2]), float("nan"), device=dev, dtype=dtype)
        ours, ours_tma = grouped_mm(inp, w, offsets, out=nan_out()), grouped_mm_tma(inp, w, offsets, out=nan_out())
        expected, theirs = fp32_reference(inp, w, offsets), calls[f"torch_{gemm}"]()
        theirs_k = calls[f"torch_kmajor_{gemm}"]()
        gemms.append(
            {
                "gemm": gemm,
                "M": rows,
                "N": w.shape[2],
                "K": w.shape[1],
                "flops": 2 * rows * w.shape[1] * w.shape[2],
                "triton_config": choice["config"],
                "tuned_here": choice["tuned_here"],
                "autotune": choice["autotune"],
                "tma_config": choice_tma["config"],
                "tma_tuned_here": choice_tma["tuned_here"],
                "tma_autotune": choice_tma["autotune"],
                "triton_all_written": not ours.isnan().any().item(),
                "tma_all_written": not ours_tma.isnan().any().item(),
                "max_abs_diff_tma_vs_fp32": (ours_tma.float() - expected).abs().max().item(),
                "max_abs_diff_tma_vs_torch": (ours_tma.float() - theirs.float()).abs().max().item(),
                "max_abs_diff_triton_vs_fp32": (ours.float() - expected).abs().max().item(),
                "max_abs_diff_torch_vs_fp32": (theirs.float() - expected).abs().max().item(),
                "max_abs_diff_triton_vs_torch": (ours.float() - theirs.float()).abs().max().item(),
                "max_abs_diff_torch_kmajor_vs_fp32": (theirs_k.float() - expected).abs().max().item(),
                "max_abs_diff_triton_vs_torch_kmajor": (ours.float() - theirs_k.float()).abs().max().item(),
                "max_abs_fp32": expected.abs().max().item(),
            }
        )
        del expected, ours, ours_tma, theirs, theirs_k
    times = timed(calls)
    for g in gemms:
        for way in ("torch", "torch_kmajor", "triton", "tma", "dense"):
            t = times[f"{way}_{g['gemm']}"]
            g[way] = {"time_us": t, "TFLOPs": rate(t, g["flops"] / 1e12, "TFLOP/s")}
        # torch._grouped_mm's time over Triton's, round by round: above 1, Triton is faster
        g["triton_vs_torch"] = summarize(
            [t / o for t, o in zip(g["torch"]["time_us"]["rounds"], g["triton"]["time_us"]["rounds"])], "x"
        )
        g["grouped_vs_dense"] = {
            way: summarize([d / t for d, t in zip(g["dense"]["time_us"]["rounds"], g[way]["time_us"]["rounds"])], "x")
            for way in ("torch", "triton")
        }
    both = {  # the layer's two GEMMs, summed within each round
        way: summarize(
            [a + b for a, b in zip(times[f"{way}_w13"]["rounds"], times[f"{way}_w2"]["rounds"])],
            "us",
            times[f"{way}_w13"].get("clock"),
            rounds=True,
        )
        for way in ("torch", "torch_kmajor", "triton", "tma", "dense")
    }
    # the peer at its best here: the weight layout whose layer time has the lower median
    best = min(("torch", "torch_kmajor"), key=lambda way: both[way]["median"])
    # and per GEMM: each weight in its own faster layout (a layout is chosen per weight tensor), summed per round
    per_gemm = {g["gemm"]: min(("torch", "torch_kmajor"), key=lambda way: g[way]["time_us"]["median"]) for g in gemms}
    both["torch_best"] = summarize(
        [a + b for a, b in zip(times[f"{per_gemm['w13']}_w13"]["rounds"], times[f"{per_gemm['w2']}_w2"]["rounds"])],
        "us",
        times["torch_w13"].get("clock"),
        rounds=True,
    )
    return {
        "shape": name,
        "tokens": tokens,
        "router": router,
        "rows": rows,
        "experts": experts,
        "rows_per_expert": {
            "max": int(counts.max()),
            "mean": counts.mean().item(),
            "min": int(counts.min()),
            "empty": int((counts == 0).sum()),
        },
        "gemms": gemms,
        "layer_us": both,
        "layer_triton_vs_torch": summarize(
            [t / o for t, o in zip(both["torch"]["rounds"], both["triton"]["rounds"])], "x"
        ),
        "layer_triton_vs_torch_kmajor": summarize(
            [t / o for t, o in zip(both["torch_kmajor"]["rounds"], both["triton"]["rounds"])], "x"
        ),
        "peer_best_layout": "K-major" if best == "torch_kmajor" else "N-major",
        "peer_layout_per_gemm": {
            gemm: "K-major" if way == "torch_kmajor" else "N-major" for gemm, way in per_gemm.items()
        },
        "layer_triton_vs_torch_best": summarize(
            [t / o for t, o in zip(both["torch_best"]["rounds"], both["triton"]["rounds"])], "x"
        ),
        "layer_tma_vs_torch_best": summarize(
            [t / o for t, o in zip(both["torch_best"]["rounds"], both["tma"]["rounds"])], "x"
        ),
        "layer_tma_vs_triton": summarize([t / o for t, o in zip(both["triton"]["rounds"], both["tma"]["rounds"])], "x"),
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float16)
    shapes = SMALL_SHAPES if small else SHAPES
    plan = SMALL_POINTS if small else [(n, t, "random") for n in SHAPES for t in TOKENS]
    plan += [] if small else [(n, SKEWED_AT, "skewed") for n in SHAPES]
    notes = []
    if not cuda:
        notes += [
            "CPU run: the Triton kernel ran in the interpreter, in float16 (its tl.dot mistakes bfloat16)",
            "CPU run: torch._grouped_mm took its CPU path, a loop of mm over the groups",
            "CPU run: the autotuner had one candidate (nothing to time it on); the Triton calls were timed apart, "
            "three each (_moe.timed)",
        ]
    points = [time_point(name, shapes[name], tokens, router, dev, dtype) for name, tokens, router in plan]
    races = [  # the scoreboard's rows (coursekit/scoreboard.py): both GEMMs of the layer, random router
        {
            "name": f"Triton grouped GEMM (TMA), {p['shape']}-like experts, {p['tokens']} tokens (w13 and w2)",
            "peer": "torch._grouped_mm, each weight in its faster layout here (w13 {w13}, w2 {w2})".format(
                **p["peer_layout_per_gemm"]
            ),
            "ours": p["layer_us"]["tma"],
            "theirs": p["layer_us"]["torch_best"],
            "bar": 0.95,
            "chapter": "part-m/11-moe.md",
        }
        for p in points
        if p["router"] == "random"
    ]
    return {
        "repetitions": min(
            g[w]["time_us"]["n"] for p in points for g in p["gemms"] for w in ("torch", "triton", "tma")
        ),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shapes": shapes,
        "skew_alpha": SKEW_ALPHA,
        "candidates": [config_dict(c) for c in CONFIGS],
        "tma_candidates": [config_dict(c) for c in TMA_CONFIGS],
        "points": points,
        "notes": notes,
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"grouped GEMMs on {device_name()} ({r['dtype']}): TFLOP/s (2 M N K, M = tokens x top-k)")
    head = f"{'shape':>8} {'tokens':>6} {'router':>7} {'gemm':>4} {'torch':>8} {'triton':>8} {'dense':>8}"
    print(f"{head} {'tri/tor':>7}  config")
    for p in r["points"]:
        for g in p["gemms"]:
            c = g["triton_config"]
            print(
                f"{p['shape']:>8} {p['tokens']:>6} {p['router']:>7} {g['gemm']:>4} "
                + " ".join(f"{g[w]['TFLOPs']['median']:8.1f}" for w in ("torch", "triton", "dense"))
                + f" {g['triton_vs_torch']['median']:6.2f}x  {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']}"
                f" s{c['num_stages']} w{c['num_warps']} {c['PROGRAMS_PER_SM']} per SM"
            )
    for note in r["notes"]:
        print(f"  note: {note}")
