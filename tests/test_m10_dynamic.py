"""Module 10's facts that hold on any machine, checked on the CPU with Dynamo's own backends: the default
specialises first and goes dynamic on the second size, size 1 gets a graph of its own, the controls compile
what the page says they compile, the recompile limit stops compiling and keeps the answers right, .item()
and nonzero break the graph unless captured as unbacked symbols, and bucketing trades graphs for padding."""

import json
import re

import pytest
import torch
from conftest import ROOT, load_snippet

SYMBOL = r"\bs\d+\b"


@pytest.fixture(scope="module")
def sweep():
    return load_snippet("m10/sweep")


@pytest.fixture(scope="module")
def kernels():
    return load_snippet("m10/kernels")


@pytest.fixture(scope="module")
def controls():
    return load_snippet("m10/controls")


@pytest.fixture(scope="module")
def unbacked():
    return load_snippet("m10/unbacked")


@pytest.fixture(scope="module")
def bucketing():
    return load_snippet("m10/bucketing")


def test_the_default_specialises_then_goes_dynamic_and_size_one_gets_its_own_graph(sweep):
    model = sweep.MLP(16).eval()
    with torch.no_grad():
        up = sweep.sweep(model, [1, 2, 8], 16, "aot_eager", "cpu", torch.float32)
        eight = sweep.sweep(model, [8, 16, 1, 2], 16, "aot_eager", "cpu", torch.float32)
    assert up["graphs"] == 2 and up["compiled_at"] == [1, 2]
    assert eight["graphs"] == 3 and eight["compiled_at"] == [8, 16, 1]
    assert eight["x_in_graph"][0].startswith("f32[8, 16]") and eight["x_in_graph"][2].startswith("f32[1, 16]")
    assert re.search(SYMBOL, eight["x_in_graph"][1]), eight["x_in_graph"]
    assert all(s.endswith("[2, int_oo]") for s in up["symbols"] + eight["symbols"]) and eight["symbols"]
    assert "expected 8, actual 16" in eight["recompile_reasons"][0]
    assert "2 <= x.size()[0]" in eight["recompile_reasons"][1] and "0/1 specialization" in eight["recompile_reasons"][1]
    dynamic_guards = "\n".join(eight["x_guards"][1])
    assert "size=[None, 16]" in dynamic_guards and "2 <= L['x'].size()[0]" in dynamic_guards
    assert str(ROOT) not in json.dumps(eight), "file paths in stored messages are cut to the file's name"
    for call in up["calls"] + eight["calls"]:
        assert (call["compile_s"] > 0) == call["compiled"], call  # Dynamo timed a compile exactly when one happened
        assert call["seconds"] > 0 and (call["repeat"] == 1 or not call["compiled"])
    assert [c["compiled"] for c in eight["calls"] if c["batch"] == 2] == [False, False, False]  # the dynamic graph


M06 = ROOT / "build_results" / "nvidia-h200" / "m06" / "norm_block.json"


@pytest.mark.skipif(not M06.exists(), reason="needs m06/norm_block's stored Triton source, measured on a GPU")
def test_the_kernel_parser_reads_inductors_triton_output(kernels):
    """On real torch 2.11 output (m06's kernel): a looped reduction with its sizes written in; then the same
    kernel edited as a dynamic compile writes one: the row count no longer written in, a size argument ks0."""
    data = json.loads(M06.read_text())["data"]
    (name,), (source,) = data["kernels"], data["sources"]
    module = f"{name} = async_compile.triton('{name}', '''\n{source}''', device_str='cuda')\n"
    (facts,) = kernels.kernel_facts(module)
    assert facts["name"] == name and facts["kind"] == "looped reduction"
    assert facts["constant_sizes"] == [f"xnumel = {data['rows']}", f"r0_numel = {data['d']}"]
    assert facts["size_args"] == []
    dynamic = source.replace(f"    xnumel = {data['rows']}\n", "").replace("out_ptr3, xnumel", "out_ptr3, ks0, xnumel")
    (facts,) = kernels.kernel_facts(module.replace(source, dynamic))
    assert facts["constant_sizes"] == [f"r0_numel = {data['d']}"] and facts["size_args"] == ["ks0"]
    persistent = module.replace(name, name.replace("triton_red_", "triton_per_"))
    assert kernels.kernel_facts(persistent)[0]["kind"] == "persistent reduction"


def test_dynamic_true_gives_the_graph_symbols_and_the_weights_fix_the_row_length(kernels):
    w = torch.nn.Parameter(torch.ones(32))
    b = torch.nn.Parameter(torch.zeros(32))

    def look(fn, args, dynamic):
        torch._dynamo.reset()  # copies of one function share Dynamo's record of the sizes seen (keyed by file and line)
        with torch.no_grad():
            return kernels.compile_and_look(fn, args, dynamic, "aot_eager")[1]

    plain = look(kernels.norm_gelu_plain, (torch.randn(16, 32),), True)
    rows = look(kernels.norm_gelu, (torch.randn(16, 32), w, b), True)
    static = look(kernels.norm_gelu, (torch.randn(16, 32), w, b), False)
    square = look(kernels.norm_gelu, (torch.randn(32, 32), w, b), True)
    assert len(set(re.findall(SYMBOL, plain["x_in_graph"][0]))) == 2  # rows and row length
    assert re.match(rf"f32\[{SYMBOL}, 32\]", rows["x_in_graph"][0])  # the row length is the weights'
    assert static["x_in_graph"][0].startswith("f32[16, 32]")
    assert square["x_in_graph"][0].startswith("f32[32, 32]")  # duck sizing: one symbol, fixed by the weights
    assert plain["kernels"] == [] and plain["kernel_count"] == 0  # no Inductor on a CPU here


def test_each_control_compiles_what_the_page_says(controls):
    sizes = [8, 16, 1]
    got = {
        name: controls.graphs_over(controls.block, sizes, opts, mark)
        for name, (opts, mark) in controls.CONTROLS.items()
    }
    assert {name: g["compiled_at"] for name, g in got.items()} == {
        "default": [8, 16, 1],
        "dynamic_false": [8, 16, 1],
        "dynamic_true": [8, 1],
        "mark_dynamic": [8, 1],
        "maybe_mark_dynamic": [8, 1],
        "mark_unbacked": [8],
    }
    assert "u0" in got["mark_unbacked"]["x_in_graph"][0]
    assert got["default"]["x_in_graph"][0].startswith("f32[8, 64]")
    assert not any(g["error"] for g in got.values())


def test_mark_dynamic_refuses_a_dimension_the_model_fixes_and_maybe_mark_dynamic_does_not(controls):
    strict = controls.graphs_over(controls.add_positions, [8], {}, controls.MARKS["mark_dynamic"])
    lenient = controls.graphs_over(controls.add_positions, [8], {}, controls.MARKS["maybe_mark_dynamic"])
    assert strict["error"]["type"] == "ConstraintViolationError" and "L['x'].size()[0]" in strict["error"]["message"]
    assert lenient["error"] is None and lenient["graphs"] == 1 and lenient["x_in_graph"][0].startswith("f32[8, 64]")
    ducks = controls.duck_sizing()
    assert ducks["rows_64"][0].startswith("f32[64, 64]") and not ducks["rows_32"][0].startswith("f32[32")


def test_the_recompile_limit_stops_compiling_and_keeps_the_answers_right(controls):
    config = torch._dynamo.config
    assert config.recompile_limit == 8 and config.cache_size_limit == config.recompile_limit
    assert config.fail_on_recompile_limit_hit is False and config.allow_unspec_int_on_nn_module is False
    x = torch.randn(4, controls.D)
    with config.patch(recompile_limit=3):
        positions = list(range(2, 7))
        facts, past = controls.past_the_limit(x, "eager", positions)
        assert facts["graphs_after_call"] == [1, 2, 3, 3, 3] and facts["all_correct"]
        assert "recompile_limit (3)" in facts["warnings"][0] and str(ROOT) not in facts["warnings"][0]
        assert torch.allclose(past(x, 40), controls.rotate(x, 40))  # past the limit: eager, still right
        assert controls.graphs_over_int(x, positions) == 2  # an int argument becomes a symbol
        assert controls.module_int_attribute(x, positions) == [1, 2, 3, 3, 3]  # a module's int attribute does not
        failures = controls.hard_failures(x, positions)
    for name in ("fail_on_recompile_limit_hit", "fullgraph"):
        assert failures[name]["call"] == 4 and failures[name]["type"] == "FailOnRecompileLimitHit", failures


def test_item_and_nonzero_break_the_graph_unless_captured(unbacked):
    x = torch.randn(32)
    item = unbacked.explained(unbacked.mean_of_positives, x)
    assert item["graphs"] == 2 and "capture_scalar_outputs" in json.dumps(item["breaks"])
    assert "/ " + str(int((x > 0).sum())) in "\n".join(item["graph_code"][1])  # the count, a constant after the break
    captured = unbacked.explained(unbacked.mean_of_positives, x, **unbacked.CAPTURE)
    assert captured["unbacked_symbols"] == ["u0"] and captured["graph_breaks"] == 1
    assert "Eq(u0, 0)" in json.dumps(captured["breaks"])  # the branch on u0 cannot be decided
    checked = unbacked.explained(unbacked.mean_of_positives_checked, x, **unbacked.CAPTURE)
    assert checked["graphs"] == 1 and checked["graph_breaks"] == 0
    nonzero = unbacked.explained(unbacked.doubled_positives, x)
    assert nonzero["graphs"] == 2 and "nonzero" in json.dumps(nonzero["breaks"])
    whole = unbacked.explained(unbacked.doubled_positives, x, **unbacked.CAPTURE)
    assert whole["graphs"] == 1 and any('"i64[u0, 1]"' in line for line in whole["graph_code"][0])
    error = unbacked.fullgraph_error(unbacked.mean_of_positives, x, **unbacked.CAPTURE)
    assert error["type"] is not None and "data-dependent" in error["message"]


def test_buckets_trade_graphs_for_padding(bucketing):
    lengths = bucketing.request_lengths(64, 256, 1.0, 2048)
    assert lengths == bucketing.request_lengths(64, 256, 1.0, 2048) and 1 <= min(lengths) and max(lengths) <= 2048
    assert [bucketing.bucket(n, bucketing.POW2) for n in (1, 3, 5, 1025)] == [1, 4, 8, 2048]
    assert [bucketing.bucket(n, bucketing.LADDER) for n in (5, 7, 13, 1025)] == [6, 8, 16, 1536]
    model = bucketing.MLP(8).eval()
    inputs = [torch.randn(n, 8) for n in (5, 9, 12, 5, 7)]
    with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=2):
        ways = {
            name: bucketing.serve(model, inputs, buckets, dynamic, "eager")
            for name, (buckets, dynamic) in bucketing.WAYS.items()
        }
        exact, pow2, ladder = (ways[n]["facts"] for n in ("exact", "pow2", "ladder"))
        assert exact["graphs"] == 2 and exact["eager_requests"] == 2  # 5 and 9 compiled; 12 and 7 past the limit
        assert pow2["buckets_used"] == [8, 16] and pow2["graphs"] == 2 and pow2["eager_requests"] == 0
        assert ladder["buckets_used"] == [6, 8, 12] and ladder["graphs"] == 3  # the limit raised to fit its buckets
        assert ways["dynamic"]["facts"]["graphs"] == 1
        assert pow2["padding_waste"] == pytest.approx((8 + 16 + 16 + 8 + 8) / 38 - 1)
        for way in ways.values():  # padding changes no real row
            out = [way["run"](x)[: n.shape[0]] for x, n in zip(way["padded"], inputs)]
            for got, x in zip(out, inputs):
                torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)
