"""Module 06's fusion facts on the CPU, at the snippets' small sizes (so that Inductor's caches,
warmed by the snippet runs of the same session, serve them), computed by the snippets' own
functions in one fresh process.

What holds on a CPU as on a GPU, and is checked here: the norm + activation + residual block
compiles to one kernel whose bytes, as Inductor's scheduler counts them, are exactly the minimum
(x read, y written, w and b read); in the token-shift block the scheduler refuses to fuse the norm
into its consumer with "memory deps did not match" and writes the normalized tensor out, so it
counts at least five tensors of traffic; the rewrite gives the same values and that refusal is
gone. What the rewrite buys (one kernel instead of two, two tensors of traffic instead of five) is
Triton codegen's, so a GPU's: Inductor's C++ backend fuses differently and is not checked for it."""

import json

import pytest
import torch
from conftest import ROOT, load_snippet, run_python

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import norm_block, token_shift

torch.manual_seed(0)
torch.set_num_threads(1)
facts = {}
with torch.no_grad():
    x, w, b = torch.randn(64, 256), torch.randn(256), torch.randn(256)
    _, found = norm_block.inductor_view(norm_block.block, x, w, b)
    facts["norm_block"] = {**found, "min_bytes": norm_block.min_bytes(x, w, b)}

    x, w, b, mu = torch.randn(2, 16, 256), torch.randn(256), torch.randn(256), torch.rand(256)
    facts["tensor_bytes"] = x.numel() * x.element_size()
    reference = token_shift.token_shift(x, w, b, mu)
    for name, fn in (("original", token_shift.token_shift), ("rewritten", token_shift.token_shift_rewritten)):
        compiled, found = norm_block.inductor_view(fn, x, w, b, mu)
        found["max_abs_error"] = (compiled(x, w, b, mu) - reference).abs().max().item()
        found["eager_max_abs_error"] = (fn(x, w, b, mu) - reference).abs().max().item()
        facts[name] = found
torch._dynamo.reset()
print(json.dumps(facts))
"""


@pytest.fixture(scope="module")
def facts():
    proc = run_python(["-c", CHILD, str(ROOT / "snippets" / "m06")], timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_norm_block_is_one_kernel_moving_the_minimum(facts):
    f = facts["norm_block"]
    assert len(f["kernels"]) == 1, f["kernels"]
    assert "layer_norm" in f["kernels"][0] and "gelu" in f["kernels"][0], f["kernels"]
    assert f["inductor_bytes"] == f["min_bytes"], (f["inductor_bytes"], f["min_bytes"])
    assert "memory deps did not match" not in f["refusal_reasons"], f["refusal_reasons"]


def test_token_shift_norm_is_refused_and_written_out(facts):
    f = facts["original"]
    assert "memory deps did not match" in f["refusal_reasons"], f["refusal_reasons"]
    # x read by the norm, h written, x and h read by the consumer, y written: five tensors
    assert f["inductor_bytes"] >= 5 * facts["tensor_bytes"], (f["inductor_bytes"], facts["tensor_bytes"])


def test_rewrite_keeps_the_values_and_lifts_the_refusal(facts):
    f = facts["rewritten"]
    assert f["eager_max_abs_error"] < 1e-5 and f["max_abs_error"] < 1e-4, f
    assert facts["original"]["max_abs_error"] < 1e-4
    assert "memory deps did not match" not in f["refusal_reasons"], f["refusal_reasons"]


@pytest.mark.parametrize("rows_per_program", [1, 3, 16])
def test_hand_written_token_shift_matches_torch(rows_per_program):
    """The Triton fix in the interpreter against the torch block, in float32: 3 sequences of 7 rows
    of 100 (a row shorter than its block, sequences starting inside a program's rows, a last program
    with rows past the end), for one row per program (the previous norm recomputed), three and
    sixteen (carried across rows and across sequence starts, where it must be zeroed)."""
    import triton

    token_shift = load_snippet("m06/token_shift")
    torch.manual_seed(0)
    x = torch.randn(3, 7, 100)
    w, b, mu = torch.randn(100), torch.randn(100), torch.rand(100)
    config = triton.Config({"ROWS": rows_per_program}, num_warps=4)
    got = token_shift.token_shift_triton(x, w, b, mu, config=config)
    torch.testing.assert_close(got, token_shift.token_shift(x, w, b, mu), rtol=1e-4, atol=1e-4)
