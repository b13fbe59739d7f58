"""Module 11's MoE pieces at small sizes: on a machine without a GPU the Triton grouped GEMM runs in
Triton's interpreter (the snippets switch it on when CUDA is absent). Everything is imported from the
snippet files themselves (_grouped_gemm.py, _moe.py, routing.py, compiled.py), so what is tested is
what the GPU build times.

Each check can fail: outputs start as NaN inside wider buffers (a row the kernel never writes, or
writes past the last group, shows), groups are empty at the start, middle and end, sizes are multiples
of no block, and groups span several tiles and bands. The interpreter's tl.dot multiplies bfloat16
operands as raw 16-bit integers (module 07), so the kernel is checked in float16 on the CPU and in
bfloat16 on a GPU. Dynamo's facts are checked with backend="eager", which compiles nothing."""

import math

import pytest
import torch
from conftest import load_snippet

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
DTYPE = torch.bfloat16 if CUDA else torch.float16  # the kernel's dtype here; see the module docstring


@pytest.fixture(scope="module")
def gg():
    return load_snippet("m11/_grouped_gemm")


@pytest.fixture(scope="module")
def moe():
    return load_snippet("m11/_moe")


def tolerance(dtype, k):
    """(rtol, atol) for one product of N(0, 1) entries with float32 accumulation and one rounding to
    dtype: at most half an ulp on a GPU, a whole one in the interpreter (it truncates), so rtol is one
    ulp; atol one ulp at the typical entry's size, sqrt(K). A tile of the wrong group, or a K block
    missed, moves entries by whole units."""
    ulp = {torch.float16: 2**-10, torch.bfloat16: 2**-7}[dtype]
    return ulp, ulp * math.sqrt(k)


def grouped_reference(x, w, counts):
    """What torch._grouped_mm means: each group's rows times its matrix, in float32; NaN past the end."""
    out = torch.full((x.shape[0], w.shape[2]), float("nan"), device=x.device)
    start = 0
    for g, n in enumerate(counts):
        out[start : start + n] = x[start : start + n].float() @ w[g].float()
        start += n
    return out


# ---------------------------------------------------------------- the Triton grouped GEMM

# counts per group: empty groups first, in the middle and last; groups of one row; a group of five
# row tiles of 32 (130 rows), in bands of GROUP_M = 2 tile rows, the last band one row short; one group;
# none filled.
COUNTS = [[0, 5, 130, 0, 1, 40, 0], [17], [64, 64], [0, 0, 3, 100], [0, 0, 0]]


def small(bm, bn, bk, programs_per_sm):
    import triton

    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 2, "PROGRAMS_PER_SM": programs_per_sm}
    return triton.Config(meta, num_warps=4, num_stages=1)


@pytest.mark.parametrize("counts", COUNTS, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("tiles", [(32, 32, 16, 1), (32, 16, 32, 2)], ids=["32x32x16", "32x16x32x2"])
def test_grouped_mm_matches_a_loop_of_mm(gg, counts, tiles):
    """Blocks of 16 or 32 over K = N = 40, a multiple of neither: partial tiles in every direction and
    a partial last step along K; 2 or 4 programs (NUM_SMS is 2 on the CPU), so each loops over several
    tiles and groups. Three rows past the last group stay as they were (NaN)."""
    K, N = 40, 40
    rows = sum(counts)
    x = torch.randn(rows + 3, K, device=DEV).to(DTYPE)
    w = torch.randn(len(counts), K, N, device=DEV).to(DTYPE)
    offs = torch.tensor(counts, device=DEV).cumsum(0).to(torch.int32)
    out = torch.full((rows + 3, N), float("nan"), device=DEV, dtype=DTYPE)
    gg.grouped_mm(x, w, offs, config=small(*tiles), out=out)
    expected = grouped_reference(x, w, counts)
    rtol, atol = tolerance(DTYPE, K)
    torch.testing.assert_close(out[:rows].float(), expected[:rows], rtol=rtol, atol=atol)
    assert out[rows:].isnan().all(), "the kernel wrote rows past the last group"


def test_grouped_mm_autotuned_path_agrees_with_torch(gg):
    """The launch a caller makes (autotuned; on the CPU its one candidate), strided weights (a
    transposed view: the kernel must use all three strides), against torch._grouped_mm itself."""
    counts = [3, 0, 70, 21]
    x = torch.randn(sum(counts), 48, device=DEV).to(DTYPE)
    w = torch.randn(len(counts), 56, 48, device=DEV).to(DTYPE).transpose(1, 2)  # [G, K=48, N=56], N not contiguous
    offs = torch.tensor(counts, device=DEV).cumsum(0).to(torch.int32)
    ours = gg.grouped_mm(x, w, offs)
    theirs = torch._grouped_mm(x, w, offs)
    rtol, atol = tolerance(DTYPE, 48)
    torch.testing.assert_close(ours.float(), grouped_reference(x, w, counts), rtol=rtol, atol=atol)
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=2 * rtol, atol=2 * atol)
    assert gg.grouped_mm_kernel.best_config is not None


# ---------------------------------------------------------------- the same through TMA (tensor descriptors)


def small_tma(bm, bn, bk, programs_per_sm, w_3d, tma_store=False, subtile=False):
    import triton

    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 2, "PROGRAMS_PER_SM": programs_per_sm}
    store = {"TMA_STORE": tma_store, "EPILOGUE_SUBTILE": subtile}
    return triton.Config(meta | {"W_3D": w_3d} | store, num_warps=4, num_stages=1)


def weights(groups, k, n, k_major):
    """[G, K, N] weights, N-major (contiguous) or K-major (a contiguous [G, N, K] seen transposed)."""
    if k_major:
        return torch.randn(groups, n, k, device=DEV).to(DTYPE).transpose(1, 2)
    return torch.randn(groups, k, n, device=DEV).to(DTYPE)


@pytest.mark.parametrize("counts", [COUNTS[0], COUNTS[3]], ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("k_major", [False, True], ids=["n-major", "k-major"])
@pytest.mark.parametrize("w_3d", [True, False], ids=["w3d", "w2d"])
def test_grouped_mm_tma_matches_a_loop_of_mm(gg, counts, k_major, w_3d):
    """The TMA kernel in the interpreter, both weight layouts and both weight descriptors: K = 40, a
    multiple of 8 (TMA's alignment) but not of BLOCK_K = 16, N = 56 not of BLOCK_N = 32; empty groups,
    partial last tiles, 2 programs looping over tiles and groups. x is the first K columns of wider
    rows whose other columns hold 1000s: the descriptor must read zeros past K, or they would leak in
    (and the stacked 2-D weights' tiles reach into the next group's rows, which only zeros cancel).
    Three rows past the last group stay NaN."""
    K, N = 40, 56
    rows = sum(counts)
    wide = torch.full((rows + 3, K + 8), 1000.0, device=DEV, dtype=DTYPE)
    x = wide[:, :K]
    x.copy_(torch.randn(rows + 3, K, device=DEV))
    w = weights(len(counts), K, N, k_major)
    offs = torch.tensor(counts, device=DEV).cumsum(0).to(torch.int32)
    out = torch.full((rows + 3, N), float("nan"), device=DEV, dtype=DTYPE)
    gg.grouped_mm_tma(x, w, offs, config=small_tma(32, 32, 16, 1, w_3d), out=out)
    rtol, atol = tolerance(DTYPE, K)
    torch.testing.assert_close(out[:rows].float(), grouped_reference(x, w, counts)[:rows], rtol=rtol, atol=atol)
    assert out[rows:].isnan().all(), "the kernel wrote rows past the last group"


@pytest.mark.parametrize("subtile", [False, True], ids=["whole", "halves"])
def test_grouped_mm_tma_store_writes_full_tiles_and_only_them(gg, subtile):
    """Full tiles stored through TMA (whole, or in two halves), partial ones through masked pointers:
    groups of 70 and 150 rows leave full 32-row tiles and partial last ones, N = 56 a partial last
    column tile (TMA must not write past N: out is the first 56 columns of wider rows, whose other
    columns stay NaN), and three rows past the last group stay NaN."""
    counts, K, N = [70, 0, 3, 0, 150], 40, 56
    rows = sum(counts)
    x = torch.randn(rows + 3, K, device=DEV).to(DTYPE)
    w = weights(len(counts), K, N, k_major=False)
    offs = torch.tensor(counts, device=DEV).cumsum(0).to(torch.int32)
    wide = torch.full((rows + 3, N + 8), float("nan"), device=DEV, dtype=DTYPE)
    out = wide[:, :N]
    gg.grouped_mm_tma(x, w, offs, config=small_tma(32, 32, 16, 1, True, tma_store=True, subtile=subtile), out=out)
    rtol, atol = tolerance(DTYPE, K)
    torch.testing.assert_close(out[:rows].float(), grouped_reference(x, w, counts)[:rows], rtol=rtol, atol=atol)
    assert out[rows:].isnan().all(), "the kernel wrote rows past the last group"
    assert wide[:, N:].isnan().all(), "the kernel wrote columns past N"


def test_grouped_mm_tma_autotuned_path_agrees_with_torch(gg):
    """The launch a caller makes (autotuned; on the CPU its one candidate) against torch._grouped_mm,
    K-major weights; and a clear error for weights with neither dimension contiguous."""
    counts = [3, 0, 70, 21]
    x = torch.randn(sum(counts), 48, device=DEV).to(DTYPE)
    w = weights(len(counts), 48, 56, k_major=True)
    offs = torch.tensor(counts, device=DEV).cumsum(0).to(torch.int32)
    ours = gg.grouped_mm_tma(x, w, offs)
    rtol, atol = tolerance(DTYPE, 48)
    torch.testing.assert_close(ours.float(), torch._grouped_mm(x, w, offs).float(), rtol=2 * rtol, atol=2 * atol)
    assert gg.grouped_mm_tma_kernel.best_config is not None
    every_other_column = weights(len(counts), 48, 112, k_major=False)[:, :, ::2]  # strides (K 2N, 2N, 2)
    with pytest.raises(ValueError, match="neither N nor K contiguous"):
        gg.grouped_mm_tma(x, every_other_column, offs)


# ---------------------------------------------------------------- routing, permutation, routes


def routed(moe, shape, tokens, dtype, seed=0, bias=None):
    layer = moe.make_layer(shape, DEV, dtype, seed=seed)
    x = torch.randn(tokens, shape["hidden"], device=DEV, dtype=dtype)
    ids, weights = moe.route(x, layer["gate"], shape["top_k"], bias)
    return layer, x, ids, weights


SMALL = {"hidden": 32, "ffn": 24, "experts": 6, "top_k": 2}


def test_sort_by_expert_groups_rows_in_token_order(moe):
    _, _, ids, _ = routed(moe, SMALL, 50, torch.float32)
    order, offsets = moe.sort_by_expert(ids, SMALL["experts"])
    counts = torch.bincount(ids.flatten(), minlength=SMALL["experts"])
    assert offsets.dtype == torch.int32 and offsets.tolist() == counts.cumsum(0).tolist()
    expert = ids.flatten()[order]
    assert (expert.diff() >= 0).all(), "rows are not grouped by expert"
    same = expert[1:] == expert[:-1]
    assert (order[1:][same] > order[:-1][same]).all(), "within an expert, rows are not in token order"


def test_permute_then_unpermute_is_the_identity_for_identity_experts(moe):
    """With every expert the identity, the layer returns x: the weights sum to one per token."""
    _, x, ids, weights = routed(moe, SMALL, 50, torch.float32)
    order, _ = moe.sort_by_expert(ids, SMALL["experts"])
    back = moe.unpermute(moe.permute(x, order, SMALL["top_k"]), order, weights)
    torch.testing.assert_close(back, x, rtol=1e-5, atol=1e-5)


def test_routes_agree_with_a_float32_loop(moe):
    """The dropless routes and the padded one with room for every token give the layer's answer."""
    shape = {"hidden": 32, "ffn": 40, "experts": 4, "top_k": 2}
    layer, x, ids, weights = routed(moe, shape, 40, DTYPE)
    w13, w2 = layer["w13"], layer["w2"]
    expected = moe.experts_loop(x.float(), ids, weights.float(), w13.float(), w2.float())
    outs = {
        "loop": moe.experts_loop(x, ids, weights, w13, w2),
        "loop_counts_known": moe.experts_loop(x, ids, weights, w13, w2, moe.sort_by_expert(ids, 4)[1].tolist()),
        "padded_roomy": moe.experts_padded(x, ids, weights, w13, w2, capacity=40 * 2),
        "grouped_torch": moe.experts_grouped(x, ids, weights, w13, w2),
        "triton_grouped": moe.experts_grouped_triton(x, ids, weights, w13, w2),
    }
    for name, out in outs.items():
        err = (out.float() - expected).abs().max().item()
        assert err < 0.05 * expected.abs().max().item(), (name, err)
    assert not torch.equal(outs["loop"], torch.zeros_like(outs["loop"]))


def test_a_tight_capacity_drops_exactly_the_late_tokens(moe):
    """At capacity 1.0 x T k / E, an expert keeps its first `capacity` tokens in token order: tokens
    with a dropped assignment get less than the full answer, every other token the full answer."""
    shape = {**SMALL, "hidden": 16, "ffn": 16}
    skew = moe.skew_bias(shape["experts"], 1.0, DEV)
    layer, x, ids, weights = routed(moe, shape, 60, torch.float32, bias=skew)
    w13, w2 = layer["w13"], layer["w2"]
    capacity = moe.capacity_for(60, shape, 1.0)
    order, offsets = moe.sort_by_expert(ids, shape["experts"])
    _, slot = moe.queue_slots(ids, order, offsets)
    counts = torch.bincount(ids.flatten(), minlength=shape["experts"])
    assert int((slot >= capacity).sum()) == int((counts - capacity).clamp(min=0).sum()) > 0
    dropped = torch.empty_like(slot).index_copy_(0, order, slot).view(ids.shape) >= capacity
    full = moe.experts_loop(x, ids, weights, w13, w2)
    padded = moe.experts_padded(x, ids, weights, w13, w2, capacity)
    kept_whole = ~dropped.any(dim=1)
    torch.testing.assert_close(padded[kept_whole], full[kept_whole], rtol=1e-4, atol=1e-4)
    assert (padded[~kept_whole] - full[~kept_whole]).abs().amax(dim=1).min() > 1e-3


def test_the_skewed_router_is_more_uneven_and_drops_more(moe):
    """routing.py's counts: max/mean grows with alpha; at every capacity factor the skewed router
    drops at least as much; nothing is dropped at the dropless capacity factor."""
    routing = load_snippet("m11/routing")
    shape = {"hidden": 64, "ffn": 1, "experts": 16, "top_k": 4}
    gate = moe.make_gate(shape, DEV, torch.float32)
    x = torch.randn(2000, 64, device=DEV)
    ratios, dropped = [], []
    for alpha in routing.ALPHAS:
        ids, _ = moe.route(x, gate, 4, moe.skew_bias(16, alpha, DEV) if alpha else None)
        load = routing.load(ids, 16)
        assert sum(load["tokens_per_expert"]) == 2000 * 4
        ratios.append(load["max_over_mean"])
        dropped.append(
            [routing.drops(ids, 16, moe.capacity_for(2000, shape, cf))["dropped_assignments"] for cf in (1.0, 1.5)]
        )
        none = routing.drops(ids, 16, math.ceil(load["dropless_capacity_factor"] * 2000 * 4 / 16))
        assert none["dropped_assignments"] == 0 and 0 <= none["padding_fraction"] < 1
    assert ratios == sorted(ratios) and ratios[-1] > 2 * ratios[0], ratios
    assert dropped[0][0] < dropped[-1][0] and all(a >= b for a, b in dropped), dropped


# ---------------------------------------------------------------- torch.compile on the routes


@pytest.fixture(scope="module")
def compile_inputs(moe):
    shape = {"hidden": 16, "ffn": 16, "experts": 4, "top_k": 2}
    layer = moe.make_layer(shape, DEV, torch.bfloat16)
    routings = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        x = torch.randn(48, 16, device=DEV, dtype=torch.bfloat16)
        ids, weights = moe.route(x, layer["gate"], 2)
        routings.append((x, ids, weights, layer["w13"], layer["w2"]))
    return routings


@pytest.fixture(scope="module")
def compiled():
    return load_snippet("m11/compiled")


def test_the_loop_breaks_at_its_host_sync(moe, compiled, compile_inputs):
    e = compiled.explain(moe.experts_loop, compile_inputs[0])
    assert e["graphs"] == 2 and e["graph_breaks"] == 1, e
    assert "tolist" in e["breaks"][0]["line"], e["breaks"]
    assert "Data dependent" in e["breaks"][0]["reason"], e["breaks"]
    f = compiled.fullgraph(moe.experts_loop, compile_inputs[0])
    assert not f["ok"] and f["error"], f
    # counts kept as unbacked symbols instead: the Python branch on one of them cannot be decided
    s = compiled.fullgraph(moe.experts_loop, compile_inputs[0], capture_scalar_outputs=True)
    assert not s["ok"] and "data-dependent" in s["error"] and "end > start" in s["error"], s


@pytest.mark.parametrize("route", ["experts_padded", "experts_grouped"])
def test_static_routes_are_one_graph_for_every_routing(moe, compiled, compile_inputs, route):
    fn = getattr(moe, route)
    args = [r + ((48,) if route == "experts_padded" else ()) for r in compile_inputs]
    e = compiled.explain(fn, args[0])
    assert e["graphs"] == 1 and e["graph_breaks"] == 0, e
    assert compiled.fullgraph(fn, args[0])["ok"]
    r = compiled.recompiles(fn, args)
    assert r["graphs_after_call"] == [1, 1, 1] and not r["reasons"], r


def test_the_loop_recompiles_for_a_new_routing(moe, compiled, compile_inputs):
    """After the break, Dynamo specialises the loop on the counts: another routing fails a guard on
    one of them and compiles again; the reason names the count's guard."""
    counts = [torch.bincount(r[1].flatten(), minlength=4).tolist() for r in compile_inputs]
    assert counts[0] != counts[1]
    r = compiled.recompiles(moe.experts_loop, compile_inputs[:2])
    assert r["graphs_after_call"][1] > r["graphs_after_call"][0], r
    assert r["reasons"] and "Recompiling function" in r["reasons"][0] and "==" in r["reasons"][0], r["reasons"]
