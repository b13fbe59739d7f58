"""Module 04's facts that must hold on any machine, checked on the CPU: the trace is wrong on the other
branch, script rejects ordinary Python, explain finds the print's break, the guards are what the page
says, and past the recompile limit the answers stay right while nothing more is compiled."""

import pytest
import torch
from conftest import ROOT, load_snippet

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit's, in torch 2.13


@pytest.fixture(scope="module")
def routes():
    return load_snippet("m04/failed_routes")


@pytest.fixture(scope="module")
def guards():
    return load_snippet("m04/guards")


def test_the_trace_is_silently_wrong_on_the_other_branch(routes):
    r = routes.trace_route("cpu")
    assert r["eager_on_negative"] == [1.0, 1.0, 1.0]  # -x
    assert r["traced_on_negative"] == [-2.0, -2.0, -2.0]  # x * 2, the branch it recorded
    assert "if" not in r["traced_code"] and "mul" in r["traced_code"]
    assert any("might cause the trace to be incorrect" in w for w in r["tracer_warnings"])


def test_script_rejects_ordinary_python_and_keeps_the_branch(routes):
    for fn in (routes.scale_by, routes.scale_or_keep):
        with pytest.raises(Exception):  # noqa: B017 - TorchScript raises RuntimeError or a frontend error
            torch.jit.script(fn)
    said = routes.script_error(routes.scale_or_keep)
    assert said["type"] is not None and "try" in said["message"]
    assert str(ROOT) not in said["message"], "file paths in stored messages are cut to the file's name"
    scripted = torch.jit.script(routes.double_or_negate)
    assert torch.equal(scripted(-torch.ones(3)), torch.ones(3))
    assert "control flow" in routes.fx_error()


def test_dynamo_gives_eagers_answers_where_trace_and_script_fail(routes):
    assert routes.dynamo_route("cpu") == {"double_or_negate": True, "scale_by": True, "scale_or_keep": True}


def test_explain_breaks_at_the_print_and_at_the_branch(guards):
    e = guards.explain_breaks(torch.randn(8))
    assert e["graph_breaks"] >= 2 and e["graphs"] == e["graph_breaks"] + 1
    lines = [b["line"] for b in e["breaks"]]
    assert any(line.startswith("print(") for line in lines), lines
    assert any(line.startswith("if y.sum() > 0") for line in lines), lines


def test_the_guard_log_names_the_tensor_and_specializes_the_int(guards):
    text = "\n".join(guards.guard_text(torch.randn(4, 3), 2))
    assert "TENSOR_MATCH" in text and "size=[4, 3]" in text
    assert "L['k'] == 2" in text
    assert str(ROOT) not in text and " # " not in text


def test_the_recompile_limit_keys_of_the_config():
    config = torch._dynamo.config
    assert isinstance(config.recompile_limit, int) and config.cache_size_limit == config.recompile_limit
    assert config.accumulated_recompile_limit >= config.recompile_limit
    assert config.fail_on_recompile_limit_hit is False


def test_past_the_recompile_limit_answers_stay_right_and_nothing_compiles(guards):
    facts, run = guards.past_the_limit("cpu")
    limit = facts["recompile_limit"]
    assert facts["shapes"] == limit + 2 and facts["all_correct"]
    assert facts["graphs_after_call"][: limit + 1] == [*range(1, limit + 1), limit]
    assert facts["graphs_after_call"][-1] == limit
    assert facts["frames_after_call"][-1] == facts["frames_after_call"][-2]  # no longer handed to Dynamo
    assert facts["warnings"] and "recompile_limit" in facts["warnings"][0]
    assert str(ROOT) not in facts["warnings"][0]
    x = torch.randn(100)
    assert torch.equal(run(x), x * 2 + 1)
    # the timed "cached shape" is a cache hit in the grad mode it is timed in; a new shape passes no entry
    entries = guards._debug_get_cache_entry_list(guards.double_plus_one)
    assert len(entries) == limit
    assert sum(e.guard_manager.root.check({"x": torch.randn(2)}) for e in entries) == 1
    assert not any(e.guard_manager.root.check({"x": x}) for e in entries)
    failed = guards.hard_failure("cpu")
    assert failed["type"] == "FailOnRecompileLimitHit" and failed["call"] == limit + 1
    assert guards.graphs_with_automatic_dynamic("cpu") == 2


def test_the_guards_pass_only_where_they_were_built_and_grow_with_the_inputs(guards):
    counts = []
    for n in (1, 10):
        variants, facts = guards.sweep_variants(n, "cpu", inductor=False)
        with torch.no_grad():
            assert variants["guards_alone"]() is True
            for fn in variants.values():
                fn()
        assert variants["guards_alone"]() is False  # grad mode is guarded: it was compiled under no_grad
        counts.append(facts["guards"])
    assert counts[1] > counts[0]


def test_the_chain_grows_the_graph():
    compile_time = load_snippet("m04/compile_time")
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    ops = [compile_time.first_call_s(compile_time.chain(s), x, w, "eager", cold=False)[1] for s in (2, 4)]
    assert ops == [6, 12]
