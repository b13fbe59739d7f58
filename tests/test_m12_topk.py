"""Module 12's Triton top-k (snippets/m12/_topk.py) against torch.topk, on the CPU: without a GPU the
kernel runs in Triton's interpreter (tests/conftest.py switches it on before anything imports triton,
as for module 07's kernels). Sizes are small but real: rows not a multiple of the chunk, several
launches (a small chunk and a small last launch force the middle launches a 256k row takes), k from 1
to past the 128-group limit of the packed threshold search.

Every result is checked three ways: the values equal torch.topk's exactly (NaN included); every index
points at its value and no index repeats (so the indices are torch's up to which of the tied elements
at the k-th value were taken); and the indices equal the kernel's documented order exactly, computed
here in numpy: torch's CUDA radix order of the values (NaN first, +0.0 above -0.0), ties by lowest
index."""

import numpy as np
import pytest
import torch
from conftest import load_snippet

pytestmark = pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # the interpreter's max of a NaN row

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"


@pytest.fixture(scope="module")
def m():
    return load_snippet("m12/_topk")


def documented_order(x: torch.Tensor, k: int) -> torch.Tensor:
    """The indices the kernel promises: by torch's radix key (TopKTypeConfig<float>::convert) from the
    largest, equal keys by lowest index."""
    bits = x.float().cpu().numpy().view(np.uint32)
    key = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000)).astype(np.uint64)
    key = np.where(np.isnan(x.float().cpu().numpy()), np.uint64(0xFFFFFFFF), key)
    order = np.stack([np.lexsort((np.arange(row.size), -row.astype(np.int64))) for row in key])
    return torch.from_numpy(order[:, :k].copy())


def check(m, x: torch.Tensor, k: int, **kwargs):
    values, indices = m.topk(x, k, **kwargs)
    ref_values, ref_indices = torch.topk(x, k)
    assert values.dtype == x.dtype and indices.dtype == torch.int64
    torch.testing.assert_close(values, ref_values, rtol=0, atol=0, equal_nan=True)  # exact, NaN == NaN
    torch.testing.assert_close(x.gather(1, indices), values, rtol=0, atol=0, equal_nan=True)
    for row, ref_row, v in zip(indices.tolist(), ref_indices.tolist(), values.float()):
        assert len(set(row)) == k, "an index appears twice"
        last = v[-1]
        strictly_above = [i for i, value in zip(row, v) if value > last or (value.isnan() and not last.isnan())]
        ref_above = [i for i, value in zip(ref_row, v) if value > last or (value.isnan() and not last.isnan())]
        assert set(strictly_above) == set(ref_above), "the elements above the k-th value differ from torch's"
    assert torch.equal(indices.cpu(), documented_order(x, k)), "not the documented order of ties"
    return values, indices


def rows(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype).to(DEV)


# ---------------------------------------------------------------- the plan


def test_plan_splits_long_rows_and_ends_in_one_program(m, monkeypatch):
    monkeypatch.setattr(m, "NUM_SMS", 132)  # the H200's: the plan the GPU build runs
    levels = m.plan(1, 262144, 50)
    assert len(levels) == 2 and levels[0]["chunk"] == 8192  # 32 programs a row, then one
    assert levels[-1]["chunk"] == 32 * levels[0]["slots"]
    assert m.plan(256, 262144, 50)[0]["chunk"] == 4096  # many rows: smaller programs
    assert len(m.plan(1, 262144, 1024)) == 3  # k = 1,024: a middle launch
    with pytest.raises(ValueError):
        m.plan(1, 1000, 50, chunk=100)


# ---------------------------------------------------------------- random rows


@pytest.mark.parametrize("k", [1, 7, 50])
def test_random_rows_several_launches(m, k):
    x = rows(2, 3000)  # 3,000 is no multiple of the 512 chunk: the last chunk is masked
    assert len(m.plan(2, 3000, k, chunk=512)) == 2
    check(m, x, k, chunk=512)


def test_three_launches(m):
    x = rows(1, 3000, seed=1)
    assert len(m.plan(1, 3000, 20, chunk=256, last_max=512)) == 3  # first, middle, last
    check(m, x, 20, chunk=256, last_max=512)


def test_one_launch_and_k_equal_to_the_row(m):
    x = rows(2, 300, seed=2)
    assert len(m.plan(2, 300, 300)) == 1
    check(m, x, 300)  # every element: a full sort


def test_k_past_the_packed_search(m):
    x = rows(2, 3000, seed=3)
    assert m.plan(2, 3000, 100)[0]["groups"] > 128  # the 32-step search on the maxima
    check(m, x, 100)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_rows_with_their_ties(m, dtype):
    x = rows(2, 3000, dtype=dtype, seed=4)  # bfloat16 has 8 bits of mantissa: ties everywhere
    check(m, x, 50, chunk=512)


def test_top_k_in_the_tail_chunk(m):
    x = torch.arange(4100, dtype=torch.float32, device=DEV).repeat(2, 1)  # sorted: the top 50 in the last,
    check(m, x, 50, chunk=512)  # 4-element chunk (4,100 = 8 x 512 + 4)


# ---------------------------------------------------------------- adversarial rows


def test_sorted_rows(m):
    up = torch.linspace(-3, 3, 3000, device=DEV)
    check(m, torch.stack([up, up.flip(0)]), 50, chunk=512)


def test_all_equal_rows_return_the_first_k_indices(m):
    x = torch.full((2, 1000), 1.5, device=DEV)
    _, indices = check(m, x, 50, chunk=256)
    assert indices.tolist() == [list(range(50))] * 2


def test_few_distinct_values(m):
    x = torch.randint(0, 4, (2, 1000), generator=torch.Generator().manual_seed(5)).float().to(DEV)
    check(m, x, 50, chunk=256)  # hundreds of ties at the k-th value: the exact path


def test_large_values_in_few_groups_take_the_exact_path(m):
    # Groups are strided: element i is in group i % groups. Put every large value in 10 groups (fewer
    # than k): the k-th largest group maximum is then a small value, and all 160 large elements of a
    # 2,048-element chunk pass the filter, more than its 128 slots: the exact search runs.
    level = m.plan(2, 2100, 50, chunk=2048)[0]
    assert (level["groups"], level["slots"]) == (128, 128)
    x = rows(2, 2100, seed=6)
    x[:, (torch.arange(2100, device=DEV) % 128) < 10] += 100
    check(m, x, 50, chunk=2048)


def test_nan_ranks_above_everything(m):
    x = rows(3, 1000, seed=7)
    x[0, [10, 555, 999]] = float("nan")  # fewer NaN than k: all of them first
    x[1, ::5] = float("nan")  # more NaN than k (200): the first 50 by index
    x[2] = float("nan")
    x[2, 7] = -float("nan")  # a NaN with the sign bit set ranks with the others
    values, indices = check(m, x, 50, chunk=256)
    assert values[0, :3].isnan().all() and not values[0, 3:].isnan().any()
    assert indices[1].tolist() == list(range(0, 250, 5))


def test_infinities(m):
    x = rows(3, 1000, seed=8)
    x[0, 100:130] = float("inf")
    x[0, 200:300] = -float("inf")
    x[1] = -float("inf")  # every element -inf
    x[2, :980] = -float("inf")  # 20 finite values, then 30 of the -inf by index
    check(m, x, 50, chunk=256)


def test_signed_zeros(m):
    x = torch.zeros(1, 1000, device=DEV)
    x[0, ::2] = -0.0
    x[0, 500:] = -1.0
    _, indices = check(m, x, 50)  # +0.0 above -0.0, as torch's CUDA radix key has it
    assert indices[0].tolist() == list(range(1, 100, 2))


def test_rejects_what_it_does_not_do(m):
    x = rows(1, 100)
    for k in (0, 101):
        with pytest.raises(ValueError):
            m.topk(x, k)
    with pytest.raises(ValueError):
        m.topk(x[0], 5)
