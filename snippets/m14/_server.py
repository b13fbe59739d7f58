"""Module 14's server, shared by its snippets: an engine that runs requests over ours (_model.Llama)
with a paged KV cache (_paged.py), continuous batching and CUDA-graph buckets for decode.

Scheduling is iteration-level (Orca): after every model step the scheduler looks again, so new
requests join and finished ones leave at each step. Prefill and decode alternate: a step is either
a prefill of newly admitted requests (packed, up to max_prefill_tokens) or one decode token for every
running request; prefill goes first whenever someone is waiting to start (vLLM v0's default; vLLM
v1 instead mixes prefill chunks and decodes in one step under a token budget). Admission is by free
KV blocks: a request is admitted when the blocks for its whole length (prompt + max_new_tokens - 1
cached tokens) are free, and holds them until it finishes, when they go back at once; so nothing is
ever preempted (vLLM allocates as a sequence grows and preempts when blocks run out).
``continuous=False`` is static batching on the same engine: a batch is admitted only when the
previous one has wholly finished.

Decode runs padded to the smallest bucket >= the batch: one CUDA graph per bucket, captured at
start-up (largest first, all in one shared memory pool, as vLLM captures its sizes) over static
input buffers; padding slots read and write the cache's dummy block 0 and their tokens are dropped.
Greedy sampling (argmax) is inside the graph; the host reads the sampled tokens after every step
(the one device sync per step: the scheduler needs them to decide who finished). Times are
time.perf_counter() after that read, from the start of the run. With cuda_graphs=False the decode
runs eagerly at the batch's own size; on a CPU with cuda_graphs=True it runs eagerly but padded to
the bucket (so the tests check the padding)."""

# --8<-- [start:imports]
import time

import torch
from _paged import PagedCache, layer_attention

# --8<-- [end:imports]

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


# --8<-- [start:engine]
class Seq:
    def __init__(self, req: dict, arrival_s: float):
        self.id, self.prompt, self.max_new = req["id"], req["prompt"], req["max_new_tokens"]
        self.arrival_s, self.out, self.token_s, self.blocks, self.row = arrival_s, [], [], [], None

    @property
    def length(self) -> int:  # tokens in the cache once the next decode step has written its input
        return len(self.prompt) + len(self.out)


class Engine:
    def __init__(self, model, *, max_batch=256, block_size=16, num_blocks=None, buckets=BUCKETS, cuda_graphs=True,
                 max_prefill_tokens=8192, continuous=True, attention="triton", max_model_len=None):  # fmt: skip
        c, w = model.config, model.lm_head.weight
        self.model, self.device, self.continuous = model, w.device, continuous
        self.max_batch, self.max_prefill_tokens = max_batch, max_prefill_tokens
        self.width = -(-(max_model_len or c["max_position_embeddings"]) // block_size)  # blocks per table row
        num_blocks = num_blocks or max_batch * self.width + 1
        self.cache = PagedCache(
            c["num_hidden_layers"], num_blocks, block_size, c["num_key_value_heads"], c["head_dim"], w.dtype, w.device
        )
        self.attention = layer_attention(attention)
        self.buckets = sorted({b for b in buckets if b < max_batch} | {max_batch})
        top = self.buckets[-1]  # static decode inputs: the graphs read them at fixed addresses
        self.tokens = torch.zeros(top, dtype=torch.long, device=w.device)
        self.positions = torch.zeros(top, dtype=torch.long, device=w.device)
        self.table = torch.zeros(top, self.width, dtype=torch.int32, device=w.device)
        self.lens = torch.ones(top, dtype=torch.int32, device=w.device)
        self.graphs, self.outputs, self.captures = {}, {}, []
        self.pad, self.use_graphs = cuda_graphs, cuda_graphs and w.is_cuda  # padded eagerly on a CPU
        self.stats: dict = {}
        if self.use_graphs:
            self.capture_all()

    @torch.no_grad()
    def run_decode(self, b: int):
        """The decode step over the first b slots of the static inputs (eager; what a graph captures)."""
        return self.model.decode(
            self.tokens[:b], self.positions[:b], self.table[:b], self.lens[:b], self.cache, self.attention
        )

    def capture_all(self) -> None:
        """One graph per bucket, largest first, in one shared pool: time and memory per capture."""
        side = torch.cuda.Stream()  # warm-up on a side stream (Triton's compile, cuBLAS's workspaces)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for b in self.buckets:
                self.run_decode(b)
        torch.cuda.current_stream().wait_stream(side)
        self.pool = torch.cuda.graph_pool_handle()
        for b in reversed(self.buckets):
            torch.cuda.synchronize()
            reserved, free = torch.cuda.memory_reserved(), torch.cuda.mem_get_info()[0]
            start = time.perf_counter()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                self.outputs[b] = self.run_decode(b)
            torch.cuda.synchronize()
            self.graphs[b] = graph
            self.captures.append({
                "batch": b, "capture_s": time.perf_counter() - start,
                "reserved_growth_bytes": torch.cuda.memory_reserved() - reserved,
                "device_free_drop_bytes": free - torch.cuda.mem_get_info()[0],
            })  # fmt: skip

    def decode_step(self, running: list) -> list[int]:
        """Fill the static inputs (padding slots: token 0 at position 0 of block 0, length 1), replay
        the bucket's graph (or run eagerly), read the tokens back: the step's one sync."""
        n = len(running)
        b = next(x for x in self.buckets if x >= n) if self.pad else n
        meta = [[s.out[-1], s.length - 1, s.length] for s in running] + [[0, 0, 1]] * (b - n)
        meta = torch.tensor(meta)
        rows = torch.stack([s.row for s in running] + [torch.zeros(self.width, dtype=torch.int32)] * (b - n))
        self.tokens[:b].copy_(meta[:, 0])
        self.positions[:b].copy_(meta[:, 1])
        self.lens[:b].copy_(meta[:, 2])
        self.table[:b].copy_(rows)
        if self.use_graphs:
            self.graphs[b].replay()
            out = self.outputs[b]
        else:
            out = self.run_decode(b)
        self.stats["padded_slots"][b] = self.stats["padded_slots"].get(b, 0) + b - n
        self.stats["decode_batches"].append(n)
        return out[:n].tolist()

    @torch.no_grad()
    def prefill_step(self, seqs: list) -> list[int]:
        """The new prompts packed into one row; each token's K/V goes to its block's slot."""
        bs, tokens, positions, slots, ranges = self.cache.block_size, [], [], [], []
        for s in seqs:
            n = len(s.prompt)
            ranges.append((len(tokens), len(tokens) + n))
            tokens += s.prompt
            positions += range(n)
            slots += [s.blocks[p // bs] * bs + p % bs for p in range(n)]
        as_tensor = lambda x: torch.tensor(x, dtype=torch.long, device=self.device)  # noqa: E731
        first = self.model.prefill(as_tensor(tokens), as_tensor(positions), ranges, self.cache, as_tensor(slots))
        return first.tolist()

    def admit(self, waiting: list, pending: list, running: list, now: float) -> None:
        """Move arrived requests from waiting to pending while the batch and the free blocks allow."""
        if not self.continuous and (running or pending):
            return  # static batching: the next batch waits until this one has finished
        while waiting and waiting[0].arrival_s <= now and len(running) + len(pending) < self.max_batch:
            s = waiting[0]
            need = self.cache.blocks_for(len(s.prompt) + s.max_new - 1)
            if need > min(self.width, self.cache.num_blocks - 1):
                raise ValueError(f"request {s.id} needs {need} blocks: more than a table row or the cache holds")
            if need > len(self.cache.free):
                self.stats["waits_for_blocks"] += 1
                return
            s.blocks = self.cache.allocate(need)
            s.row = torch.zeros(self.width, dtype=torch.int32)
            s.row[:need] = torch.tensor(s.blocks, dtype=torch.int32)
            pending.append(waiting.pop(0))

    def serve(self, requests: list[dict], arrivals: list[float]) -> list[dict]:
        """Online: request i is admitted no earlier than arrivals[i] seconds after the start."""
        waiting = sorted((Seq(r, a) for r, a in zip(requests, arrivals)), key=lambda s: s.arrival_s)
        pending, running, done = [], [], []
        self.stats = {"prefill_steps": 0, "decode_steps": 0, "padded_slots": {}, "decode_batches": [],
                      "waits_for_blocks": 0, "max_running": 0}  # fmt: skip
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        while waiting or pending or running:
            now = time.perf_counter() - start
            self.admit(waiting, pending, running, now)
            if pending:  # prefill first: as many pending prompts as fit in max_prefill_tokens (at least one)
                batch, budget = [], self.max_prefill_tokens
                while pending and (not batch or len(pending[0].prompt) <= budget):
                    budget -= len(pending[0].prompt)
                    batch.append(pending.pop(0))
                new, stepped = self.prefill_step(batch), batch
                self.stats["prefill_steps"] += 1
                running += batch
            elif running:
                new, stepped = self.decode_step(running), running
                self.stats["decode_steps"] += 1
            else:  # idle until the next arrival
                time.sleep(max(0.0, waiting[0].arrival_s - now))
                continue
            t = time.perf_counter() - start
            self.stats["max_running"] = max(self.stats["max_running"], len(running))
            for s, token in zip(stepped, new):
                s.out.append(token)
                s.token_s.append(t)
            for s in [s for s in running if len(s.out) >= s.max_new]:  # finished: leave, blocks back at once
                running.remove(s)
                self.cache.release(s.blocks)
                done.append(s)
        self.stats["wall_s"] = time.perf_counter() - start
        self.stats["steps"] = self.stats["prefill_steps"] + self.stats["decode_steps"]
        done.sort(key=lambda s: s.id)
        return [
            {"id": s.id, "tokens": s.out, "arrival_s": s.arrival_s, "first_token_s": s.token_s[0], "token_s": s.token_s}
            for s in done
        ]

    def generate(self, requests: list[dict]) -> list[dict]:
        """Offline: every request present at t=0."""
        return self.serve(requests, [0.0] * len(requests))


# --8<-- [end:engine]


if __name__ == "__main__":
    from _model import TINY, Llama, hf_model, reference_greedy
    from _workload import requests

    model = Llama.from_hf(hf_model(TINY, device="cpu", dtype=torch.float32))
    reqs = requests(4, 4, 12, 5, vocab=TINY["vocab_size"])
    engine = Engine(model, attention="gather", max_model_len=64, block_size=4)
    out = engine.generate(reqs)
    same = all(o["tokens"] == reference_greedy(model, r["prompt"], 5) for o, r in zip(out, reqs))
    print(f"4 requests on TINY: the plain loop's tokens: {same}; steps {engine.stats['steps']}")
