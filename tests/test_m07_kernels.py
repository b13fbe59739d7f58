"""Module 07's Triton kernels against torch at small sizes: on a machine without a GPU they run in
Triton's interpreter (the snippets switch it on when CUDA is absent). The kernels are imported from
the snippet files themselves, so what is tested is what the GPU build times.

Each check can fail: outputs start as NaN (an element the kernel never writes fails the
comparison), outputs sit inside wider buffers whose margins must stay untouched (a mask or a row
stride gone wrong writes there), shapes are not multiples of the blocks, and one softmax input is
scaled so that exp overflows float32 unless the row maximum is subtracted first.

The interpreter's tl.dot multiplies bfloat16 operands as raw 16-bit integers (triton-lang/triton#11584),
so on the CPU the matmul is checked in float16, the other 16-bit type with the same one rounding
of a float32 accumulator; on a GPU these tests run in bfloat16.
"""

import math

import pytest
import torch
from conftest import load_snippet

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"


@pytest.fixture(scope="module")
def vector_add():
    return load_snippet("m07/vector_add")


@pytest.fixture(scope="module")
def softmax():
    return load_snippet("m07/softmax")


@pytest.fixture(scope="module")
def matmul():
    return load_snippet("m07/matmul")


# ---------------------------------------------------------------- vector add


@pytest.mark.parametrize("n", [1, 1000, 4113])
@pytest.mark.parametrize("block_size, num_warps", [(1024, 4), (128, 4)])
def test_vector_add_is_exact_and_stays_inside_its_output(vector_add, n, block_size, num_warps):
    x, y = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    buffer = torch.full((n + block_size,), float("nan"), device=DEV)  # room for a whole block past the end
    vector_add.add(x, y, buffer[:n], block_size, num_warps)
    assert torch.equal(buffer[:n], x + y)  # float32 addition is exact: bit for bit, NaN fails
    assert buffer[n:].isnan().all(), "the mask let the last block write past the end of the output"


# ---------------------------------------------------------------- softmax

# float32: the kernel and torch compute in float32 with different exp implementations and orders of
# summation: a few float32 ulps apart, 1e-5 relative. bfloat16: the kernel computes in float32 and
# rounds the result once. On a GPU that rounds to nearest, at most half a bfloat16 ulp: 2^-8 of the
# value. The interpreter truncates instead (its float32 -> bfloat16 cast takes no rounding mode), at
# most a whole ulp: 2^-7. Against a float32 reference that is the bound, plus the float32 slack.
BF16_ROUNDING = 2**-8 if CUDA else 2**-7
SOFTMAX_TOLERANCE = {torch.float32: (1e-5, 1e-8), torch.bfloat16: (BF16_ROUNDING + 1e-5, 1e-8)}  # (rtol, atol)

ONE_ROW = {"ROWS": 1, "ONLINE": False, "CHUNK": 1, "FLAT": True}  # one row as a 1-D block
ONE_ROW_2D = {"ROWS": 1, "ONLINE": False, "CHUNK": 1, "FLAT": False}  # the same row as a [1, ROW_BLOCK] block
FOUR_ROWS = {"ROWS": 4, "ONLINE": False, "CHUNK": 1, "FLAT": False}
ONLINE_32 = {"ROWS": 1, "ONLINE": True, "CHUNK": 32, "FLAT": False}  # several chunks per row, the last one partial


def check_softmax(module, n_rows, n_cols, dtype, config, scale=1.0):
    import triton

    wide = torch.randn(n_rows, n_cols + 8, device=DEV) * scale
    x = wide.to(dtype)[:, :n_cols]  # rows n_cols + 8 apart: the kernel must use the row stride
    buffer = torch.full((n_rows, n_cols + 8), float("nan"), device=DEV, dtype=dtype)
    out = buffer[:, :n_cols]
    cfg = None if config is None else triton.Config(dict(config), num_warps=4)
    module.softmax(x, out, config=cfg)
    expected = torch.softmax(x.float(), dim=-1)
    rtol, atol = SOFTMAX_TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected, rtol=rtol, atol=atol)
    assert buffer[:, n_cols:].isnan().all(), "the kernel wrote past the end of a row"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(
    "n_rows, n_cols, config",
    [
        (3, 1, ONE_ROW),  # a row of one element: padded to a block of one
        (5, 77, ONE_ROW),  # padded to 128 with -inf
        (5, 77, ONE_ROW_2D),  # the same as a [1, 128] block
        (6, 100, FOUR_ROWS),  # 6 rows in programs of 4: the second program's last two rows are masked
        (3, 100, ONLINE_32),  # online: four chunks of 32, the last with 4 columns
        (2, 96, ONLINE_32),  # online: chunks that fit exactly
    ],
    ids=["n1", "n77", "n77_2d", "rows4", "online100", "online96"],
)
def test_softmax_matches_torch(softmax, n_rows, n_cols, dtype, config):
    check_softmax(softmax, n_rows, n_cols, dtype, config)


@pytest.mark.parametrize("config", [ONE_ROW, ONE_ROW_2D, ONLINE_32], ids=["one_pass", "one_pass_2d", "online"])
def test_softmax_subtracts_the_row_maximum(softmax, config):
    """Inputs up to about 200: exp of them overflows float32 (beyond about 88) unless shifted first."""
    check_softmax(softmax, 4, 100, torch.float32, config, scale=50.0)


def test_softmax_autotuned_path(softmax):
    """The launch a caller makes: autotuned (on the CPU every candidate runs once), then the winner."""
    check_softmax(softmax, 7, 300, torch.float32, None)
    check_softmax(softmax, 7, 300, torch.bfloat16, None)


def test_softmax_pruning_keeps_a_candidate_for_every_row_length(softmax):
    for n_cols in [1, 64, 1000, 1024, 4096, 32768, 100_000]:
        row_block = 1 << max(0, (n_cols - 1).bit_length())
        kept = softmax.prune_configs(softmax.SOFTMAX_CONFIGS, {"n_cols": n_cols}, ROW_BLOCK=row_block)
        assert kept, n_cols
        for c in kept:
            if not c.kwargs["ONLINE"]:
                assert c.kwargs["ROWS"] * row_block // (32 * c.num_warps) <= 64 or len(kept) == 1, (n_cols, c)
    long_rows = softmax.prune_configs(softmax.SOFTMAX_CONFIGS, {"n_cols": 32768}, ROW_BLOCK=32768)
    assert any(c.kwargs["ONLINE"] for c in long_rows) and any(not c.kwargs["ONLINE"] for c in long_rows)


# ---------------------------------------------------------------- matmul

MATMUL_DTYPE = torch.bfloat16 if CUDA else torch.float16  # see the module docstring


def matmul_tolerance(dtype, k):
    """(rtol, atol) for C = A @ B with N(0, 1) inputs, float32 accumulation and one rounding to
    dtype. That rounding moves an entry by at most half an ulp: 2^-11 of it in float16, 2^-8 in
    bfloat16, so rtol is twice that. Entries grow like sqrt(K) (a sum of K unit-variance products),
    and float32 sums taken in another order differ by about sqrt(K) float32 ulps of that size; for
    entries near zero, where a relative bound says nothing, atol is one output ulp at the typical
    entry's size: 2 x half-ulp x sqrt(K). A missing or doubled K block moves entries by about
    sqrt(BLOCK_K), hundreds of times more."""
    half_ulp = {torch.float16: 2**-11, torch.bfloat16: 2**-8}[dtype]
    return 2 * half_ulp, 2 * half_ulp * math.sqrt(k)


def small_config(bm, bn, bk, warps=4, group_m=2, **more):
    import triton

    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, **more}, num_warps=warps, num_stages=2
    )


# (M, N, K): N and K multiples of 8 (16-byte rows, as TMA needs) but mostly of no block; M anything.
# With 32 x 32 tiles: 4, 2, 3 (a last group of one row under GROUP_M = 2) and 2 tile rows.
SHAPES = [(100, 72, 88), (33, 40, 24), (80, 104, 40), (64, 64, 64)]
STEPS = ["tutorial", "persistent", "tma", "warp_specialized"]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_steps_match_torch_mm(matmul, step, shape):
    """Blocks of 32 x 32 x 32 over these shapes: several tiles in both directions, partial tiles at
    the edges and along K, groups of GROUP_M = 2 tile rows, and (on the CPU, with four programs) a
    persistent loop that runs several tiles per program."""
    M, N, K = shape
    a = torch.randn(M, K, device=DEV).to(MATMUL_DTYPE)
    b = torch.randn(K, N, device=DEV).to(MATMUL_DTYPE)
    buffer = torch.full((M + 8, N), float("nan"), device=DEV, dtype=MATMUL_DTYPE)
    c = buffer[:M]
    matmul.matmul(step, a, b, c, config=small_config(32, 32, 32))
    rtol, atol = matmul_tolerance(MATMUL_DTYPE, K)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=rtol, atol=atol)
    assert buffer[M:].isnan().all(), "the kernel wrote rows past M"


@pytest.mark.parametrize("step", ["tma", "warp_specialized"])
def test_matmul_epilogue_in_two_halves(matmul, step):
    """EPILOGUE_SUBTILE: the output tile stored as its left and right halves, each in its place (a
    swap of the halves, or a half written twice, fails), with partial tiles at the edges."""
    M, N, K = 100, 72, 88
    a = torch.randn(M, K, device=DEV).to(MATMUL_DTYPE)
    b = torch.randn(K, N, device=DEV).to(MATMUL_DTYPE)
    c = torch.full((M, N), float("nan"), device=DEV, dtype=MATMUL_DTYPE)
    matmul.matmul(step, a, b, c, config=small_config(32, 32, 32, EPILOGUE_SUBTILE=True))
    rtol, atol = matmul_tolerance(MATMUL_DTYPE, K)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=rtol, atol=atol)


def test_persistent_matmul_with_its_tile_loop_apart(matmul):
    """FLATTEN=False: the persistent kernel's tile loop kept apart from its K loop, same answer."""
    M, N, K = 100, 72, 88
    a = torch.randn(M, K, device=DEV).to(MATMUL_DTYPE)
    b = torch.randn(K, N, device=DEV).to(MATMUL_DTYPE)
    c = torch.full((M, N), float("nan"), device=DEV, dtype=MATMUL_DTYPE)
    matmul.matmul("persistent", a, b, c, config=small_config(32, 32, 32, FLATTEN=False))
    rtol, atol = matmul_tolerance(MATMUL_DTYPE, K)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("step", STEPS)
def test_matmul_autotuned_path(matmul, step):
    """The launch a caller makes: the autotuned kernel with its real candidates (tiles of 128 and 256
    over a 64 x 64 x 64 product: one partial tile), then the winner; best_config is set."""
    a = torch.randn(64, 64, device=DEV).to(MATMUL_DTYPE)
    b = torch.randn(64, 64, device=DEV).to(MATMUL_DTYPE)
    c = torch.full((64, 64), float("nan"), device=DEV, dtype=MATMUL_DTYPE)
    matmul.matmul(step, a, b, c)
    rtol, atol = matmul_tolerance(MATMUL_DTYPE, 64)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=rtol, atol=atol)
    assert matmul.KERNELS[step].best_config.kwargs["BLOCK_M"] >= 128


def test_matmul_tolerance_would_catch_a_missing_k_block(matmul):
    """The tolerance is tight enough to matter: dropping one BLOCK_K slice of the reduction fails it."""
    M, N, K = 64, 64, 96
    a = torch.randn(M, K).to(torch.float16)
    b = torch.randn(K, N).to(torch.float16)
    wrong = (a[:, :64].float() @ b[:64].float()).to(torch.float16)  # the last 32 columns of A forgotten
    rtol, atol = matmul_tolerance(torch.float16, K)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(wrong.float(), a.float() @ b.float(), rtol=rtol, atol=atol)
