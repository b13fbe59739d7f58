"""Module 09's facts that hold on any machine, checked on the CPU through the snippets' stand-in for a
captured CUDA graph (constraints.StandInGraph: replay reruns the function on the captured tensor
objects): the stale-input pitfall gives the captured input's answer and the copy fixes it; a larger
input does not fit the captured shape; host reads inside a capture are refused (the child-process
plumbing the GPU run uses is exercised too); dropout draws new numbers on each replay and repeats
them after the same seed; the decode step's static KV cache gives the logits of a plain causal
forward over the whole sequence, with the position read from a device tensor at each replay, as
one Dynamo graph; and the helpers that only a GPU uses (the pool byte count, the trees' log)
read what they are given."""

import logging
import statistics

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, load_snippet, run_script_once

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit's, imported with Dynamo in torch 2.13


@pytest.fixture(scope="module")
def constraints():
    return load_snippet("m09/constraints")


@pytest.fixture(scope="module")
def chain():
    return load_snippet("m09/chain")


@pytest.fixture(scope="module")
def apis():
    return load_snippet("m09/apis")


@pytest.fixture(scope="module")
def decode():
    return load_snippet("m09/decode")


def test_the_stale_input_gives_the_captured_inputs_answer_and_the_copy_fixes_it(constraints):
    r = constraints.stale_input("cpu")
    assert r["expected"] == [2.0 * i + 1 for i in range(8)]
    assert r["after_rebinding"] == [1.0] * 8  # affine of the zeros the graph was captured on
    assert r["after_copy"] == r["expected"]


def test_replay_writes_into_the_outputs_of_the_capture(constraints):
    x = torch.zeros(4)
    graph, y = constraints.capture(constraints.affine, x)
    x.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    graph.replay()
    assert graph.outputs is y and y.tolist() == [3.0, 5.0, 7.0, 9.0]


def test_a_larger_input_does_not_fit_and_a_smaller_one_is_padded(constraints):
    r = constraints.static_shape("cpu")
    assert r["captured_shape"] == [8]
    assert "must match the size of tensor b (16)" in r["copy_16_error"]
    assert r["padded_5_output"] == [1.0, 3.0, 5.0, 7.0, 9.0, 1.0, 1.0, 1.0]  # the padding is computed too


@pytest.mark.parametrize("work", ["item", "if_on_a_tensor"])
def test_host_reads_are_refused_inside_the_stand_in_capture(constraints, work):
    r = constraints.capture_error(work, "cpu")
    assert r["raised"] and r["device_usable_after"]
    assert "_local_scalar_dense" in r["errors"][0]["message"]
    assert constraints.capture_error.__name__  # the pure function below is captured without complaint
    graph, _ = constraints.capture(constraints.affine, torch.ones(3))
    graph.replay()


def test_the_child_process_plumbing_returns_the_childs_answer(constraints, monkeypatch):
    """What the GPU run does for each host read (a fresh process importing the snippet by its path),
    here with the CPU stand-in inside the child."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = constraints.child_result("item", constraints.in_child("item", "cpu"))
    assert r["work"] == "item" and r["raised"], r
    assert "_local_scalar_dense" in r["errors"][0]["message"]


def test_dropout_draws_new_numbers_on_each_replay_and_repeats_them_after_the_same_seed(constraints):
    r = constraints.dropout_replays("cpu")
    assert all(r["replays_differ"]) and len(r["replays_differ"]) == 2
    assert r["reseeded_replays_equal"] and r["replay_equals_eager_after_same_seed"]
    assert all(0.4 < f < 0.6 for f in r["kept_fraction"]), r["kept_fraction"]


def test_chain_capture_and_replay_on_the_stand_in(chain):
    x = torch.zeros(4)
    graph, capture_us, instantiate_us = chain.captured(chain.chain, x, 3)
    assert torch.equal(x, torch.full((4,), 3.0)) and capture_us > 0 and instantiate_us == 0
    graph.replay()
    assert torch.equal(x, torch.full((4,), 6.0))
    graph, _, _ = chain.captured(chain.chain_out_of_place, x, 5)
    assert torch.equal(graph.outputs, torch.full((4,), 11.0)) and torch.equal(x, torch.full((4,), 6.0))


def test_pool_bytes_sums_the_segments_of_that_pool_only(chain, monkeypatch):
    segments = [
        {"segment_pool_id": (3, 0), "total_size": 2 * 2**20},
        {"segment_pool_id": [3, 0], "total_size": 64 * 2**20},  # tuple or list, as the binding gives it
        {"segment_pool_id": (0, 0), "total_size": 2**30},  # the default pool
        {"segment_pool_id": (4, 0), "total_size": 20 * 2**20},  # another graph's
    ]
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: segments)
    assert chain.pool_bytes((3, 0)) == 66 * 2**20
    assert chain.pool_bytes((5, 0)) == 0


def test_the_trees_log_keeps_debug_messages_without_printing_them(apis, capfd):
    import torch._inductor.cudagraph_trees as trees

    logger = logging.getLogger(apis.TreesLog.LOGGERS[0])
    propagate = logger.propagate
    with apis.TreesLog() as log:
        trees.log.debug("[%s] Recording function=%s, cuda_graph_id=%d", "0/0", "forward", 0)
        trees.log.debug("[%s] Running warmup function=%s", "0/0", "forward")
    trees.log.debug("[0/0] Recording function=after")  # not kept: the handler is gone
    assert log.count("Recording function=") == 1 and log.count("Running warmup function=") == 1
    assert not any(h is log for h in logger.handlers) and logger.propagate == propagate
    assert "Recording function" not in capfd.readouterr().err


def test_graphed_training_and_the_compiled_calls_on_the_cpu(apis):
    torch.manual_seed(0)
    g = apis.graphed_training(apis.CountedMLP(16), torch.randn(4, 16))
    assert g["num_warmup_iters_default"] == 3
    assert g["forwards_while_graphing"] == 0 and g["forwards_in_one_step"] == 1  # the stand-in: eager
    assert g["max_abs_output_diff"] == 0 and g["max_abs_grad_diff"] == 0
    mlp = torch.nn.Linear(16, 16)
    with torch.no_grad():
        calls = apis.reduce_overhead_calls(mlp, [torch.randn(4, 16) for _ in range(3)], backend="eager")
    assert [c["call"] for c in calls] == [1, 2, 3]
    assert [c["previous_output"] for c in calls] == ["none", "kept", "kept"]
    assert all(c["recordings"] == 0 for c in calls)  # no CUDA graphs on a CPU
    assert apis.short_paths("at /a/b/cudagraph_trees.py:12") == "at cudagraph_trees.py:12"


def full_sequence_logits(model, tokens):
    """The decoder's weights over a whole sequence at once, causal attention, no cache."""
    b, t = tokens.shape
    x = model.embed(tokens) + model.pos_embed(torch.arange(t))
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for block in model.blocks:
        attn = block.attn
        q, k, v = attn.qkv(block.norm1(x)).view(b, t, 3, attn.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
        x = x + attn.out(y.transpose(1, 2).reshape(b, t, -1))
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x)).transpose(0, 1)  # (steps, batch, vocab), as the decode loop stacks them


def test_the_static_cache_decode_matches_a_full_causal_forward(decode, constraints):
    torch.manual_seed(0)
    shape = dict(decode.CPU, capacity=8)
    model = decode.Decoder(**shape, batch=2).eval()
    token, pos = torch.zeros(2, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    tokens = torch.randint(shape["vocab"], (2, 6))
    with torch.no_grad():
        expected = full_sequence_logits(model, tokens)
        eager = decode.teacher_forced_logits(lambda: model(token, pos), token, pos, tokens)
        for cache in (b for name, b in model.named_buffers() if name.endswith("_cache")):
            cache.zero_()
        pos.zero_()
        graph, out = constraints.capture(model, token, pos)  # the stand-in: reads pos at each replay
        replayed = decode.teacher_forced_logits(lambda: (graph.replay(), out)[1], token, pos, tokens)
    torch.testing.assert_close(eager, expected, atol=1e-4, rtol=1e-4)
    assert torch.equal(replayed, eager)
    written = model.blocks[0].attn.k_cache.abs().sum(dim=(0, 1, 3))
    assert (written[:6] > 0).all() and (written[6:] == 0).all()  # slots 0-5 written, 6-7 untouched


def test_the_decode_step_is_one_dynamo_graph_and_wraps_past_its_capacity(decode):
    torch.manual_seed(0)
    shape = dict(decode.CPU, capacity=8)
    model = decode.Decoder(**shape, batch=1).eval()
    token, pos = torch.zeros(1, 1, dtype=torch.long), torch.tensor([8 + 3])
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", fullgraph=True, dynamic=False)  # raises on a graph break
    with torch.no_grad():
        logits, nxt = compiled(token, pos)
        decode.step(lambda: compiled(token, pos), token, pos)
        again, _ = model(token, pos.sub(1))
    torch._dynamo.reset()
    assert logits.shape == (1, shape["vocab"]) and nxt.shape == (1, 1)
    assert pos.item() == 12 and torch.equal(token, nxt)  # the step fed the token back and advanced pos
    assert model.blocks[0].attn.k_cache[0, 0, 3].abs().sum() > 0  # position 11 wrote slot 11 % 8 = 3
    assert again.shape == logits.shape


@pytest.fixture(scope="module")
def control():
    return load_snippet("m09/control")


def test_the_controls_three_replays_give_eagers_logits_from_one_dynamo_graph(control, decode):
    """The fair control's variants on the CPU stand-in: the eager capture, the hand capture of the
    compiled module (its replays run the compiled step) and the second compile all give eager's
    logits, and the two compiles share one Dynamo graph of the whole step (fullgraph, no recompile)."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = decode.Decoder(**decode.CPU, batch=1).eval()
    token, pos = torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    tokens = torch.randint(decode.CPU["vocab"], (1, 5))
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        runs, facts = control.variants(model, token, pos, cuda=False)
        eager = decode.teacher_forced_logits(lambda: model(token, pos), token, pos, tokens)
        replayed = {name: decode.teacher_forced_logits(run, token, pos, tokens) for name, run in runs.items()}
    graphs = counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    assert list(runs) == control.VARIANTS
    for name, logits in replayed.items():
        assert torch.equal(logits, eager), name
    assert graphs == 1
    assert facts["trees_recordings"] == 0 and facts["cudagraph_skips"] == []  # no CUDA graph trees on a CPU
    assert set(facts["first_call_s"]) == {"default", "reduce_overhead"}


def test_the_controls_ratios_are_paired_by_round(control):
    """On measure(small=True)'s data from the run every snippet gets once per test run (as its
    download, conftest.run_script_once), not from a second run here."""
    proc = run_script_once(ROOT / "snippets" / "m09" / "control.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = proc.data
    assert r["variants"] == control.VARIANTS and set(r["step_us"]) == set(control.VARIANTS)
    rounds = {k: v["rounds"] for k, v in r["step_us"].items()}
    assert all(len(v) == r["repetitions"] for v in rounds.values())
    paired = sorted(d / t for d, t in zip(rounds["default_graph"], rounds["reduce_overhead"]))
    assert r["reduce_overhead_over_default_graph"]["median"] == pytest.approx(statistics.median(paired))
    assert r["reduce_overhead_over_default_graph"]["min"] == pytest.approx(paired[0])
    assert set(r["speedup_over_eager_graph"]) == {"default_graph", "reduce_overhead"}
    assert all(v["n"] == r["repetitions"] * r["issue_samples_per_round"] for v in r["issue_us"].values())
    assert r["kernels_per_step"] == dict.fromkeys(control.VARIANTS, 0)  # no CUDA kernels on a CPU
    assert all(v == 0.0 for v in r["max_abs_logit_diff"].values()) and all(r["same_greedy_tokens"].values())
