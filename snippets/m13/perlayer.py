"""The decode step of decode_step.py with gpt-fast's cache layout (_perlayer.py): each of the 8 layers
owns its k and v buffers, written in place with index_copy_ at a position held in a device tensor,
instead of a view of one stacked cache. Same model, same weights, batch 1 and 16, same clock.

Variants: eager; torch.compile(model) (default mode); the eager step captured by hand in a CUDA graph
(decode_step.graphed); the default-mode compiled step captured by hand (REDUCE_OVERHEAD adds
mode="reduce-overhead"; off, to keep the compiles few). Clock: decode_step's, host wall time per step
(the forward, the greedy token fed back, the position advanced: decode_step.step), every variant in
the same interleaved rounds (bench.host_us_rounds); then each variant's profile (train_step.profile_steps:
kernels per step, busy time, top kernels).

Whether anything still rewrites a whole cache: Inductor's generated code for the default-mode step
(GraphLowering.save_output_code, which also sees code loaded from the FX graph cache): the buffers it
allocates of at least one layer's k (or v) buffer, the Triton launches whose range (the product of
their static x/y/z numels) covers that many elements, and mentions of select_scatter. On the CPU,
where nothing reaches Inductor, the graph AOTAutograd would hand it instead (functionalized_ops),
for this layout and _model.py's stacked one.
Also stored: the first call's seconds, each variant's logits over 8 teacher-forced steps against the
per-layer eager step's, and the per-layer eager step's against _model.py's stacked-cache eager step.

On the CPU (small=True): d_model 32, 2 layers, batch 1, float32; torch.compile(backend="eager") (Dynamo
only, no Inductor: no generated code); no CUDA graphs, so no captures; host times, no kernels. The
data says so."""

import math
import re
import time
from collections import Counter
from unittest import mock

import torch
from _model import CPU, GPU
from _perlayer import build_perlayer, cache_bytes
from decode_step import CHECK_STEPS, graphed, step, sync, teacher_forced
from torch._functorch.aot_autograd import aot_module_simplified
from torch._inductor.graph import GraphLowering
from train_step import profile_steps, summarize_profiles

from coursekit.bench import device_name, host_us_rounds, rate, summarize

PROCESSES = 2  # host-bound: two fresh processes give the run-to-run spread (the 2nd compiles from caches)
BATCHES = [1, 16]
REDUCE_OVERHEAD = False  # one more compile per batch (several seconds cold on the H200)
GRAPHED = ("graph", "compiled+graph") + (("reduce-overhead",) if REDUCE_OVERHEAD else ())  # need CUDA


def functionalized_ops(model, token, pos, layer_cache_numel: int) -> dict:
    """Dynamo + AOTAutograd on one decode step, then the forward graph Inductor would get, counted
    (Inductor never sees it: the graph module itself runs once)."""
    seen = {}

    def count(gm, example_inputs):
        def fw(g, _):
            calls = [n for n in g.graph.nodes if n.op == "call_function"]
            written = [
                n
                for n in calls
                if isinstance(n.meta.get("val"), torch.Tensor) and not getattr(n.target, "is_view", False)
            ]
            seen.update(
                select_scatter=sum("select_scatter" in n.target.__name__ for n in calls),
                index_copy=sum("index_copy" in n.target.__name__ for n in calls),
                cache_sized_outputs=dict(  # new tensors (not views) of at least one layer's k buffer
                    Counter(n.target.__name__ for n in written if n.meta["val"].numel() >= layer_cache_numel)
                ),
                larger_than_a_layer=sum(n.meta["val"].numel() > layer_cache_numel for n in written),
            )
            return g

        return aot_module_simplified(gm, example_inputs, fw_compiler=fw)

    torch._dynamo.reset()
    torch.compile(model, backend=count, fullgraph=True)(token, pos)
    torch._dynamo.reset()
    return seen


def scan_code(codes: list[str], layer_cache_numel: int) -> dict:
    """Inductor's generated wrapper(s) for one step: what in them is as large as one layer's k buffer.
    A kernel's range is the product of its static x/y/z numels (the elements its programs cover)."""
    shapes = [tuple(int(s) for s in m.split(",") if s.strip()) for c in codes for m in ALLOC.findall(c)]
    ranges = {name: math.prod(int(n) for n in RANGE.findall(body)) for c in codes for name, body in KERNEL.findall(c)}
    launches = [name for c in codes for name in LAUNCH.findall(c)]
    big = [s for s in shapes if math.prod(s) >= layer_cache_numel]
    big_launches = [n for n in launches if ranges.get(n, 0) >= layer_cache_numel]
    return {
        "wrappers": len(codes),
        "allocations": len(shapes),
        "cache_sized_allocations": len(big),
        "cache_sized_shapes": sorted({str(s) for s in big}),
        "triton_kernels": len(ranges),
        "triton_launches": len(launches),
        "cache_sized_launches": len(big_launches),
        "cache_sized_kernels": sorted(set(big_launches)),
        "select_scatter_mentions": sum(c.count("select_scatter") for c in codes),
    }


ALLOC = re.compile(r"empty_strided_cuda\(\(([\d, ]*)\)")  # buf = empty_strided_cuda((shape), (stride), dtype)
KERNEL = re.compile(r"async_compile\.triton\('(\w+)', '''(.*?)'''", re.S)  # a Triton kernel's source
RANGE = re.compile(r"^\s+[xyz]numel = (\d+)$", re.M)  # its static range, one line per dimension
LAUNCH = re.compile(r"^\s+(\w+)\.run\(", re.M)  # one launch in call()


def variants(model, token, pos, cuda: bool) -> tuple[dict, dict, list[str]]:
    """decode_step.variants for this model, reduce-overhead only with REDUCE_OVERHEAD; also the
    code Inductor generated for the default-mode step (empty on the CPU)."""
    runs, first_call_s, codes = {"eager": lambda: model(token, pos)}, {}, []
    compiled = torch.compile(model, **({"fullgraph": True} if cuda else {"backend": "eager"}))
    graphs = torch.compile(model, mode="reduce-overhead", fullgraph=True) if cuda and REDUCE_OVERHEAD else None
    for name, fn in (("default", compiled), ("reduce-overhead", graphs)):
        if fn is None:
            continue
        start = time.perf_counter()
        with mock.patch.object(GraphLowering, "save_output_code", codes.append if name == "default" else None):
            fn(token, pos)
        sync()
        first_call_s[name] = summarize([time.perf_counter() - start], "s", "host")
        runs[name] = lambda fn=fn: fn(token, pos)
    if cuda:
        runs["graph"] = graphed(lambda: model(token, pos))
        runs["compiled+graph"] = graphed(lambda: compiled(token, pos))
    return runs, first_call_s, codes


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    cfg, batches = (GPU, BATCHES) if cuda and not small else (CPU, [1])
    calls, repeats, profiles, profiled_steps = (50, 15, 2, 10) if cuda else (3, 3, 1, 2)
    if not cuda:
        torch.set_num_threads(1)
    model, stacked = build_perlayer(cfg, dev, dtype)
    model.eval()
    stacked.eval()
    points, graph_ops = [], None
    with torch.no_grad():
        for batch in batches:
            model.setup_cache(batch)
            stacked.setup_cache(batch)
            layer_numel = model.blocks[0].k.numel()
            token = torch.zeros(batch, 1, dtype=torch.long, device=dev)
            pos = torch.zeros(1, dtype=torch.long, device=dev)
            if not cuda:  # the layout decides it, not the sizes (on the GPU: inductor_code)
                graph_ops = {
                    "per_layer": functionalized_ops(model, token, pos, layer_numel),
                    "stacked": functionalized_ops(stacked, token, pos, layer_numel),
                }
            torch._dynamo.reset()  # one compile per batch size
            runs, first_call_s, codes = variants(model, token, pos, cuda)
            tokens = torch.randint(cfg.vocab, (batch, CHECK_STEPS), device=dev)
            logits = {name: teacher_forced(run, token, pos, tokens) for name, run in runs.items()}
            stacked_logits = teacher_forced(lambda: stacked(token, pos), token, pos, tokens)
            full = model(tokens)[:, :CHECK_STEPS].float()
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
                            "over_graph": (
                                summarize([t / g for t, g in zip(raw[n], raw["graph"])], "x", "host")
                                if "graph" in raw
                                else None
                            ),
                            "max_abs_logit_diff": (logits[n] - logits["eager"]).abs().max().item(),
                            "same_greedy_tokens": torch.equal(logits[n].argmax(-1), logits["eager"].argmax(-1)),
                            "profile": profiled[n],
                            **({"first_call_s": first_call_s[n]} if n in first_call_s else {}),
                        }
                        for n in runs
                    },
                    "inductor_code": scan_code(codes, layer_numel) if cuda else None,
                    "eager_vs_stacked_cache_max_abs_diff": (logits["eager"] - stacked_logits).abs().max().item(),
                    "cache_vs_full_forward_max_abs_diff": (logits["eager"] - full).abs().max().item(),
                    "max_abs_logit": full.abs().max().item(),
                    "kv_cache_bytes": cache_bytes(model),  # every layer's k and v
                    "layer_cache_bytes": 2 * layer_numel * torch.finfo(dtype).bits // 8,  # one layer's k and v together
                }
            )
            del runs
            torch._dynamo.reset()
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "config": dict(cfg.__dict__),
        "check_steps": CHECK_STEPS,
        "profiled_steps": profiles * profiled_steps,
        "graph_ops": graph_ops,
        "points": points,
        "notes": [
            "cache layout: each layer's own k and v buffers, [batch, heads, max_len, head_dim] (_perlayer.py)",
            "graph_ops (CPU only): the forward graph AOTAutograd would hand Inductor, per-layer and stacked"
            " layouts; cache_sized_outputs: new tensors (not views) of at least one layer's k (or v) buffer",
            "inductor_code: the default-mode step's generated code; cache_sized_allocations: buffers of at least"
            " one layer's k (or v); cache_sized_launches: Triton launches whose xnumel covers that many elements",
            "max_abs_logit_diff: against the per-layer eager step; eager_vs_stacked_cache_max_abs_diff:"
            " per-layer eager against _model.py's stacked-cache eager step, same weights and tokens",
            "over_graph: each variant's step time over the eager graph's, paired by round",
            "first_call_s: cold in the build's first process; later processes compile from Inductor's caches",
        ]
        + ([] if REDUCE_OVERHEAD or not cuda else ["reduce-overhead not measured (REDUCE_OVERHEAD off)"])
        + (
            []
            if cuda
            else [
                "CPU run: torch.compile(backend='eager'), no Inductor, so no inductor_code;"
                f" skipped (need CUDA): {', '.join(GRAPHED)}"
            ]
        ),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    c = r["config"]
    print(f"decode step, a KV cache buffer per layer: {c['layers']} layers, d {c['d']}, {r['dtype']}, {device_name()}")
    for layout, ops in (r["graph_ops"] or {}).items():
        print(
            f"  graph for Inductor, {layout} cache: {ops['select_scatter']} select_scatter,"
            f" {ops['cache_sized_outputs']} cache-sized outputs"
        )
    print(
        f"{'batch':>5} {'variant':>16} {'us/step':>9} {'tokens/s':>9} {'speedup':>8} {'kernels':>8} {'max|dlogit|':>11}"
    )
    for p in r["points"]:
        for n, v in p["variants"].items():
            print(
                f"{p['batch']:>5} {n:>16} {v['step_us']['median']:9.1f} {v['tokens_per_s']['median']:9.0f}"
                f" {v['speedup_over_eager']['median']:7.2f}x {v['profile']['kernels_per_step']:8.0f}"
                f" {v['max_abs_logit_diff']:11.2e}"
            )
        if p["inductor_code"]:
            print(f"      Inductor's code: {p['inductor_code']}")
        print(
            f"      per-layer against stacked cache (eager): max |diff| {p['eager_vs_stacked_cache_max_abs_diff']:.2e}"
        )
    for note in r["notes"]:
        print("note:", note)
