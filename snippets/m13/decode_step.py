"""The decision procedure applied to one decode step of the module's model (_model.py: 8 layers,
d_model 1,024, about 168 M parameters, bf16) at batch 1 and 16: one new token per sequence, the keys
and values written into the static KV cache (1,024 positions) at a position held in a device tensor.
A step reads about 300 MB of weights (all but the two embedding tables), under 0.1 ms at the H200's
bandwidth, in about a hundred kernels: the procedure predicts launches, not the GPU, bind.

1. Profile (train_step.profile_steps): device-busy time against the first-to-last-kernel span over
   back-to-back steps (the idle share: the GPU waiting for the host), kernels per step, time by class.
2. The choices: eager; torch.compile(model) (default mode: fewer, fused kernels, still launched one
   by one from Python); mode="reduce-overhead" (CUDA graph trees); the eager step captured by hand
   with torch.cuda.graph; the default-mode compiled step captured by hand. Clock: host wall time per
   step, back to back, device synchronized at both ends, every variant in the same interleaved
   rounds (bench.host_us_rounds); tokens/s = batch / step time. Each step is the forward, then two
   small eager ops every variant shares: the greedy token copied into the input, the position
   advanced (a ring over the cache's 1,024 slots; the mask hides slots not yet written).
Also stored: the first call's seconds (compile; cold in the build's first process, from Inductor's
caches in the others), the logits of each variant over 8 teacher-forced steps against eager's, and
eager's decode against a full forward over the same tokens (the static cache is right).

On the CPU (small=True): d_model 32, 2 layers, batch 1, float32; torch.compile(backend="eager")
(Dynamo only: no Inductor, whose C++ compile would take longer than the test budget); no CUDA
graphs, so no reduce-overhead and no captures; host times, no kernels. The data says so."""

# --8<-- [start:imports]
import time

import torch
from _model import CPU, GPU, build, params
from train_step import profile_steps, summarize_profiles  # the profile (train_step.py)

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_rounds, rate, summarize

PROCESSES = 3  # host-bound at batch 1 and 16: three fresh processes give the run-to-run spread
BATCHES = [1, 16]
CHECK_STEPS = 8  # teacher-forced steps over which each variant's logits are compared with eager's
GRAPHED = ("reduce-overhead", "graph", "compiled+graph")  # need CUDA


# --8<-- [start:graph]
def graphed(fn):
    """fn() captured once into a CUDA graph: replay() reruns its kernels on the same memory."""
    side = torch.cuda.Stream()  # warm up on a side stream (torch.cuda.graph's docs): lazy set-up stays out
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()  # recorded, not run
    return lambda: (graph.replay(), out)[1]


# --8<-- [end:graph]


# --8<-- [start:variants]
def variants(model, token, pos, cuda: bool) -> tuple[dict, dict]:
    """name -> a function returning the logits of one forward on the current token and pos."""
    runs, first_call_s = {"eager": lambda: model(token, pos)}, {}
    compiled = torch.compile(model, **({"fullgraph": True} if cuda else {"backend": "eager"}))
    graphs = torch.compile(model, mode="reduce-overhead", fullgraph=True) if cuda else None
    for name, fn in (("default", compiled), ("reduce-overhead", graphs)):
        if fn is None:
            continue
        start = time.perf_counter()  # a one-off event: perf_counter (bench times repeated calls)
        fn(token, pos)
        sync()
        first_call_s[name] = summarize([time.perf_counter() - start], "s", "host")
        runs[name] = lambda fn=fn: fn(token, pos)
    if cuda:
        runs["graph"] = graphed(lambda: model(token, pos))  # reads token and pos from their memory at replay
        runs["compiled+graph"] = graphed(lambda: compiled(token, pos))
    return runs, first_call_s


def step(run, token, pos, max_len: int):
    """One decode step: the forward, the greedy next token fed back, the position advanced."""
    logits = run()
    token.copy_(logits[:, -1].argmax(-1, keepdim=True))
    pos.add_(1).remainder_(max_len)


# --8<-- [end:variants]


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def teacher_forced(run, token, pos, tokens) -> torch.Tensor:
    """Logits at each step from position 0, feeding tokens[:, t] at step t."""
    pos.zero_()
    out = []
    for t in range(tokens.shape[1]):
        token.copy_(tokens[:, t : t + 1])
        out.append(run()[:, -1].float().clone())
        pos.add_(1)
    return torch.stack(out, 1)


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg, batches = (GPU, BATCHES) if cuda and not small else (CPU, [1])
    calls, repeats, profiles, profiled_steps = (50, 20, 3, 20) if cuda else (3, 3, 1, 2)
    if not cuda:
        torch.set_num_threads(1)  # steady host timings on a small machine
    model = build(cfg, dev, dtype).eval()
    points = []
    with torch.no_grad():
        for batch in batches:
            torch._dynamo.reset()  # one compile per batch size
            model.setup_cache(batch)
            token = torch.zeros(batch, 1, dtype=torch.long, device=dev)
            pos = torch.zeros(1, dtype=torch.long, device=dev)
            runs, first_call_s = variants(model, token, pos, cuda)
            tokens = torch.randint(cfg.vocab, (batch, CHECK_STEPS), device=dev)
            logits = {name: teacher_forced(run, token, pos, tokens) for name, run in runs.items()}
            full = model(tokens)[:, :CHECK_STEPS].float()  # no cache: the whole prefix at once
            pos.zero_()
            raw = host_us_rounds(
                {n: (lambda r=r: step(r, token, pos, cfg.max_len), torch.no_grad) for n, r in runs.items()},
                calls=calls,
                repeats=repeats,
                warmup=calls,
            )["host_us"]
            profiled = {  # last: once CUPTI has traced kernels, launches stay slower in this process
                n: summarize_profiles(
                    [
                        profile_steps(lambda r=r: step(r, token, pos, cfg.max_len), profiled_steps)
                        for _ in range(profiles)
                    ]
                )
                for n, r in runs.items()
            }
            points.append(
                {
                    "batch": batch,
                    "variants": {
                        n: {
                            "step_us": summarize(raw[n], "us", "host", rounds=True),
                            "tokens_per_s": rate(summarize(raw[n], "us", "host"), batch, "tokens/s"),
                            "speedup_over_eager": summarize([e / t for e, t in zip(raw["eager"], raw[n])], "x", "host"),
                            "max_abs_logit_diff": (logits[n] - logits["eager"]).abs().max().item(),
                            "same_greedy_tokens": torch.equal(logits[n].argmax(-1), logits["eager"].argmax(-1)),
                            "profile": profiled[n],
                            **({"first_call_s": first_call_s[n]} if n in first_call_s else {}),
                        }
                        for n in runs
                    },
                    "cache_vs_full_forward_max_abs_diff": (logits["eager"] - full).abs().max().item(),
                    "max_abs_logit": full.abs().max().item(),
                    "kv_cache_bytes": model.kv.numel() * model.kv.element_size(),
                }
            )
            del runs
            torch._dynamo.reset()
    step_weights = params(model) - model.embed.weight.numel() - model.pos_embed.weight.numel()  # tables: a row each
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "config": dict(cfg.__dict__),
        "params": params(model),
        "step_weight_bytes": step_weights * torch.finfo(dtype).bits // 8,
        "check_steps": CHECK_STEPS,
        "profiled_steps": profiles * profiled_steps,
        "points": points,
        "notes": [
            "first_call_s: cold in the build's first process; later processes compile from Inductor's caches",
            "reduce-overhead's first call compiles and runs the trees' warm-up; the recording is on its second",
        ]
        + (
            []
            if cuda
            else [f"CPU run: torch.compile(backend='eager'), no Inductor; skipped (need CUDA): {', '.join(GRAPHED)}"]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    c = r["config"]
    print(f"decode step: {c['layers']} layers, d {c['d']}, {r['params'] / 1e6:.1f} M parameters, {r['dtype']},")
    print(f"  KV cache {c['max_len']} positions, on {device_name()}")
    print(f"{'batch':>5} {'variant':>16} {'us/step':>9} {'tokens/s':>9} {'speedup':>8} {'kernels':>8} {'idle':>5}")
    for p in r["points"]:
        for n, v in p["variants"].items():
            print(
                f"{p['batch']:>5} {n:>16} {v['step_us']['median']:9.1f} {v['tokens_per_s']['median']:9.0f}"
                f" {v['speedup_over_eager']['median']:7.2f}x {v['profile']['kernels_per_step']:8.0f}"
                f" {v['profile']['idle_share']['median']:5.2f}"
            )
        print(f"      cached decode against a full forward: max |diff| {p['cache_vs_full_forward_max_abs_diff']:.2e}")
    for note in r["notes"]:
        print("note:", note)
