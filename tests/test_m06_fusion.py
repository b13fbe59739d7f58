"""Module 06's fusion facts on the CPU, at the snippets' small sizes, read from the data of the
snippets' own CPU runs (conftest.run_script_once: each snippet runs once per test session, as its
download through the build job's runner), so that Inductor compiles each graph once per session.

What holds on a CPU as on a GPU, and is checked here: the norm + activation + residual block
compiles to one kernel whose bytes, as Inductor's scheduler counts them, are exactly the minimum
(x read, y written, w and b read); in the token-shift block the scheduler refuses to fuse the norm
into its consumer with "memory deps did not match" and writes the normalized tensor out, so it
counts at least five tensors of traffic; the rewrite gives the same values and that refusal is
gone. What the rewrite buys (one kernel instead of two, two tensors of traffic instead of five) is
Triton codegen's, so a GPU's: Inductor's C++ backend fuses differently and is not checked for it.
The hand-written Triton fix runs in Triton's interpreter."""

import pytest
import torch
from conftest import ROOT, load_snippet, run_script_once


def snippet_data(name: str) -> dict:
    proc = run_script_once(ROOT / "snippets" / "m06" / f"{name}.py")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.data


@pytest.fixture(scope="module")
def facts():
    norm, shift = snippet_data("norm_block"), snippet_data("token_shift")
    return {"norm_block": norm, "tensor_bytes": shift["tensor_bytes"], **shift["variants"]}


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
    token_shift = load_snippet("m06/token_shift")
    torch.manual_seed(0)
    x, w, b, mu = torch.randn(2, 16, 256), torch.randn(256), torch.randn(256), torch.rand(256)
    eager_error = (token_shift.token_shift_rewritten(x, w, b, mu) - token_shift.token_shift(x, w, b, mu)).abs().max()
    assert eager_error < 1e-5 and f["max_abs_error"] < 1e-4, (eager_error, f["max_abs_error"])
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
