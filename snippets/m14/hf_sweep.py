"""The careful user's tuning of Hugging Face transformers on module 14's offline workload: which of its
configurations is its best, so that race.py races that one.

Workload (_workload.py): 256 requests, prompts of 64 to 512 tokens (seeded), 128 new tokens each,
greedy, EOS off; the model: _model.CONFIG (about 200 M parameters, bfloat16, random weights).
Configurations (_hf.py): static batching with the dynamic cache at batch 32, 64, 128 and 256 (each
batch padded to its longest prompt); with the static cache and torch.compile (transformers' automatic
compile of the decode step, mode "reduce-overhead") at batch 64 and 256, every batch padded to 512,
torch._dynamo reset before each batch size so each compiles alone (its compile is inside its warm-up:
stored); continuous batching (generate_batch) with its defaults for this model and with CUDA graphs
forced on. Each configuration: a warm-up (one untimed batch, or one whole untimed run for
generate_batch), then ROUNDS timed runs of the whole workload. Clock: wall time (time.perf_counter
after torch.cuda.synchronize) per run, stored as microseconds per generated token (lower is better)
and tokens per second. On the CPU (small=True): TINY, 6 short requests, nothing compiled (transformers
auto-compiles only on an accelerator: said in the data), generate_batch with its defaults only."""

# --8<-- [start:imports]
import torch
import transformers
from _hf import continuous, prepare, release, static_batches
from _model import CONFIG, TINY, hf_model
from _workload import requests

# --8<-- [end:imports]
from coursekit.bench import device_name, rate, summarize

PROCESSES = 1  # one process: each costs two cold compiles (minutes); ROUNDS give the spread within it
ROUNDS = 2
DYNAMIC_BATCHES = [32, 64, 128, 256]
STATIC_BATCHES = [64, 256]
CB_VARIANTS = {"defaults": {}, "cuda_graphs": {"use_cuda_graph": True}}


# --8<-- [start:sweep]
def timed(run, tokens: int, rounds: int) -> dict:
    """The warm-up run's data, then `rounds` timed runs (run(warmup) -> _hf's dict)."""
    first = run(True)
    runs = [first] + [run(False) for _ in range(rounds - 1)]
    us = summarize([r["seconds"] / tokens * 1e6 for r in runs], "us", "host")
    return {
        "us_per_token": us,
        "tokens_per_s": rate(us, 1, "tokens/s"),
        "warmup_s": first["warmup_s"],
        "last": runs[-1],
    }


def sweep(hf, reqs, dynamic, static, cb_variants, rounds) -> dict:
    tokens = sum(r["max_new_tokens"] for r in reqs)
    out = {"dynamic": {}, "static_compile": {}, "generate_batch": {}}
    for b in dynamic:
        out["dynamic"][str(b)] = timed(lambda w, b=b: static_batches(hf, reqs, b, "dynamic", warmup=w), tokens, rounds)
    for b in static:
        torch._dynamo.reset()  # this batch size compiles on its own, as in a process of its own
        run = lambda w, b=b: static_batches(hf, reqs, b, "static", compile=True, warmup=w)  # noqa: E731
        out["static_compile"][str(b)] = timed(run, tokens, rounds)
    for name, settings in cb_variants.items():
        try:
            out["generate_batch"][name] = timed(lambda w: continuous(hf, reqs, settings, warmup=w), tokens, rounds)
        except Exception as error:  # a setting this transformers cannot run here: stored, not hidden
            out["generate_batch"][name] = {"error": f"{type(error).__name__}: {error}"[:500]}
        finally:
            release(hf)
    return out


# --8<-- [end:sweep]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    config = TINY if small else CONFIG
    hf = prepare(hf_model(config, device="cuda" if cuda else "cpu"))
    if small:
        reqs = requests(n=6, lo=4, hi=12, new_tokens=5, vocab=config["vocab_size"])
        dynamic, static, variants = [2, 6], [6], {"defaults": {"block_size": 16, "num_blocks": 64}}
    else:
        reqs, dynamic, static, variants = requests(), DYNAMIC_BATCHES, STATIC_BATCHES, CB_VARIANTS
    results = sweep(hf, reqs, dynamic, static, variants, ROUNDS)
    reference = results["dynamic"][str(dynamic[-1])]["last"]["tokens"]
    best, agree = {}, {}
    for route, configs in results.items():
        ok = {name: c for name, c in configs.items() if "error" not in c}
        best[route] = min(ok, key=lambda name: ok[name]["us_per_token"]["median"]) if ok else None
        for name, c in ok.items():
            agree[f"{route}/{name}"] = sum(c["last"]["tokens"][i] == reference[i] for i in reference) / len(reference)
            c["last"] = {k: v for k, v in c["last"].items() if k != "tokens"}  # its facts, without the tokens
    fastest = min(
        (f"{route}/{name}" for route, name in best.items() if name is not None),
        key=lambda key: results[key.split("/")[0]][key.split("/")[1]]["us_per_token"]["median"],
    )
    return {
        "repetitions": ROUNDS,
        "requests": len(reqs),
        "new_tokens": reqs[0]["max_new_tokens"],
        "generated_tokens": sum(r["max_new_tokens"] for r in reqs),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "compiled": cuda,  # transformers compiles the static-cache decode step only on an accelerator
        "results": results,
        "best": best,  # per route, the configuration with the lowest median time per token
        "fastest": fastest,
        # same greedy tokens as the dynamic cache at the largest batch, request by request (bf16 batches of
        # other shapes may round differently)
        "requests_agreeing": agree,
        "notes": [] if cuda else ["CPU run: TINY model, nothing compiled, generate_batch without CUDA graphs"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(
        f"transformers {r['transformers']} on {device_name()}: {r['requests']} requests, {r['new_tokens']} new tokens"
    )
    print(f"  {'route':>15} {'config':>12} {'us/token':>10} {'tokens/s':>10} {'warm-up s':>10} {'agree':>6}")
    for route, configs in r["results"].items():
        for name, c in configs.items():
            if "error" in c:
                print(f"  {route:>15} {name:>12}  failed: {c['error'][:80]}")
                continue
            cells = [f"{c['us_per_token']['median']:.1f}", f"{c['tokens_per_s']['median']:.0f}"]
            cells += [f"{c['warmup_s']:.1f}", f"{r['requests_agreeing'][f'{route}/{name}']:.2f}"]
            print(f"  {route:>15} {name:>12} " + " ".join(f"{x:>10}" for x in cells))
    print(f"  best per route: {r['best']}; fastest: {r['fastest']}")
