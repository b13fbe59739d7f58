"""CUDA-graph buckets for the server's decode step (_server.Engine over _model's CONFIG, bf16, blocks
of 16 tokens, Triton paged attention), three measurements:

(a) Capture: for the bucket set 1, 2, 4, ..., 256 (powers of two), each bucket's capture time (host
    clock, perf_counter around torch.cuda.graph after a synchronize) and memory: the growth of the
    caching allocator's reserved bytes and the drop in the device's free bytes (mem_get_info) around
    each capture, largest bucket first into one shared pool; and the pool's bytes at the end (its
    segments in torch.cuda.memory_snapshot).
(b) Padding waste: the decode batch sizes of two real Engine runs of the 256-request workload
    (offline, and Poisson arrivals at 32 requests/s), replayed against the power-of-two set and vLLM's
    default capture sizes (1, 2, 4, then multiples of 8 up to 256: vLLM's set_cudagraph_sizes
    docstring): padded slots over real slots, and the decode time each set implies, the sum over the
    run's steps of its bucket's replay time (each bucket's graph replayed with every slot at a
    350-token context: device time, bench.gpu_us) -- a model of the run, not a second run.
(c) Whole graph against piecewise: one decode step at batch 1, 16, 64, 256 (context 350), run
    eagerly; replayed from the Engine's whole-step graph (the eager model captured); with the two
    pieces of each layer around attention compiled (torch.compile of _model.attention_in and
    attention_out, one compile for all layers: weights are arguments) and the whole step captured as
    one graph; and piecewise, as vLLM v1 does it (splitting_ops, CUDAGraphWrapper) but split finer: each
    layer's two pieces captured as graphs of their own, attention launched eagerly between the replays
    (2 x 12 + 2 graphs a step; vLLM merges post(i) with pre(i+1): 13 pieces). Device time per step,
    the four interleaved (bench.gpu_us_each).

GPU: about 90 s (two cold compiles of two small pieces, 9 + 35 captures, two workload runs).
On the CPU (small=True): TINY, 6 requests, no CUDA graphs: (a) is empty, (b) uses the eager
engine's batch sizes (no replay times), (c) runs the model eagerly and as its pieces (uncompiled,
attention by the gather, no graphs) and checks that the two give the same tokens."""

# --8<-- [start:imports]
import torch
from _model import CONFIG, TINY, Llama, attention_in, attention_out, hf_model
from _paged import gathered_sdpa, paged_attention
from _server import BUCKETS, Engine
from _workload import poisson_arrivals, requests

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us, gpu_us_each

PROCESSES = 1  # device times of graph replays and a step; the variants interleave within one process
VLLM_SIZES = (1, 2, 4, *range(8, 257, 8))  # vLLM's default capture sizes up to 256
CONTEXT = 350  # tokens per sequence while timing a step: the workload's mean prompt plus some decoded


# --8<-- [start:pieces]
def step_pieces(model, engine, b: int, cin, cout, kernel=paged_attention):
    """The decode step as a list of callables run in order: [embed], per layer [pre, attention, post],
    [head]. cin and cout: attention_in and attention_out, compiled. Buffers between pieces are
    static (each piece writes a new tensor, kept alive by the closures: a graph's output)."""
    cache, layers, io = engine.cache, model.model.layers, {}
    tok, pos, table, lens = engine.tokens[:b], engine.positions[:b], engine.table[:b], engine.lens[:b]

    def embed():
        bs = cache.block_size
        io["slots"] = table.gather(1, (pos // bs)[:, None])[:, 0] * bs + pos % bs
        io["x"] = model.model.embed_tokens(tok)

    def pre(i):
        n = layers[i].input_layernorm
        q, k, v = cin(io["x"], pos, n.weight, n.eps, layers[i].qkv_weight, model.cos, model.sin, model.kv_heads)
        cache.write(i, io["slots"], k, v)
        io[("q", i)] = q  # per layer: captured piecewise, each layer's graph writes its own q
        io.setdefault(("attn", i), torch.empty_like(q))  # attention's output buffer, allocated once

    def attend(i):
        kernel(io[("q", i)], cache.k[i], cache.v[i], table, lens, out=io[("attn", i)])

    def post(i):
        L = layers[i]
        w = (L.self_attn.o_proj.weight, L.post_attention_layernorm.weight, L.gate_up_weight, L.mlp.down_proj.weight)
        io["x"] = cout(io["x"], io[("attn", i)], *w, L.post_attention_layernorm.eps)

    def head():
        io["next"] = model.logits(io["x"]).argmax(-1)

    pieces = [("graph", embed)]
    for i in range(len(layers)):
        pieces += [("graph", lambda i=i: pre(i)), ("eager", lambda i=i: attend(i)), ("graph", lambda i=i: post(i))]
    return pieces + [("graph", head)], io


def capture_pieces(pieces, pool, piecewise: bool):
    """piecewise: a graph per "graph" piece, attention eager between; else one graph for the step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compiles, Triton's autotuning, cuBLAS's workspaces
        for _ in range(2):
            for _, fn in pieces:
                fn()
    torch.cuda.current_stream().wait_stream(side)
    if not piecewise:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            for _, fn in pieces:
                fn()
        return [graph.replay]
    runs = []
    for kind, fn in pieces:
        if kind == "eager":
            runs.append(fn)
            continue
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            fn()
        runs.append(graph.replay)
    return runs


# --8<-- [end:pieces]


def set_context(engine, b: int, context: int) -> None:
    """Every one of b slots at a context of this many tokens, each in its own blocks."""
    per = engine.cache.blocks_for(context)
    engine.table[:b] = (
        1
        + torch.arange(b * per, device=engine.table.device, dtype=torch.int32)
        .view(b, per)
        .repeat(1, -(-engine.width // per))[:, : engine.width]
    )
    engine.positions[:b] = context - 1
    engine.lens[:b] = context


def padding(batches: list[int], buckets) -> dict:
    padded = sum(next(x for x in sorted(buckets) if x >= n) - n for n in batches)
    return {"real_slots": sum(batches), "padded_slots": padded, "waste": padded / sum(batches)}


def step_bytes(model, context: int) -> dict:
    """What one decode step must read at least: every weight it multiplies by (the fused q|k|v and
    gate|up copies the step uses, not the separate ones they were cut from), the norms and the head
    (an embedding row per sequence is left out: a few KB), and the keys and values per token of
    context, over all layers. The floor of a step at batch b is weights + b * context * kv_per_token
    bytes at the copy rate."""
    c = model.config
    weights = [model.lm_head.weight, model.model.norm.weight]
    for layer in model.model.layers:
        weights += [layer.qkv_weight, layer.self_attn.o_proj.weight, layer.gate_up_weight, layer.mlp.down_proj.weight]
        weights += [layer.input_layernorm.weight, layer.post_attention_layernorm.weight]
    size = model.lm_head.weight.element_size()
    return {
        "weights": sum(w.numel() * w.element_size() for w in weights),
        "kv_per_token": 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * size,
        "context": context,
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available() and not small
    config, device = (CONFIG, "cuda") if cuda else (TINY, "cpu")
    model = Llama.from_hf(hf_model(config, device=device, dtype=torch.bfloat16 if cuda else torch.float32))
    model.requires_grad_(False)  # inference: the compiled pieces are traced without autograd
    if cuda:
        reqs, rate, context, batches = requests(), 32.0, CONTEXT, [1, 16, 64, 256]
        kw = {"max_model_len": 640, "attention": "triton"}
    else:
        reqs, rate, context, batches = requests(6, 4, 12, 5, vocab=128), 200.0, 20, [1, 2]
        kw = {"max_model_len": 64, "attention": "gather", "max_batch": 8}
    kw["compiled"] = False  # the Engine's graphs capture the eager model: (c) compiles the pieces itself
    pow2 = Engine(model, buckets=BUCKETS, **kw)
    fine = Engine(model, buckets=VLLM_SIZES, **kw) if cuda else None
    data = {"device": device_name(), "buckets": list(pow2.buckets), "vllm_sizes": list(VLLM_SIZES), "captures": []}
    data["step_bytes"] = step_bytes(model, context)

    # (a) capture time and memory per bucket
    data["captures"] = pow2.captures
    if cuda:
        pool = tuple(pow2.pool)
        segments = torch.cuda.memory_snapshot()
        data["pool_bytes"] = sum(s["total_size"] for s in segments if tuple(s["segment_pool_id"]) == pool)
        data["fine_captures"] = fine.captures

    # (b) padding waste on real schedules, and the decode time each bucket set implies
    schedules = {}
    for name, arrivals in [("offline", [0.0] * len(reqs)), ("poisson", poisson_arrivals(len(reqs), rate))]:
        pow2.serve(reqs, arrivals)
        schedules[name] = list(pow2.stats["decode_batches"])
    replay_us = {}
    for engine, sizes in [(pow2, pow2.buckets), (fine, VLLM_SIZES)]:
        if engine is None or not engine.use_graphs:
            continue
        for b in sizes:
            set_context(engine, b, context)
            replay_us[b] = gpu_us(engine.graphs[b].replay, warmup_ms=5, rep_ms=30)
    data["replay_us"] = [{"batch": b, "us": s} for b, s in sorted(replay_us.items())]
    data["padding"] = []
    for name, batch_sizes in schedules.items():
        for set_name, sizes in [("pow2", pow2.buckets), ("vllm", VLLM_SIZES)]:
            point = {"schedule": name, "bucket_set": set_name, "decode_steps": len(batch_sizes)}
            point.update(padding(batch_sizes, sizes))
            if replay_us:
                point["modelled_decode_s"] = sum(
                    replay_us[next(x for x in sorted(sizes) if x >= n)]["median"] for n in batch_sizes
                ) * 1e-6  # fmt: skip
            data["padding"].append(point)
    data["schedules"] = [{"schedule": k, "decode_batches": v} for k, v in schedules.items()]
    data["poisson_rate_per_s"] = rate

    # (c) eager, whole graph (eager model), compiled pieces in one graph, compiled pieces piecewise
    if cuda:  # one compile serves all layers, and (dynamic) all batch sizes but 1
        cin, cout = torch.compile(attention_in, dynamic=True), torch.compile(attention_out, dynamic=True)
        kernel = paged_attention
    else:  # the CPU checks how the pieces compose: uncompiled, attention by the gather
        cin, cout = attention_in, attention_out
        kernel = lambda q, k, v, table, lens, out: out.copy_(gathered_sdpa(q, k, v, table, lens))  # noqa: E731
    data["modes"], data["mode_errors"] = [], {}
    for b in batches:
        set_context(pow2, b, context)
        variants, outputs = {"eager": lambda b=b: pow2.run_decode(b)}, {}
        if cuda:
            graph_b = next(x for x in pow2.buckets if x >= b)
            variants["whole_graph"], outputs["whole_graph"] = pow2.graphs[graph_b].replay, pow2.outputs[graph_b]
            for mode, piecewise in [("compiled_whole_graph", False), ("piecewise", True)]:
                pieces, io = step_pieces(model, pow2, b, cin, cout, kernel)  # its own buffers and pool
                try:
                    runs = capture_pieces(pieces, torch.cuda.graph_pool_handle(), piecewise)
                    variants[mode] = lambda runs=runs: [r() for r in runs]
                    outputs[mode] = io
                except Exception as e:  # stored verbatim: the page quotes what failed
                    data["mode_errors"][f"{mode}/{b}"] = f"{type(e).__name__}: {e}"[:2000]
        else:
            pieces, io = step_pieces(model, pow2, b, cin, cout, kernel)
            variants["pieces"], outputs["pieces"] = (lambda pieces=pieces: [fn() for _, fn in pieces]), io
        with torch.no_grad():
            ref = pow2.run_decode(b).clone()
            same = {}
            for name, fn in variants.items():
                if name != "eager":
                    set_context(pow2, b, context)  # the same inputs (a step writes only its own slot)
                    fn()
                    out = outputs[name] if name == "whole_graph" else outputs[name]["next"]
                    same[name] = bool(torch.equal(out[:b], ref))
            times = gpu_us_each(variants)
        graphs = {"whole_graph": 1, "compiled_whole_graph": 1, "piecewise": sum(k == "graph" for k, _ in pieces)}
        data["modes"].append({"batch": b, "us": times, "same_tokens_as_eager": same, "graphs_per_step": graphs})
    data["repetitions"] = data["modes"][0]["us"]["eager"]["n"]
    return data


if __name__ == "__main__":
    data = measure(small=not torch.cuda.is_available())
    print(f"decode buckets, {data['device']}")
    for c in data["captures"]:
        print(f"  capture batch {c['batch']:>4}: {c['capture_s'] * 1e3:8.1f} ms, {c['reserved_growth_bytes']:>12,} B")
    for p in data["padding"]:
        print(f"  {p['schedule']:>8} {p['bucket_set']:>5}: waste {p['waste']:.3f} over {p['decode_steps']} steps")
    for m in data["modes"]:
        print(f"  batch {m['batch']:>4}: " + ", ".join(f"{k} {v['median']:.1f} us" for k, v in m["us"].items()))
    for k, v in data["mode_errors"].items():
        print(f"  {k} failed: {v}")
