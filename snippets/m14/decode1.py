"""Batch-1 decode: time per output token of our server against Hugging Face transformers' static cache +
torch.compile (the course's target: ours no slower) and its dynamic cache, one request at a time.

One request of the workload (_workload.py), the one whose prompt has the median length (of 256), 128
new tokens, greedy, EOS off; model _model.CONFIG (about 200 M parameters, bfloat16). Ours: _server.Engine
with max_batch=1 (one CUDA graph, bucket 1; the server's defaults: layer pieces compiled,
the host a step ahead). HF: generate with a StaticCache, decode step compiled by
transformers itself (mode "reduce-overhead"), no padding; and generate with the dynamic cache. Time per
output token = (wall time of the request with 128 new tokens - wall time of the same request with 1
new token, i.e. the prefill and its token) / 127, the same subtraction on both sides, so neither side's
prefill or per-request set-up is counted and HF is not forced to read each token back (its generate
defers that; ours reads every token, as a server must). Clock: time.perf_counter after
torch.cuda.synchronize. Warm-up: one untimed run of each (HF's compile and graph recording happen
there); then ROUNDS interleaved rounds, each running all six requests once. Also stored: the median
gap between our tokens' own timestamps (a cross-check of the subtraction), and whether all three
produce the same 128 tokens. On the CPU (small=True): TINY, 33 new tokens, nothing compiled, our
attention the gathered-SDPA fallback (Triton's interpreter is slow)."""

# --8<-- [start:imports]
import time

import torch
import transformers
from _hf import prepare, static_batches
from _model import CONFIG, TINY, Llama, hf_model
from _server import Engine
from _workload import requests

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # one process: a cold compile of HF's decode step per process; ROUNDS give the spread
ROUNDS = 10
CHAPTER = "part-n/14-inference-server.md"


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --8<-- [start:tpot]
def runners(hf, ours, req, attention) -> dict:
    """name -> run(new_tokens, warmup) -> (seconds, tokens): the same request on each side."""
    engine = Engine(ours, max_batch=1, max_model_len=len(req["prompt"]) + req["max_new_tokens"], attention=attention)

    def ours_run(new, warmup):
        sync()
        start = time.perf_counter()
        out = engine.generate([dict(req, max_new_tokens=new)])[0]
        sync()
        return time.perf_counter() - start, out["tokens"], out["token_s"]

    def hf_run(cache):
        def run(new, warmup):
            r = static_batches(
                hf, [dict(req, max_new_tokens=new)], 1, cache, compile=True, pad_to=len(req["prompt"]), warmup=warmup
            )
            return r["seconds"], r["tokens"][req["id"]], None

        return run

    return {"ours": ours_run, "hf_static_compile": hf_run("static"), "hf_dynamic": hf_run("dynamic")}


def tpot_rounds(runs: dict, new: int, rounds: int) -> tuple[dict, dict]:
    """Per round and contestant: (T(new tokens) - T(1 token)) / (new - 1), in microseconds."""
    last = {name: run(new, True) for name, run in runs.items()}  # warm-up: compiles, graphs
    for run in runs.values():
        run(1, True)
    samples = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            last[name] = run(new, False)
            one = run(1, False)[0]
            samples[name].append((last[name][0] - one) / (new - 1) * 1e6)
    return {name: summarize(s, "us", "host", rounds=True) for name, s in samples.items()}, last


# --8<-- [end:tpot]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    config = TINY if small else CONFIG
    hf = prepare(hf_model(config, device="cuda" if cuda else "cpu"))
    ours = Llama.from_hf(hf)
    # on a CPU, 33 new tokens and 5 rounds: a time per token is a difference of two host timings, and 5
    # tokens left it inside their noise (negative on a loaded machine)
    reqs = requests(n=5, lo=4, hi=12, new_tokens=33, vocab=config["vocab_size"]) if small else requests()
    req = sorted(reqs, key=lambda r: len(r["prompt"]))[len(reqs) // 2]  # the median prompt length
    new, rounds = req["max_new_tokens"], 5 if small else ROUNDS
    attention = "triton" if cuda else "gather"
    times, last = tpot_rounds(runners(hf, ours, req, attention), new, rounds)
    gaps = sorted(b - a for a, b in zip(last["ours"][2], last["ours"][2][1:]))
    version = transformers.__version__
    races = [
        {
            "name": f"batch-1 decode, prompt {len(req['prompt'])} tokens, {new} new: us per output token",
            "peer": f"transformers {version} generate, {peer}",
            "ours": times["ours"],
            "theirs": times[name],
            "bar": 1.0,
            "chapter": CHAPTER,
        }
        for name, peer in (("hf_static_compile", "static cache + torch.compile"), ("hf_dynamic", "dynamic cache"))
    ]
    return {
        "repetitions": rounds,
        "prompt_tokens": len(req["prompt"]),
        "new_tokens": new,
        "transformers": version,
        "torch": torch.__version__,
        "compiled": cuda,  # transformers compiles its static-cache decode step only on an accelerator
        "attention": attention,
        "us_per_token": times,
        "ours_timestamp_gap_us_median": gaps[len(gaps) // 2] * 1e6,
        "same_tokens": {name: last[name][1] == last["ours"][1] for name in ("hf_static_compile", "hf_dynamic")},
        "notes": [] if cuda else ["CPU run: TINY, nothing compiled, gathered-SDPA attention; not the race"],
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"batch-1 decode on {device_name()}: prompt {r['prompt_tokens']}, {r['new_tokens']} new tokens")
    for name, t in r["us_per_token"].items():
        same = r["same_tokens"].get(name, "-")
        print(
            f"  {name:>18} {t['median']:10.1f} us/token (p10 {t['p10']:.1f}, p90 {t['p90']:.1f})  same tokens: {same}"
        )
    print(f"  ours, median gap between token timestamps: {r['ours_timestamp_gap_us_median']:.1f} us")
    for note in r["notes"]:
        print(f"  note: {note}")
