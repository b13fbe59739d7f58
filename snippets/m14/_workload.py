"""Module 14's workload, shared by its snippets (ours and the peer's get the same requests): 256
requests, prompt lengths drawn uniformly from 64 to 512 tokens, 128 new tokens each, greedy; random
token ids (the model's weights are random too, so no text would mean anything); and Poisson arrival
times (exponential gaps at a stated rate) for the online run. Everything is seeded: the same call
gives the same requests on every machine (torch's CPU generator)."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]


# --8<-- [start:workload]
def requests(n=256, lo=64, hi=512, new_tokens=128, seed=0, vocab=32000) -> list[dict]:
    """Each {"id": i, "prompt": list[int], "max_new_tokens": new_tokens}; prompt lengths uniform in [lo, hi]."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    return [
        {"id": i, "prompt": torch.randint(0, vocab, (length,), generator=g).tolist(), "max_new_tokens": new_tokens}
        for i, length in enumerate(lengths)
    ]


def poisson_arrivals(n, rate_per_s, seed=0) -> list[float]:
    """Arrival times in seconds from 0: gaps exponential with mean 1 / rate_per_s (a Poisson process)."""
    g = torch.Generator().manual_seed(seed)
    gaps = torch.empty(n, dtype=torch.float64).exponential_(rate_per_s, generator=g)
    return torch.cumsum(gaps, 0).tolist()


# --8<-- [end:workload]


if __name__ == "__main__":
    lengths = [len(r["prompt"]) for r in requests()]
    print(f"256 requests: prompts {min(lengths)} to {max(lengths)} tokens, mean {sum(lengths) / len(lengths):.1f}")
    print(f"Poisson arrivals at 16 requests/s: the last at {poisson_arrivals(256, 16.0)[-1]:.2f} s")
