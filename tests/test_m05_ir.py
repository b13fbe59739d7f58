"""Module 05's IR ladder on the CPU at a tiny size: facts about the graphs that the chapter's
argument rests on and that hold on any device, computed by the snippets' own functions in one
fresh process (Dynamo and Inductor keep state; a child process keeps it out of the test session).

Each check can fail: op counts must move in the stated direction between rungs, each rung must call
the kind of operator it claims (torch functions, then ATen overloads only), functionalization must
leave no in-place op but the one copy_ back into the input, the min-cut partitioner must keep
strictly fewer bytes than the default one where there is a pointwise chain to recompute, and
Inductor must generate fewer kernels than the forward graph has operators."""

import json

import pytest
from conftest import ROOT, run_python

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.partitioners import default_partition
from torch._inductor.decomposition import select_decomp_table

import export, functionalize, saved
from ladder import Block, capture, count_ops

torch.manual_seed(0)
torch.set_num_threads(1)
block, norm_block = Block(32, 2), saved.NormBlock(32)
x = torch.randn(2, 8, 32, requires_grad=True)
facts = {}

g = capture(block, x)  # min-cut, ATen
facts["levels"] = {name: count_ops(g[name]) for name in ("dynamo", "joint", "forward", "backward")}
facts["levels"]["joint_core_aten"] = count_ops(capture(block, x, core_aten_decompositions())["joint"])
facts["dynamo_targets"] = sorted({str(type(n.target)) for n in g["dynamo"].nodes if n.op == "call_function"})
facts["joint_targets"] = sorted({type(n.target).__name__ for n in g["joint"].nodes if n.op == "call_function"})

facts["saved"] = {"block_min_cut": saved.saved_for_backward(g)}
facts["saved"]["block_default"] = saved.saved_for_backward(capture(block, x, partitioner=default_partition))
facts["saved"]["block_eager"] = saved.eager_saved_bytes(block, x)
for name, p in (("default", default_partition), ("min_cut", saved.min_cut_rematerialization_partition)):
    gn = capture(norm_block, x, select_decomp_table(), p)
    facts["saved"][f"norm_{name}"] = {**saved.saved_for_backward(gn), "all": saved.computed_bytes(gn["forward"])}

x0 = torch.randn(4, 8)
facts["functionalize"] = {
    name: {"operators": functionalize.operators(gm), "mutating": functionalize.mutating(gm)}
    for name, gm in (("before", functionalize.traced(functionalize.mutate, x0.clone(), False)),
                     ("after", functionalize.traced(functionalize.mutate, x0.clone(), True)))
}

ep = export.export_block(block, x.detach())
facts["export"] = {
    "exported": export.targets(ep.graph_module), "core": export.targets(ep.run_decompositions().graph_module),
    "inputs": [s.kind.name for s in ep.graph_signature.input_specs],
}
torch._dynamo.reset()
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def facts():
    proc = run_python(["-c", CHILD, str(ROOT / "snippets" / "m05")], timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_each_rung_down_has_more_ops(facts):
    ops = {name: c["ops"] for name, c in facts["levels"].items()}
    assert ops["dynamo"] < ops["forward"] < ops["joint"] < ops["joint_core_aten"], ops
    # every joint op lands in the forward or the backward; the min-cut partitioner may recompute some
    assert ops["forward"] + ops["backward"] >= ops["joint"], ops


def test_dynamo_records_torch_functions_and_aot_records_aten_overloads(facts):
    assert not any("OpOverload" in t for t in facts["dynamo_targets"]), facts["dynamo_targets"]
    assert set(facts["joint_targets"]) <= {"OpOverload", "builtin_function_or_method"}, facts["joint_targets"]
    assert "OpOverload" in facts["joint_targets"]


def test_functionalization_removes_the_in_place_ops(facts):
    before, after = facts["functionalize"]["before"], facts["functionalize"]["after"]
    assert before["mutating"] == ["aten.add_.Tensor", "aten.mul_.Tensor"], before
    assert after["mutating"] == ["aten.copy_.default"], after  # the input's mutation, written back once
    assert after["operators"][-1] == "aten.copy_.default", after["operators"]
    assert "aten.select_scatter.default" in after["operators"], after["operators"]


def test_min_cut_keeps_no_more_than_default_and_less_with_a_pointwise_chain(facts):
    s = facts["saved"]
    assert s["block_min_cut"]["activation_bytes"] <= s["block_default"]["activation_bytes"]
    assert s["block_default"]["activation_bytes"] == s["block_eager"]  # default keeps what eager autograd keeps
    norm_min_cut, norm_default = s["norm_min_cut"]["activation_bytes"], s["norm_default"]["activation_bytes"]
    assert norm_min_cut < norm_default <= s["norm_default"]["all"], s
    x_bytes = 2 * 8 * 32 * 4
    assert norm_min_cut < x_bytes / 10 <= norm_default  # min-cut keeps per-row statistics only


def test_export_keeps_linear_and_core_aten_decomposes_it(facts):
    e = facts["export"]
    assert e["inputs"] == ["PARAMETER"] * 8 + ["USER_INPUT"], e["inputs"]
    assert "aten.linear.default" in e["exported"] and "aten.linear.default" not in e["core"]
    assert sum(e["exported"].values()) < sum(e["core"].values())
