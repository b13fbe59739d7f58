"""The decision procedure applied to one training step of the module's model (_model.py: 8 layers,
d_model 1,024, about 168 M parameters, bf16): forward, mean cross-entropy, backward, AdamW (foreach),
grads set to None. Batch 8 x 1,024 tokens: about 8 TFLOP a step, enough that the GPU, not the host,
binds (the procedure's first question, answered by the profile).

1. Profile (torch.profiler, CUDA activity): per step, the device-busy time (the union of kernel
   intervals) against the span from the first kernel's start to the last one's end over several
   back-to-back steps (the span's idle part is where the GPU waited for the host), and the kernel
   time by class (classify(): GEMM, attention, optimizer, memory-bound, other), the top kernels with
   their names verbatim and every name no class matched.
2. The choices, timed in the same interleaved rounds (bench.gpu_us_each: CUDA events, median of a
   short do_bench per round): eager; torch.compile(model) (default mode); that plus the optimizer
   step compiled; mode="reduce-overhead" (CUDA graphs on a GPU-bound step: the procedure predicts
   they buy nothing and cost memory). For each: the first call's seconds (compile, cold: the process
   runs in a fresh Inductor cache, torch._inductor.utils.fresh_cache), the steady peak of allocated
   memory above what is held between steps, the memory the variant leaves reserved after empty_cache
   (a CUDA graph's private pool stays), and the same profile after the timing (CUPTI slows later
   launches).

On the CPU (small=True): the model at d_model 32, 2 layers, batch 2 x 16 tokens, float32;
torch.compile with backend="eager" (Dynamo captures the graphs, nothing compiles them: no AOTAutograd, no
Inductor: its C++ compile would take longer than the test budget); no reduce-overhead; no kernels
in the profile. The data says so."""

# --8<-- [start:imports]
import gc
import time

import torch
from _model import CPU, GPU, build, params
from torch._inductor.utils import fresh_cache
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, rate, summarize

PROCESSES = 1  # GPU-bound: device times (CUDA events) and one cold compile per variant; no host timing
BATCH, SEQ = 8, 1024
MODES = ["eager", "default", "default+optimizer", "reduce-overhead"]
CUDA_ONLY = ("reduce-overhead", "max-autotune-no-cudagraphs")

# --8<-- [start:classify]
CLASSES = {  # kernel-name patterns, lower case; the first class that matches wins
    "optimizer": ("multi_tensor_apply", "foreach", "triton_for_", "adam"),
    "attention": ("flash", "fmha", "attention", "cudnn"),
    "gemm": ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "splitk", "triton_tem"),
    "memory_bound": (
        *("elementwise", "reduce", "triton_poi", "triton_red", "triton_per", "softmax", "norm", "nll_loss"),
        *("index", "copy", "memcpy", "memset", "fill", "cat", "embedding", "gather", "scatter", "segment"),
    ),
}


def classify(name: str) -> str:
    """GEMM and attention are compute-bound library kernels; the memory-bound rest is what fusion
    shrinks; "other" is what no pattern knows (stored by name, so nothing is hidden)."""
    lower = name.lower()
    return next((c for c, patterns in CLASSES.items() if any(p in lower for p in patterns)), "other")


# --8<-- [end:classify]


# --8<-- [start:profile]
def profile_steps(step, steps: int) -> dict:
    """steps back-to-back calls of step() under the profiler: per step, device-busy time, the
    first-kernel-to-last-kernel span, kernel time by class, launches; kernels by name."""
    cuda = torch.cuda.is_available()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    busy, end = 0.0, float("-inf")  # the union of kernel intervals: overlapping kernels count once
    for e in kernels:
        start, stop = max(e.time_range.start, end), e.time_range.end
        busy, end = busy + max(0.0, stop - start), max(end, stop)
    span = kernels[-1].time_range.end - kernels[0].time_range.start if kernels else 0.0
    by_name = {}
    for e in kernels:
        us, calls = by_name.get(e.name, (0.0, 0))
        by_name[e.name] = (us + e.time_range.elapsed_us() / steps, calls + 1)
    by_class = {c: 0.0 for c in [*CLASSES, "other"]}
    for name, (us, _) in by_name.items():
        by_class[classify(name)] += us
    return {
        "busy_us": busy / steps,
        "span_us": span / steps,
        "kernels_per_step": len(kernels) / steps,
        "class_us": by_class,
        "by_name": {name: (us, calls / steps) for name, (us, calls) in by_name.items()},
    }


# --8<-- [end:profile]


def summarize_profiles(profiles: list[dict], top: int = 8) -> dict:
    """One summary per quantity over the repeated profiles; the last profile's kernels by name."""
    last = profiles[-1]["by_name"]
    ranked = sorted(last.items(), key=lambda kv: -kv[1][0])
    row = lambda name, us, calls: {"name": name, "class": classify(name), "us_per_step": us, "per_step": calls}
    return {
        "busy_us": summarize([p["busy_us"] for p in profiles], "us", "device"),
        "span_us": summarize([p["span_us"] for p in profiles], "us", "device"),
        "idle_share": summarize([1 - p["busy_us"] / p["span_us"] if p["span_us"] else 0.0 for p in profiles], ""),
        "class_us": {
            c: summarize([p["class_us"][c] for p in profiles], "us", "device") for c in profiles[0]["class_us"]
        },
        "kernels_per_step": profiles[-1]["kernels_per_step"],
        "top_kernels": [row(name, us, calls) for name, (us, calls) in ranked[:top]],
        "unmatched": [row(name, us, calls) for name, (us, calls) in ranked if classify(name) == "other"],
    }


# --8<-- [start:choices]
def make_step(model, x, y, mode: str, cuda: bool):
    """One training step as `mode` runs it, with its own AdamW (state made on its first step).
    Compiled variants compile on their first call."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    compile_mode = "default" if mode == "default+optimizer" else mode
    options = {"mode": compile_mode} if cuda else {"backend": "eager"}  # CPU: Dynamo only (see docstring)
    forward = model if mode == "eager" else torch.compile(model, **options)
    # the optimizer compiled before its first step, as PyTorch's tutorial does: its state is then made
    # inside the compiled code, on the GPU (Dynamo sets capturable=True for an uninitialised CUDA optimizer)
    opt_step = torch.compile(opt.step, **options) if mode == "default+optimizer" else opt.step

    def step():
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()  # a new iteration: earlier graph outputs may be overwritten
        loss = forward(x, targets=y)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)

    return step


# --8<-- [end:choices]


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_procedure(modes: list[str], small: bool) -> dict:
    """Build the model and the optimizer, then every mode: first call, memory, interleaved timing, profile."""
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg, batch, seq = (GPU, BATCH, SEQ) if cuda and not small else (CPU, 2, 16)
    modes = [m for m in modes if cuda or m not in CUDA_ONLY]
    rounds, profiles, profiled_steps = (10, 3, 4) if cuda else (3, 1, 2)
    if not cuda:
        torch.set_num_threads(1)  # steady host timings on a small machine
    model = build(cfg, dev, dtype)
    x = torch.randint(cfg.vocab, (batch, seq), device=dev)
    y = torch.roll(x, -1, dims=1)  # next-token targets (random tokens: the loss stays near ln(vocab))
    steps, facts = {}, {}
    with fresh_cache():  # cold compiles in every process
        for mode in modes:
            step = make_step(model, x, y, mode, cuda)
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
                reserved_before = torch.cuda.memory_reserved()
            sync()
            start = time.perf_counter()  # a one-off event: perf_counter (bench times repeated calls)
            step()
            sync()
            first_s = time.perf_counter() - start
            for _ in range(3):
                step()  # warm-up (reduce-overhead: its warm-up run, then the recording)
            sync()
            facts[mode] = {"first_call_s": summarize([first_s], "s", "host")}
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                held = torch.cuda.memory_allocated()  # weights, every mode's AdamW state (grads are None)
                step(), step()
                sync()
                facts[mode]["step_peak_bytes"] = torch.cuda.max_memory_allocated() - held
                gc.collect()
                torch.cuda.empty_cache()
                facts[mode]["reserved_kept_bytes"] = torch.cuda.memory_reserved() - reserved_before
            steps[mode] = step
        times = gpu_us_each(steps, rounds=rounds, warmup_ms=200, rep_ms=150)
        for mode, step in steps.items():  # profiled last: once CUPTI has traced kernels, launches stay slower
            facts[mode]["profile"] = summarize_profiles([profile_steps(step, profiled_steps) for _ in range(profiles)])
        torch._dynamo.reset()
    tokens = batch * seq
    return {
        "repetitions": rounds,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "config": {**cfg.__dict__, "batch": batch, "seq": seq},
        "params": params(model),
        "step_flops_approx": 6 * params(model) * tokens,  # 2 forward + 4 backward per weight per token
        "modes": modes,
        "profiled_steps": profiles * profiled_steps,
        "points": [
            {
                "mode": mode,
                "step_us": times[mode],
                "tokens_per_s": rate(times[mode], tokens, "tokens/s"),
                "speedup_over_eager": summarize(
                    [e / t for e, t in zip(times["eager"]["rounds"], times[mode]["rounds"])], "x"
                ),
                **facts[mode],
            }
            for mode in modes
        ],
        "notes": [
            "first_call_s: one cold sample per mode, in a fresh Inductor cache; later modes reuse what the "
            "earlier ones compiled in this process where their graphs agree",
            "step_peak_bytes: torch.cuda.max_memory_allocated over two steady steps less what was allocated "
            "before them (weights, AdamW states): activations, grads, temporaries; a CUDA graph's "
            "intermediates live in its private pool and do not count as allocated at replay. "
            "reserved_kept_bytes: memory_reserved after empty_cache, less before the mode's first call: "
            "its AdamW state (2 bf16 tensors per weight) plus what stays reserved (a private pool)",
        ]
        + (
            []
            if cuda
            else [
                "CPU run: torch.compile(backend='eager'): Dynamo only, no AOTAutograd, no Inductor, "
                "no CUDA graphs, no kernels"
            ]
        ),
    }


def measure(small: bool = False) -> dict:
    return run_procedure(MODES, small)


def report(r: dict) -> None:
    c = r["config"]
    print(f"training step: {c['layers']} layers, d {c['d']}, batch {c['batch']} x {c['seq']}, {r['dtype']},")
    print(f"  {r['params'] / 1e6:.1f} M parameters, on {device_name()}")
    print(f"{'mode':>28} {'ms/step':>8} {'speedup':>8} {'first s':>8} {'idle':>6}  us by class")
    for p in r["points"]:
        prof = p["profile"]
        classes = " ".join(f"{k} {v['median']:.0f}" for k, v in prof["class_us"].items())
        print(
            f"{p['mode']:>28} {p['step_us']['median'] / 1e3:8.2f} {p['speedup_over_eager']['median']:7.2f}x"
            f" {p['first_call_s']['median']:8.1f} {prof['idle_share']['median']:6.2f}  {classes}"
        )
    for note in r["notes"]:
        print("note:", note)


if __name__ == "__main__":
    report(measure(small=not torch.cuda.is_available()))
