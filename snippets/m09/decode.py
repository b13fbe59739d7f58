"""One decode step of a small transformer, run three ways: eager, captured by hand with
torch.cuda.graph, and torch.compile(mode="reduce-overhead"). The model: 4 pre-norm blocks,
d_model 1,024, 16 heads, a 32,768-token vocabulary, bf16: about 118 M parameters, of which a step
reads 84 M (168 MB; the embedding tables are only indexed), small enough that launches, not
bandwidth, decide an eager step. Batch 1 and 8, one new token per sequence per step.

What makes the step capturable: the KV cache has a fixed capacity (1,024 positions, allocated up
front as module buffers); the step writes its keys and values at a position held in a device
tensor (index_copy_) and attends over the whole cache under a mask built from that tensor, so no
shape, address or host value changes from step to step. The timed step is the model's forward
(logits and the greedy next token), then two small eager ops every variant shares: the next
token copied into the input tensor and the position advanced.

Clock: host wall time per step, back to back with a device synchronize at both ends, the three
variants in the same interleaved rounds (bench.host_us_rounds), as tokens/s (batch / step time).
Also: the logits of the three over the same 8 teacher-forced steps (max abs difference against
eager), the first compiled call (compile, then the trees' warm-up run), the hand capture's time
and pool bytes (timed after one untimed eager step, so that the process's one-time library set-up
is not counted as capture), and what the trees' log says was recorded or skipped.

On a CPU, at small sizes (d 64, 2 blocks, 4 heads, vocabulary 256, capacity 32): the "graph"
variant is constraints.StandInGraph (reruns the model on the captured tensors), and "compiled"
is torch.compile(backend="eager", fullgraph=True): Dynamo captures the step as one graph but
nothing is compiled to kernels and there are no CUDA graphs (reduce-overhead needs CUDA; on a CPU
its Inductor compile alone would take longer than the test budget). The data says so."""

# --8<-- [start:imports]
import time

import torch
import torch.nn.functional as F
from apis import TreesLog  # what CUDA graph trees log, kept (apis.py)
from chain import pool_bytes  # bytes of a private pool (chain.py)
from constraints import capture  # warm up on a side stream, then capture (constraints.py)
from torch import nn

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us_rounds, rate, summarize

PROCESSES = 3  # host-bound at batch 1 and 8: three fresh processes give the run-to-run spread
GPU = {"vocab": 32768, "d": 1024, "layers": 4, "heads": 16, "capacity": 1024}
CPU = {"vocab": 256, "d": 64, "layers": 2, "heads": 4, "capacity": 32}
BATCHES = [1, 8]
CHECK_STEPS = 8  # teacher-forced steps over which the variants' logits are compared


# --8<-- [start:model]
class Attention(nn.Module):
    def __init__(self, d: int, heads: int, batch: int, capacity: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        # allocated once: fixed shape, fixed address
        cache = (batch, heads, capacity, d // heads)
        self.register_buffer("k_cache", torch.zeros(cache), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache), persistent=False)

    def forward(self, x, slot, mask):
        b, _, d = x.shape
        q, k, v = self.qkv(x).view(b, 1, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        # write this token's key and value at the slot on the device
        self.k_cache.index_copy_(2, slot, k)
        self.v_cache.index_copy_(2, slot, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, 1, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, batch: int, capacity: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, batch, capacity)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, slot, mask):
        x = x + self.attn(self.norm1(x), slot, mask)
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, capacity: int, batch: int):
        super().__init__()
        self.capacity = capacity
        self.embed, self.pos_embed = nn.Embedding(vocab, d), nn.Embedding(capacity, d)
        self.blocks = nn.ModuleList(Block(d, heads, batch, capacity) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("slots", torch.arange(capacity), persistent=False)

    def forward(self, token, pos):
        """token: (batch, 1) and pos: (1,), int64 tensors on the device. Returns the logits
        (batch, vocab) and the greedy next token (batch, 1)."""
        # a ring: only timing loops longer than the capacity wrap around
        slot = pos % self.capacity
        # attend to the positions written so far
        mask = (self.slots <= slot).view(1, 1, 1, -1)
        x = self.embed(token) + self.pos_embed(slot)
        for block in self.blocks:
            x = block(x, slot, mask)
        logits = self.head(self.norm(x))[:, -1]
        return logits, logits.argmax(-1, keepdim=True)


# --8<-- [end:model]


# --8<-- [start:variants]
def variants(model, token, pos, cuda: bool) -> tuple[dict, dict]:
    """name -> a function running one forward on the current token and pos tensors; and facts."""
    runs = {"eager": lambda: model(token, pos)}

    step(runs["eager"], token, pos)  # one untimed eager step first: the process's one-time set-up
    if cuda:  # (cuBLAS, the attention kernels, lazy kernel loading) stays out of the capture's time
        torch.cuda.synchronize()
    start = time.perf_counter()  # one-off events: perf_counter (bench times repeated calls)
    graph, static_out = capture(model, token, pos)  # reads token and pos from their storage at replay
    capture_s = time.perf_counter() - start
    runs["graph"] = lambda: (graph.replay(), static_out)[1]

    torch._dynamo.reset()  # one compile per batch size
    if cuda:
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True, dynamic=False)
    else:
        compiled = torch.compile(model, backend="eager", fullgraph=True, dynamic=False)
    with TreesLog() as log:
        start = time.perf_counter()
        compiled(token, pos)  # compiles; the trees then run it once eagerly (their warm-up)
        if cuda:
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        for _ in range(3):
            compiled(token, pos)  # the recording, then replays
    runs["compiled"] = lambda: compiled(token, pos)
    return runs, {
        "capture_s": summarize([capture_s], "s", "host"),
        "graph_pool_bytes": pool_bytes(graph.pool()) if cuda else 0,
        "compile_first_call_s": summarize([first_call_s], "s", "host"),
        "trees_recordings": log.count("Recording function="),
        "trees_warmup_runs": log.count("Running warmup function="),
        "cudagraph_skips": [m for m in log.seen if m.startswith("skipping cudagraph")],
    }


def step(run, token, pos):
    """One decode step: the forward, then the next token fed back and the position advanced."""
    _, next_token = run()
    token.copy_(next_token)
    pos.add_(1)


# --8<-- [end:variants]


# --8<-- [start:check]
def teacher_forced_logits(run, token, pos, tokens) -> torch.Tensor:
    """Logits at each of tokens.shape[1] steps from position 0, feeding tokens[:, t] at step t.
    (Unwritten cache slots need no reset: the mask hides every slot past pos.)"""
    pos.zero_()
    logits = []
    for t in range(tokens.shape[1]):
        token.copy_(tokens[:, t : t + 1])
        logits.append(run()[0].float().clone())
        pos.add_(1)
    return torch.stack(logits)


# --8<-- [end:check]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    shape = CPU if small or not cuda else GPU
    calls, repeats = (3, 5) if small else (50, 30)
    if not cuda:
        torch.set_num_threads(1)  # steady host timings on a small machine
    points = []
    with torch.no_grad():
        for batch in BATCHES:
            torch.manual_seed(0)  # the same weights at every batch size
            model = Decoder(**shape, batch=batch).to(dev, dtype).eval()
            token = torch.zeros(batch, 1, dtype=torch.long, device=dev)
            pos = torch.zeros(1, dtype=torch.long, device=dev)
            runs, facts = variants(model, token, pos, cuda)
            tokens = torch.randint(shape["vocab"], (batch, CHECK_STEPS), device=dev)
            logits = {name: teacher_forced_logits(run, token, pos, tokens) for name, run in runs.items()}
            greedy = {k: v.argmax(-1) for k, v in logits.items()}
            caches = [b for name, b in model.named_buffers() if name.endswith("_cache")]
            pos.zero_()
            raw = host_us_rounds(
                {name: (lambda run=run: step(run, token, pos), torch.no_grad) for name, run in runs.items()},
                calls=calls,
                repeats=repeats,
                warmup=calls,
            )["host_us"]
            points.append(
                {
                    "batch": batch,
                    "step_us": {k: summarize(v, "us", "host", rounds=True) for k, v in raw.items()},
                    "tokens_per_s": {k: rate(summarize(v, "us", "host"), batch, "tokens/s") for k, v in raw.items()},
                    "speedup_over_eager": {
                        k: summarize([e / t for e, t in zip(raw["eager"], raw[k])], "x", "host")
                        for k in ("graph", "compiled")
                    },
                    "max_abs_logit_diff": {k: (logits[k] - logits["eager"]).abs().max().item() for k in logits},
                    "same_greedy_tokens": {k: torch.equal(greedy[k], greedy["eager"]) for k in logits},
                    "max_abs_logit": logits["eager"].abs().max().item(),
                    "kv_cache_bytes": sum(c.numel() * c.element_size() for c in caches),  # all read by each step
                    **facts,
                }
            )
            params = sum(p.numel() for p in model.parameters())
            read = params - model.embed.weight.numel() - model.pos_embed.weight.numel()  # tables: one row each
            del runs, model, caches
            torch._dynamo.reset()
    notes = ["compile_first_call_s: cold in the first process; later processes compile from Inductor's caches"]
    if not cuda:
        notes = [
            "no CUDA graphs on a CPU: 'graph' is constraints.StandInGraph (reruns the model on the captured "
            "tensors, then copies the outputs); 'compiled' is torch.compile(backend='eager', fullgraph=True): "
            "Dynamo only, no Inductor, no CUDA graphs (reduce-overhead needs CUDA)"
        ]
    return {
        "repetitions": repeats,
        "calls_per_repetition": calls,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        **shape,
        "params": params,
        "step_weight_bytes": read * torch.finfo(dtype).bits // 8,  # the weights one step reads
        "check_steps": CHECK_STEPS,
        "points": points,
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"decode step: {r['layers']} blocks, d={r['d']}, vocab {r['vocab']},")
    print(f"  KV cache {r['capacity']} positions, {r['dtype']}, on {device_name()}")
    print(f"{'batch':>5} {'variant':>9} {'us/step':>9} {'tokens/s':>10} {'speedup':>8} {'max|dlogit|':>12}")
    for p in r["points"]:
        for k, t in p["step_us"].items():
            speed = p["speedup_over_eager"][k]["median"] if k != "eager" else 1.0
            print(f"{p['batch']:>5} {k:>9} {t['median']:>9.1f} {p['tokens_per_s'][k]['median']:>10.0f}", end="")
            print(f" {speed:>7.2f}x {p['max_abs_logit_diff'][k]:>12.3g}")
        print(f"      first compiled call {p['compile_first_call_s']['median']:.1f} s, capture", end="")
        print(f" {p['capture_s']['median'] * 1e3:.1f} ms, pool {p['graph_pool_bytes'] / 2**20:.1f} MiB,", end="")
        print(f" trees recorded {p['trees_recordings']}, skipped: {p['cudagraph_skips'] or 'none'}")
    for note in r["notes"]:
        print("note:", note)
