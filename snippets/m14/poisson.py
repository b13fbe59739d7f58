"""Online serving under Poisson arrivals: latency of our server against Hugging Face transformers'
continuous batching manager at the same arrival rate, so at equal throughput.

Workload (_workload.py): the 256 requests of the offline race (prompts of 64 to 512 tokens, 128 new
tokens, greedy, EOS off), arriving as a Poisson process at RATE requests per second (seeded gaps):
RATE x 128 tokens per second, well below what either side sustains offline (race.py, hf_sweep.py), so
both keep up and their throughput is the arrival rate; each side's achieved throughput (generated
tokens over the span from the first arrival to the last token) is stored to show it. Ours:
_server.Engine.serve (continuous batching, CUDA-graph buckets); HF: _hf.online, requests added to
ContinuousBatchingManager at their arrival times, with per-token timestamps (record_timestamps). Per
request: time to first token (TTFT = first token's time - arrival) and time per output token (TPOT =
(last token's time - first token's time) / 127, as vLLM's benchmark defines it); both sides take the
times on the host when the step's tokens reach it. Clock: time.perf_counter. Each side warms up
(ours: one short offline run; HF: its manager's warm-up and a few requests) and then serves the whole
workload once untimed (WARMUP_ROUNDS: measured without it, our p99 TPOT in a process's first serve of
the workload was several times that of its second; the short warm-up did not cover what a whole serve
meets), then ROUNDS rounds, each
serving the whole workload on each side in turn. Also ours with static batching (the same engine,
continuous=False: whoever has arrived is admitted as a batch, then no one until it has finished), what
continuous batching buys online (offline, with every request present at t = 0 and 128 new tokens each,
the two schedules are the same: race.py). Stored: p50 and p99 over requests of TTFT and TPOT per
round; the race row is p99 TPOT (lower is better), one sample per round. On the CPU (small=True): TINY,
6 short requests at a fast rate, gathered-SDPA attention, no CUDA graphs."""

# --8<-- [start:imports]
import torch
import transformers
from _hf import PAD_TO, online, prepare
from _model import CONFIG, TINY, Llama, hf_model
from _server import Engine
from _workload import poisson_arrivals, requests

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # one process: each round is two 20-second serving runs; ROUNDS give the spread
ROUNDS = 2
WARMUP_ROUNDS = 1  # untimed rounds first, every side, in the same order as the timed ones
RATE = 12.0  # requests per second: 1,536 tokens per second offered
HF_CB = {"use_cuda_graph": True}  # hf_sweep's fastest continuous-batching variant ("cuda_graphs"; default off)
CHAPTER = "part-n/14-inference-server.md"


# --8<-- [start:latency]
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(out: list[dict]) -> dict:
    """TTFT and TPOT per request (ms), their p50 and p99, and the throughput achieved."""
    ttft = [(o["first_token_s"] - o["arrival_s"]) * 1e3 for o in out]
    tpot = [(o["token_s"][-1] - o["token_s"][0]) / (len(o["token_s"]) - 1) * 1e3 for o in out]
    span = max(o["token_s"][-1] for o in out) - min(o["arrival_s"] for o in out)
    return {
        "ttft_ms": {"p50": percentile(ttft, 0.5), "p99": percentile(ttft, 0.99)},
        "tpot_ms": {"p50": percentile(tpot, 0.5), "p99": percentile(tpot, 0.99)},
        "tokens_per_s": sum(len(o["tokens"]) for o in out) / span,
    }


# --8<-- [end:latency]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    config = TINY if small else CONFIG
    hf = prepare(hf_model(config, device="cuda" if cuda else "cpu"))
    ours = Llama.from_hf(hf)
    if small:
        reqs, rate, rounds = requests(n=6, lo=4, hi=12, new_tokens=5, vocab=config["vocab_size"]), 20.0, 2
        settings, max_len = dict(block_size=16, num_blocks=64, max_batch_tokens=256), 12 + 5
    else:
        reqs, rate, rounds, settings, max_len = requests(), RATE, ROUNDS, HF_CB, PAD_TO + 128
    arrivals = poisson_arrivals(len(reqs), rate)
    attention = "triton" if cuda else "gather"
    engine = Engine(ours, max_batch=len(reqs), max_model_len=max_len, attention=attention)
    static = Engine(ours, max_batch=len(reqs), max_model_len=max_len, attention=attention, continuous=False)
    engine.generate(reqs[:8])  # warm-up: the first prefill shapes, the allocator's cache
    static.generate(reqs[:8])
    sides = {
        "ours": lambda: engine.serve(reqs, arrivals),
        "ours_static": lambda: static.serve(reqs, arrivals),  # what continuous batching buys, online
        "hf_continuous": lambda: online(hf, reqs, arrivals, settings, warmup_requests=reqs[:8]),
    }
    per_round = {name: [] for name in sides}
    same = {}
    for _ in range(0 if small else WARMUP_ROUNDS):
        for run in sides.values():
            run()
    for _ in range(rounds):
        outs = {name: run() for name, run in sides.items()}
        for name, out in outs.items():
            per_round[name].append(latency(out))
        same = {
            "requests": len(reqs),
            "all_tokens_equal": sum(a["tokens"] == b["tokens"] for a, b in zip(outs["ours"], outs["hf_continuous"])),
        }

    def rounds_of(name, metric, q, unit="ms"):
        return summarize([r[metric][q] for r in per_round[name]], unit, "host", rounds=True)

    summary = {
        name: {
            **{f"{m}_{q}": rounds_of(name, f"{m}_ms", q) for m in ("ttft", "tpot") for q in ("p50", "p99")},
            "tokens_per_s": summarize([r["tokens_per_s"] for r in per_round[name]], "tokens/s", "host"),
        }
        for name in sides
    }
    version = transformers.__version__
    return {
        "repetitions": rounds,
        "warmup_rounds": 0 if small else WARMUP_ROUNDS,
        "requests": len(reqs),
        "rate_per_s": rate,
        "offered_tokens_per_s": rate * reqs[0]["max_new_tokens"],
        "hf_cb_settings": settings,
        "transformers": version,
        "torch": torch.__version__,
        "attention": attention,
        "latency": summary,
        "per_round": per_round,
        "same_tokens": same,
        "notes": [] if cuda else ["CPU run: TINY, gathered-SDPA attention, no CUDA graphs; not the race"],
        "races": [
            {
                "name": f"Poisson arrivals, {rate:g} requests/s, {len(reqs)} requests: p99 time per output token (ms)",
                "peer": f"transformers {version} ContinuousBatchingManager"
                + (" (CUDA graphs)" if settings.get("use_cuda_graph") else ""),
                "ours": summary["ours"]["tpot_p99"],
                "theirs": summary["hf_continuous"]["tpot_p99"],
                "bar": 1.0,
                "chapter": CHAPTER,
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"Poisson arrivals on {device_name()}: {r['requests']} requests at {r['rate_per_s']:g}/s")
    print(f"  {'side':>14} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'TPOT p99':>9} {'tokens/s':>9}  (ms)")
    for name, s in r["latency"].items():
        cells = [s[k]["median"] for k in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "tokens_per_s")]
        print(f"  {name:>14} " + " ".join(f"{c:9.1f}" for c in cells))
    print(f"  offered: {r['offered_tokens_per_s']:.0f} tokens/s; same tokens: {r['same_tokens']}")
    for note in r["notes"]:
        print(f"  note: {note}")
