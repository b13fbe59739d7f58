"""One decode step's head at a 256k vocabulary: the LM head (hidden 4,096 -> 262,144 logits, bf16
weights: 2 GiB, read once per step whatever the batch) and then sampling (temperature 0.7, top-k 50,
top-p 0.9 over those 50, one multinomial draw per row), with torch.topk and with the course's top-k
(_topk.py). Batch 1 (one sequence) and 64 (a serving batch). The hidden states are random; the
weights are N(0, 0.02^2), so the logits look like a model's in scale, not in meaning.

Each part is captured into its own CUDA graph and timed as a replay (device time, CUDA events, L2
flushed before each call), all in the same interleaved rounds (bench.gpu_us_each): the LM head alone;
top-k alone on the float32 logits (both kernels); sampling (temperature, top-k, top-p, multinomial)
with each top-k; the whole step with each. Each part's share of its step is a per-round ratio: the
claim that top-k is a visible fraction of a decode step, checked. Also stored: whether both
draw the same logit, and the same token, from the same generator state (the same top 50 in the same
order of values; tied values may list their tokens in another order).

On the CPU (small=True): hidden 64, vocabulary 600, batch 1, the kernel in Triton's interpreter, the
"graphs" plain functions (host times)."""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F
from _topk import topk  # the course's kernel (_topk.py)
from race import graphed  # capture once, replay (race.py)

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, summarize

PROCESSES = 1  # one process: every number is a device time (CUDA events around graph replays)

FULL = {"hidden": 4096, "vocab": 262144, "batches": [1, 64]}
SMALL = {"hidden": 64, "vocab": 600, "batches": [1]}


# --8<-- [start:sample]
TEMPERATURE, TOP_K, TOP_P = 0.7, 50, 0.9


def sample(logits: torch.Tensor, top_k) -> torch.Tensor:
    """One token per row: temperature, the TOP_K largest (top_k is torch.topk or ours), then the
    smallest prefix of them whose probability reaches TOP_P, then a draw from what is left."""
    values, indices = top_k(logits.float() / TEMPERATURE, TOP_K)  # sorted, largest first
    probs = torch.softmax(values, dim=-1)
    probs = probs.masked_fill(probs.cumsum(dim=-1) - probs > TOP_P, 0.0)  # past the nucleus
    return indices.gather(1, torch.multinomial(probs, 1))  # multinomial renormalises


# --8<-- [end:sample]


def paired(part: dict, whole: dict) -> dict:
    """part / whole round by round (both timed in the same rounds)."""
    return summarize([p / w for p, w in zip(part["rounds"], whole["rounds"])], "x")


# --8<-- [start:step]
def time_step(batch: int, hidden: int, vocab: int, dev: str, dtype: torch.dtype) -> dict:
    weight = torch.randn(vocab, hidden, device=dev, dtype=dtype) * 0.02  # the LM head: 2 GiB in bf16
    h = torch.randn(batch, hidden, device=dev, dtype=dtype)  # the last layer's output for one token
    logits = F.linear(h, weight)  # a static input for the parts timed alone
    scaled = logits.float() / TEMPERATURE
    parts = {
        "lm_head": graphed(lambda: F.linear(h, weight)),
        "topk_torch": graphed(lambda: torch.topk(scaled, TOP_K)),
        "topk_ours": graphed(lambda: topk(scaled, TOP_K)),
        "sampling_torch": graphed(lambda: sample(logits, torch.topk)),
        "sampling_ours": graphed(lambda: sample(logits, topk)),
        "step_torch": graphed(lambda: sample(F.linear(h, weight), torch.topk)),
        "step_ours": graphed(lambda: sample(F.linear(h, weight), topk)),
    }
    times = gpu_us_each(parts, rounds=15, rep_ms=25)
    tokens = {}
    for name, top_k in (("torch", torch.topk), ("ours", topk)):
        torch.manual_seed(1)  # the same generator state for both draws
        tokens[name] = sample(logits, top_k)
    return {
        "batch": batch,
        "logits_bytes": logits.numel() * 4,  # what top-k reads: the float32 logits
        "time_us": times,
        "share": {  # per round: each part's time over its whole step
            side: {
                "lm_head": paired(times["lm_head"], times[f"step_{side}"]),
                "sampling": paired(times[f"sampling_{side}"], times[f"step_{side}"]),
                "topk": paired(times[f"topk_{side}"], times[f"step_{side}"]),
            }
            for side in ("torch", "ours")
        },
        "step_speedup": paired(times["step_torch"], times["step_ours"]),  # above 1: ours makes the step faster
        # the same place in the same sorted list: the same logit; the same token unless tied logits
        # at that place were listed in another order (bf16 logits tie often)
        "same_logit_drawn": bool(torch.equal(logits.gather(1, tokens["torch"]), logits.gather(1, tokens["ours"]))),
        "same_token": bool(torch.equal(tokens["torch"], tokens["ours"])),
    }


# --8<-- [end:step]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32  # the CPU path: float32 matmuls are the quick ones
    shape = SMALL if small else FULL
    torch.manual_seed(0)
    points = [time_step(b, shape["hidden"], shape["vocab"], dev, dtype) for b in shape["batches"]]
    return {
        "repetitions": min(t["n"] for p in points for t in p["time_us"].values()),
        "hidden": shape["hidden"],
        "vocab": shape["vocab"],
        "weight_dtype": str(dtype).removeprefix("torch."),
        "lm_head_weight_bytes": shape["hidden"] * shape["vocab"] * torch.tensor([], dtype=dtype).element_size(),
        "sampling": {"temperature": TEMPERATURE, "top_k": TOP_K, "top_p": TOP_P},
        "points": points,
        "notes": [] if cuda else ["CPU run: Triton's interpreter, float32 weights, no CUDA graphs; host times"],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"decode step head on {device_name()}: hidden {r['hidden']}, vocabulary {r['vocab']:,}; us per part")
    for p in r["points"]:
        t = p["time_us"]
        print(f"  batch {p['batch']}: LM head {t['lm_head']['median']:.1f}")
        for side in ("torch", "ours"):
            s = p["share"][side]
            print(
                f"    {side:<6} top-k {t[f'topk_{side}']['median']:8.1f}"
                f"  sampling {t[f'sampling_{side}']['median']:8.1f}"
                f"  step {t[f'step_{side}']['median']:8.1f}  top-k share {s['topk']['median']:.3f}"
                f"  sampling share {s['sampling']['median']:.3f}"
            )
        print(
            f"    same logit drawn: {p['same_logit_drawn']}, same token: {p['same_token']};"
            f" step speed-up with ours {p['step_speedup']['median']:.2f}"
        )
    for note in r["notes"]:
        print(f"  note: {note}")
