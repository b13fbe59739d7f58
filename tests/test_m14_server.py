"""Module 14's server on the CPU, at TINY sizes: ours computes HF's logits; the engine generates exactly
the plain loop's greedy tokens (continuous and static batching, padded to buckets, sequences over
several blocks, admission waiting for blocks, the Triton kernel in its interpreter); the paged
attention matches a dense reference; the decode step cut in pieces around attention gives the same
tokens as the whole step; the workload is seeded."""

import pytest
import torch
from conftest import ROOT, load_snippet, run_script_once

model_mod = load_snippet("m14/_model")
workload = load_snippet("m14/_workload")
server = load_snippet("m14/_server")
attention = load_snippet("m14/attention")
buckets = load_snippet("m14/buckets")

TINY = model_mod.TINY


@pytest.fixture(scope="module")
def models():
    hf = model_mod.hf_model(TINY, device="cpu", dtype=torch.float32)
    return hf, model_mod.Llama.from_hf(hf)


@pytest.fixture(scope="module")
def reqs_and_refs(models):
    reqs = workload.requests(6, 4, 12, 5, vocab=TINY["vocab_size"])
    reqs[2]["max_new_tokens"] = 9  # different lengths: requests finish at different steps
    return reqs, [model_mod.reference_greedy(models[1], r["prompt"], r["max_new_tokens"]) for r in reqs]


def test_ours_computes_hf_logits_with_hf_tensors(models):
    hf, ours = models
    ids = torch.randint(0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        diff = (hf(ids).logits - ours(ids)).abs().max().item()
    assert diff < 1e-5
    assert ours.lm_head.weight.data_ptr() == hf.lm_head.weight.data_ptr()  # shared, not copied
    assert model_mod.reference_greedy(hf, [5, 6, 7], 6) == model_mod.reference_greedy(ours, [5, 6, 7], 6)


ENGINES = {
    "continuous": dict(block_size=4),
    "static": dict(block_size=4, continuous=False, max_batch=4),
    "eager_unpadded": dict(block_size=4, cuda_graphs=False),
    "waits_for_blocks": dict(block_size=4, num_blocks=9, max_batch=3),  # 8 usable blocks: about two at a time
    "no_overlap": dict(block_size=4, overlap=False),  # the host reads every step's tokens before the next
    "padded_prefill": dict(block_size=4, prefill_graphs=False),  # one SDPA call a layer over the padded prompts
    "prompt_by_prompt": dict(block_size=4, one_call_prefill=False, prefill_graphs=False),  # one per prompt
    "first_version": dict(block_size=4, overlap=False, one_call_prefill=False, compiled=False, prefill_graphs=False),
    "small_prefill_buckets": dict(block_size=4, prefill_buckets=(8, 16), max_prefill_tokens=24),
}


@pytest.mark.parametrize("name", ENGINES)
def test_engine_generates_the_plain_loops_tokens(models, reqs_and_refs, name):
    reqs, refs = reqs_and_refs
    engine = server.Engine(models[1], attention="gather", max_model_len=64, **ENGINES[name])
    out = engine.generate(reqs)
    assert [o["id"] for o in out] == [r["id"] for r in reqs]
    assert [o["tokens"] for o in out] == refs
    for o in out:
        assert o["token_s"][0] == o["first_token_s"] and o["token_s"] == sorted(o["token_s"])
    s = engine.stats
    assert s["steps"] == s["prefill_steps"] + s["decode_steps"]
    assert len(engine.cache.free) == engine.cache.num_blocks - 1  # every block back; block 0 never handed out
    if name == "waits_for_blocks":
        assert s["waits_for_blocks"] > 0 and s["max_running"] < len(reqs)
    if name == "continuous":
        expected = {}
        for n in s["decode_batches"]:  # 6 running -> bucket 8, 1 running -> bucket 1
            b = next(x for x in engine.buckets if x >= n)
            expected[b] = expected.get(b, 0) + b - n
        assert s["padded_slots"] == expected and expected[8] > 0 and set(s["decode_batches"]) == {6, 1}
    if name == "static":  # the second batch starts only after the first finished
        assert s["prefill_steps"] == 2 and s["decode_batches"][:4] == [4, 4, 4, 4]


def test_prefill_layout_covers_the_bucket(models):
    engine = server.Engine(models[1], attention="gather", max_model_len=64, block_size=4, prefill_buckets=(32, 256))
    assert engine.prefill_buckets == [32, 256, 16384] and engine.max_len == 64
    assert engine.prefill_slots(32) == (2, 3)  # two prompts; a third sequence for the padding
    assert engine.prefill_layout(32, [5, 9]) == ([0, 5, 14, 32], [4, 13])
    assert engine.prefill_layout(32, [5, 9, 1]) is None and engine.prefill_layout(32, [33]) is None
    cu, last = engine.prefill_layout(256, [5, 9, 1])  # padding of 241 tokens in pieces of at most 64
    assert cu[:8] == [0, 5, 14, 15, 79, 143, 207, 256] and set(cu[8:]) == {256} and len(cu) == 16 + 4 + 1
    assert last == [4, 13, 14] + [0] * 13


def test_varlen_attention_is_each_prompts_causal_attention(models):
    ours = models[1]
    torch.manual_seed(4)
    lengths = (5, 0, 1, 9, 3)  # an empty sequence too, as a bucket's unused entries are
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    n, h, kv, d = int(cu[-1]), ours.heads, ours.kv_heads, ours.head_dim
    q, k, v = torch.randn(n, h, d), torch.randn(n, kv, d), torch.randn(n, kv, d)
    got = model_mod.varlen_attention(q, k, v, cu, max(lengths))
    ranges = [(s, e) for s, e in zip(cu.tolist(), cu[1:].tolist()) if e > s]
    positions = torch.cat([torch.arange(e - s) for s, e in ranges])
    ref = model_mod.PaddedPrompts(ranges, positions).attention(q, k, v)
    assert (got - ref).abs().max().item() < 1e-5


def test_one_prefill_call_per_layer_equals_one_per_prompt(models):
    ours = models[1]
    torch.manual_seed(3)
    ranges, start = [], 0
    for n in (5, 1, 9, 3):  # prompts of different lengths, packed, one of a single token
        ranges.append((start, start + n))
        start += n
    positions = torch.cat([torch.arange(e - s) for s, e in ranges])
    h, kv, d = ours.heads, ours.kv_heads, ours.head_dim
    q, k, v = torch.randn(start, h, d), torch.randn(start, kv, d), torch.randn(start, kv, d)
    got = model_mod.PaddedPrompts(ranges, positions).attention(q, k, v)
    for s, e in ranges:
        qs, ks, vs = (y[s:e].transpose(0, 1)[None] for y in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=True)
        assert (got[s:e] - ref[0].transpose(0, 1)).abs().max().item() < 1e-5


@pytest.mark.parametrize("overlap", [True, False])
def test_overlap_launches_a_step_before_reading_the_last(models, reqs_and_refs, overlap):
    reqs, refs = reqs_and_refs
    engine = server.Engine(models[1], attention="gather", max_model_len=64, block_size=4, overlap=overlap)
    unread, launch = [], engine.launch

    def spy(pending, running):  # at each launch: tokens made on the device that the host has not read yet
        unread.append(sum(s.made - len(s.out) for s in running))
        return launch(pending, running)

    engine.launch = spy
    assert [o["tokens"] for o in engine.generate(reqs)] == refs
    assert len(unread) == engine.stats["steps"]
    assert (max(unread) > 0) == overlap and min(unread) == 0


def test_continuous_takes_fewer_steps_than_static(models, reqs_and_refs):
    reqs = [dict(r, max_new_tokens=9 if r["id"] == 0 else 2) for r in reqs_and_refs[0]]
    steps = {}
    for continuous in (True, False):
        engine = server.Engine(models[1], attention="gather", max_model_len=64, max_batch=2, continuous=continuous)
        engine.generate(reqs)
        steps[continuous] = engine.stats["decode_steps"]
    assert steps == {True: 8, False: 10}  # static: (9, 2) 8 steps, then (2, 2) twice, 1 step each


def test_engine_with_the_triton_kernel(models, reqs_and_refs):
    reqs, refs = reqs_and_refs
    engine = server.Engine(models[1], attention="triton", max_model_len=64, block_size=4)
    assert [o["tokens"] for o in engine.generate(reqs[:3])] == refs[:3]


def test_online_serving_waits_for_arrivals(models, reqs_and_refs):
    reqs, refs = reqs_and_refs
    arrivals = [0.0, 0.0, 0.2, 0.2, 0.4, 0.4]
    out = server.Engine(models[1], attention="gather", max_model_len=64).serve(reqs, arrivals)
    assert [o["tokens"] for o in out] == refs
    assert all(o["first_token_s"] >= a for o, a in zip(out, arrivals))


@pytest.mark.parametrize("kernel", ["paged_attention", "gathered_sdpa"])
def test_paged_attention_matches_dense(kernel):
    torch.manual_seed(0)
    p = attention.CPU
    q, cache, table, lens = attention.scattered_batch([1, 5, 17, 40], p, torch.float32, "cpu")
    ref = attention.dense_reference(q, cache, table, lens)
    out = getattr(attention, kernel)(q, cache.k[0], cache.v[0], table, lens)
    assert (out - ref).abs().max().item() < 1e-5


def test_buckets_pieces_compose_and_padding_counts():
    proc = run_script_once(ROOT / "snippets" / "m14" / "buckets.py")  # measure(small=True), run once per test run
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = proc.data
    assert data["modes"] and all(all(m["same_tokens_as_eager"].values()) for m in data["modes"])
    assert buckets.padding([3, 5, 8], (1, 2, 4, 8)) == {"real_slots": 16, "padded_slots": 4, "waste": 0.25}
    assert buckets.padding([3, 5, 8], buckets.VLLM_SIZES)["padded_slots"] == 1 + 3 + 0


def test_workload_is_seeded_and_in_range():
    a, b = workload.requests(), workload.requests()
    assert a == b and len(a) == 256
    lengths = [len(r["prompt"]) for r in a]
    assert min(lengths) >= 64 and max(lengths) <= 512 and max(lengths) - min(lengths) > 300
    assert all(r["max_new_tokens"] == 128 for r in a)
    t = workload.poisson_arrivals(2000, 10.0)
    assert t == sorted(t) and abs(t[-1] / len(t) - 0.1) < 0.01  # mean gap 1 / rate
