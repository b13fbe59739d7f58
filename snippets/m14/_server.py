"""Module 14's server, shared by its snippets: an engine that runs requests over ours (_model.Llama)
with a paged KV cache (_paged.py), continuous batching and CUDA-graph buckets for decode.

Scheduling is iteration-level (Orca): after every model step the scheduler looks again, so new
requests join and finished ones leave at each step. Prefill and decode alternate: a step is either
a prefill of newly admitted requests (packed, up to max_prefill_tokens) or one decode token for every
running request; prefill goes first whenever someone is waiting to start (vLLM v0's default; vLLM
v1 instead mixes prefill chunks and decodes in one step under a token budget). Admission is by free
KV blocks: a request is admitted when the blocks for its whole length (prompt + max_new_tokens - 1
cached tokens) are free, and holds them until it finishes, when they go back at once; so nothing is
ever preempted (vLLM allocates as a sequence grows and preempts when blocks run out). A request
stops on its length alone (the workload turns EOS off), so the host knows who finishes without
reading a token. ``continuous=False`` is static batching on the same engine: a batch is admitted
only when the previous one has wholly finished.

Decode runs padded to the smallest bucket >= the batch: one CUDA graph per bucket, captured at
start-up (largest first, all in one shared memory pool, as vLLM captures its sizes) over static
input buffers; padding slots read and write the cache's dummy block 0 and their tokens are dropped.
Greedy sampling (argmax) is inside the graph. Four switches, each a step of the chapter's ladder:
- ``compiled``: the two pieces of each layer around attention run compiled (_model.compiled_pieces)
  in prefill and inside the decode graphs (on a CPU they run uncompiled);
- ``one_call_prefill``: prefill attention is one SDPA call per layer over the padded prompts,
  instead of one call per prompt per layer;
- ``overlap``: the step's inputs are built without reading the device: the next decode's input
  tokens are copied on the device from the step that made them, the host's metadata goes up from
  pinned memory without a sync, and the sampled tokens come back asynchronously. The host reads a
  step's tokens only after it has launched the next step (vLLM's asynchronous scheduling), so it
  prepares step n + 1 while the GPU runs step n. Without it, every step ends with the host reading
  its tokens (a device sync) before it builds the next one;
- ``prefill_graphs``: prefill replays a CUDA graph too. The packed prompts are padded to the smallest
  of PREFILL_BUCKETS (token counts) that holds them, and that bucket's graph, captured at start-up
  over static inputs, runs the whole prefill: its attention is one variable-length FlashAttention
  call per layer (_model.varlen_attention: each prompt attends to itself, with no padding per prompt;
  the padding tokens at the end form sequences of their own, written to the dummy block 0, their
  outputs dropped). Without it, prefill runs eagerly and the host launches each of its kernels from
  Python. On a CPU the padded row runs eagerly (attention one SDPA call per prompt).
A token's time is time.perf_counter() when the host has read it, from the start of the run. With
cuda_graphs=False the decode runs eagerly at the batch's own size; on a CPU with cuda_graphs=True
it runs eagerly but padded to the bucket (so the tests check the padding).

engine.stats["phases"] (on a GPU): where the run's wall time went, from a CUDA event pair around
each step (its span on the device, gaps inside a step included) and the host clock: prefill_s and
decode_s (the steps' device spans), gpu_idle_s (wall time with no step on the device), host_wait_s
(time the host spent waiting for the device to hand back tokens) and wall_s."""

# --8<-- [start:imports]
import time

import torch
from _model import PIECES, compiled_pieces
from _paged import PagedCache, layer_attention

# --8<-- [end:imports]

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384)  # prefill's token counts, each a graph


# --8<-- [start:engine]
class Seq:
    def __init__(self, req: dict, arrival_s: float):
        self.id, self.prompt, self.max_new = req["id"], req["prompt"], req["max_new_tokens"]
        self.arrival_s, self.out, self.token_s, self.blocks, self.row = arrival_s, [], [], [], None
        self.made, self.src = 0, None  # tokens launched so far; where the latest one lies on the device

    @property
    def length(self) -> int:  # tokens in the cache once the next decode step has written its input
        return len(self.prompt) + self.made


class Engine:
    def __init__(self, model, *, max_batch=256, block_size=16, num_blocks=None, buckets=BUCKETS, cuda_graphs=True,
                 max_prefill_tokens=16384, continuous=True, attention="triton", max_model_len=None, compiled=True,
                 one_call_prefill=True, overlap=True, prefill_graphs=True,
                 prefill_buckets=PREFILL_BUCKETS):  # fmt: skip
        c, w = model.config, model.lm_head.weight
        self.model, self.device, self.continuous = model, w.device, continuous
        self.max_batch, self.max_prefill_tokens = max_batch, max_prefill_tokens
        self.cuda = w.is_cuda
        self.pieces = compiled_pieces() if compiled and self.cuda else PIECES
        self.one_call_prefill, self.overlap = one_call_prefill, overlap
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
        self.pad, self.use_graphs = cuda_graphs, cuda_graphs and self.cuda  # padded eagerly on a CPU
        self.prefill_pad = prefill_graphs and cuda_graphs  # on a CPU: padded to the bucket, run eagerly
        self.prefill_buckets = sorted({b for b in prefill_buckets if b < max_prefill_tokens} | {max_prefill_tokens})
        self.max_len = self.width * block_size  # no prompt is longer: attention's longest sequence
        self.prefill_graphs, self.prefill_io = {}, {}
        self.stats: dict = {}
        if self.use_graphs:
            self.capture_all()

    def upload(self, values, dtype=torch.long):
        """A host list (or CPU tensor) to the device; with overlap, through pinned memory, without a sync."""
        t = values.to(dtype) if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=dtype)
        if not self.cuda:
            return t
        return t.pin_memory().to(self.device, non_blocking=True) if self.overlap else t.to(self.device)

    @torch.no_grad()
    def run_decode(self, b: int):
        """The decode step over the first b slots of the static inputs (eager; what a graph captures)."""
        return self.model.decode(
            self.tokens[:b], self.positions[:b], self.table[:b], self.lens[:b], self.cache, self.attention, self.pieces
        )

    def capture_all(self) -> None:
        """One graph per bucket, largest first, in one shared pool: time and memory per capture."""
        side = torch.cuda.Stream()  # warm-up on a side stream (compiles, Triton's autotuning, cuBLAS's workspaces)
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
        if self.prefill_pad:
            self.capture_prefill()

    def prefill_slots(self, t: int) -> tuple[int, int]:
        """Bucket t's capacity: (prompts, sequences in its cu_seqlens)."""
        prompts = min(self.max_batch, max(1, t // 16))
        return prompts, prompts + -(-t // min(t, self.max_len))

    def prefill_layout(self, t: int, lengths: list[int]):
        """(cu_seqlens, last) of these prompts in bucket t, or None if they do not fit. The padding
        after the prompts forms sequences of its own (at most max_len each), then empty ones."""
        prompts, seqs = self.prefill_slots(t)
        n, longest = sum(lengths), min(t, self.max_len)
        if n > t or len(lengths) > prompts:
            return None
        cu = [0]
        for length in lengths:
            cu.append(cu[-1] + length)
        last = [e - 1 for e in cu[1:]]
        while cu[-1] < t:
            cu.append(min(t, cu[-1] + longest))
        return cu + [t] * (seqs + 1 - len(cu)), last + [0] * (prompts - len(last))

    @torch.no_grad()
    def run_prefill(self, t: int):
        """The prefill over bucket t's static inputs (eager; what its graph captures)."""
        io = self.prefill_io[t]
        return self.model.prefill(
            io["tokens"], io["positions"], None, self.cache, io["slots"], self.pieces,
            last=io["last"], varlen=(io["cu"], min(t, self.max_len)),
        )  # fmt: skip

    def capture_prefill(self) -> None:
        """One graph per prefill bucket, largest first, in the decode graphs' pool, after them: a
        graph's output survives only the replays of graphs captured after it (decode's outputs were
        held while these were captured), so a prefill graph's output is copied out at once."""
        dev = self.device
        for t in reversed(self.prefill_buckets):
            cu, last = self.prefill_layout(t, [])
            self.prefill_io[t] = {
                "tokens": torch.zeros(t, dtype=torch.long, device=dev),
                "positions": torch.zeros(t, dtype=torch.long, device=dev),
                "slots": torch.zeros(t, dtype=torch.long, device=dev),
                "cu": torch.tensor(cu, dtype=torch.int32, device=dev),
                "last": torch.tensor(last, dtype=torch.long, device=dev),
            }
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.run_prefill(t)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                self.prefill_io[t]["out"] = self.run_prefill(t)
            torch.cuda.synchronize()
            self.prefill_graphs[t] = graph

    def decode_inputs(self, running: list, b: int) -> None:
        """Fill the static inputs for the first b slots (padding: token 0 at position 0 of block 0).
        With overlap, the input tokens are copied on the device from the step that made them."""
        n = len(running)
        meta = [[s.length - 1, s.length] for s in running] + [[0, 1]] * (b - n)
        self.positions[:b].copy_(self.upload([m[0] for m in meta]), non_blocking=True)
        self.lens[:b].copy_(self.upload([m[1] for m in meta], torch.int32), non_blocking=True)
        rows = torch.stack([s.row for s in running] + [torch.zeros(self.width, dtype=torch.int32)] * (b - n))
        self.table[:b].copy_(rows.pin_memory() if self.cuda and self.overlap else rows, non_blocking=True)
        if not self.overlap:
            self.tokens[:b].copy_(self.upload([s.out[-1] for s in running] + [0] * (b - n)))
            return
        self.tokens[n:b].zero_()
        groups = {}  # per source tensor: (the tensor, the slots here, the indices there)
        for j, s in enumerate(running):
            src, k = s.src
            _, here, there = groups.setdefault(id(src), (src, [], []))
            here.append(j)
            there.append(k)
        for src, here, there in groups.values():
            if here == there == list(range(len(here))):  # the same sequences in the same slots as last step
                self.tokens[: len(here)].copy_(src[: len(here)])
            else:
                self.tokens.index_copy_(0, self.upload(here), src.index_select(0, self.upload(there)))

    def decode_step(self, running: list):
        """Fill the inputs, replay the bucket's graph (or run eagerly): the tokens, on the device."""
        n = len(running)
        b = next(x for x in self.buckets if x >= n) if self.pad else n
        self.decode_inputs(running, b)
        if self.use_graphs:
            self.graphs[b].replay()
            out = self.outputs[b]
        else:
            out = self.run_decode(b)
        self.stats["padded_slots"][b] = self.stats["padded_slots"].get(b, 0) + b - n
        self.stats["decode_batches"].append(n)
        return out

    @torch.no_grad()
    def prefill_step(self, seqs: list):
        """The new prompts packed into one row, padded to the smallest bucket that holds them and
        replayed from its graph (else eager). Returns each prompt's first token, on the device."""
        bs, tokens, positions, slots, lengths = self.cache.block_size, [], [], [], [len(s.prompt) for s in seqs]
        for s in seqs:
            tokens += s.prompt
            p = torch.arange(len(s.prompt))
            positions.append(p)
            slots.append(torch.tensor(s.blocks)[p // bs] * bs + p % bs)  # vectorised: prompts are long
        n, fits = len(tokens), lambda t: t >= len(tokens) and len(seqs) <= self.prefill_slots(t)[0]
        t = next((t for t in self.prefill_buckets if fits(t)), None) if self.prefill_pad else None
        if t is None:  # one eager prefill at the prompts' own length
            ranges = [(e - length, e) for e, length in zip(torch.tensor(lengths).cumsum(0).tolist(), lengths)]
            last = self.upload([e - 1 for _, e in ranges])
            tokens, positions = self.upload(tokens), self.upload(torch.cat(positions))
            return self.model.prefill(
                tokens, positions, ranges, self.cache, self.upload(torch.cat(slots)), self.pieces,
                self.one_call_prefill, last,
            )  # fmt: skip
        cu, last = self.prefill_layout(t, lengths)
        padding = torch.zeros(t - n, dtype=torch.long)  # token 0 at position 0, into slot 0 of the dummy block 0
        inputs = {
            "tokens": self.upload(tokens + [0] * (t - n)), "positions": self.upload(torch.cat([*positions, padding])),
            "slots": self.upload(torch.cat([*slots, padding])), "cu": self.upload(cu, torch.int32),
            "last": self.upload(last),
        }  # fmt: skip
        self.stats["prefill_padding"] = self.stats.get("prefill_padding", 0) + t - n
        if not self.use_graphs:
            out = self.model.prefill(
                inputs["tokens"], inputs["positions"], None, self.cache, inputs["slots"], self.pieces,
                last=inputs["last"], varlen=(inputs["cu"], min(t, self.max_len)),
            )  # fmt: skip
            return out[: len(seqs)]
        io = self.prefill_io[t]
        for name, value in inputs.items():
            io[name].copy_(value, non_blocking=True)
        self.prefill_graphs[t].replay()
        return io["out"][: len(seqs)].clone()  # before any other replay: the pool's graphs reuse its memory

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

    def launch(self, pending: list, running: list) -> tuple:
        """One model step, launched: a prefill of pending prompts (as many as fit in
        max_prefill_tokens, at least one) if any, else a decode of every running sequence."""
        if pending:
            batch, budget = [], self.max_prefill_tokens
            while pending and (not batch or len(pending[0].prompt) <= budget):
                budget -= len(pending[0].prompt)
                batch.append(pending.pop(0))
            self.stats["prefill_steps"] += 1
            running += batch
            return "prefill", batch, self.prefill_step(batch)
        self.stats["decode_steps"] += 1
        return "decode", list(running), self.decode_step(running)

    def serve(self, requests: list[dict], arrivals: list[float]) -> list[dict]:
        """Online: request i is admitted no earlier than arrivals[i] seconds after the start."""
        waiting = sorted((Seq(r, a) for r, a in zip(requests, arrivals)), key=lambda s: s.arrival_s)
        pending, running, done, inflight = [], [], [], []
        self.stats = {"prefill_steps": 0, "decode_steps": 0, "padded_slots": {}, "decode_batches": [],
                      "waits_for_blocks": 0, "max_running": 0}  # fmt: skip
        spans, host_wait = {"prefill": [], "decode": []}, 0.0
        if self.cuda:
            torch.cuda.synchronize()
            origin = torch.cuda.Event(enable_timing=True)
            origin.record()
        start = time.perf_counter()

        def read(step) -> None:  # the host gets a step's tokens: they count from now
            nonlocal host_wait
            seqs, host, done_event = step
            t0 = time.perf_counter()
            if done_event is not None:
                done_event.synchronize()
            tokens = host.tolist()
            t = time.perf_counter()
            host_wait += t - t0
            for s, token in zip(seqs, tokens):
                s.out.append(token)
                s.token_s.append(t - start)

        while waiting or pending or running or inflight:
            now = time.perf_counter() - start
            self.admit(waiting, pending, running, now)
            if not (pending or running):  # nothing to launch: finish what is in flight, or idle until an arrival
                if inflight:
                    read(inflight.pop(0))
                else:
                    time.sleep(max(0.0, waiting[0].arrival_s - now))
                continue
            if self.cuda:
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
            kind, stepped, out = self.launch(pending, running)
            n = len(stepped)
            for j, s in enumerate(stepped):
                s.made, s.src = s.made + 1, (out, j)
            host, done_event = (out[:n].to("cpu", non_blocking=True), None) if self.overlap else (out[:n], None)
            if self.cuda:
                end.record()
                spans[kind].append((begin, end))
                done_event = end
            inflight.append((stepped, host, done_event))
            self.stats["max_running"] = max(self.stats["max_running"], len(running))
            for s in [s for s in running if s.made >= s.max_new]:  # finished: leave, blocks back at once
                running.remove(s)  # (the device runs steps in order: a later step reusing a block comes after)
                self.cache.release(s.blocks)
                done.append(s)
            while len(inflight) > (1 if self.overlap else 0):  # with overlap, the newest step stays in flight
                read(inflight.pop(0))
        self.stats["wall_s"] = wall = time.perf_counter() - start
        self.stats["steps"] = self.stats["prefill_steps"] + self.stats["decode_steps"]
        if self.cuda:
            busy = {k: sum(b.elapsed_time(e) for b, e in v) / 1e3 for k, v in spans.items()}
            self.stats["phases"] = {
                "prefill_s": busy["prefill"], "decode_s": busy["decode"],
                "gpu_idle_s": max(0.0, wall - busy["prefill"] - busy["decode"]), "host_wait_s": host_wait,
                "wall_s": wall,
            }  # fmt: skip
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
