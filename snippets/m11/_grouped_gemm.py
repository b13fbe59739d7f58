"""The course's Triton grouped GEMM: out[rows of group g] = x_sorted[rows of group g] @ w[g] for every
group g at once, in one launch, with the groups' row ranges read on the device from cumulative offsets,
as torch._grouped_mm takes them (2-D x, 3-D w, int32 offs). No count reaches the host, so nothing
waits for the GPU before the launch, and the launch is the same whatever the routing.

The shape is Triton's grouped-GEMM tutorial (python/tutorials/08-grouped-gemm.py), a persistent
kernel: a fixed number of programs, each looping over the output tiles of all groups, taking every
P-th tile (P programs). Tiles are numbered group after group; a program walks the groups in order,
reading each group's end from the offsets (one scalar load per group), and computes the tiles of the
group that are its own like module 07's tutorial matmul: pointer loads, K masked, and within a group
tiles ordered in bands of GROUP_M tile rows so that programs running together share rows of x and
columns of w in L2. Inductor's grouped template (torch/_inductor/kernel/templates/
triton_mm_grouped.py.jinja) walks the groups the same way. An empty group has no tiles; a group's last
row tile may be partial (its rows past the group's end are read, as the group's last row, and never
stored).

The grid cannot be sized to the tiles without reading the counts on the host (a sync); it is
PROGRAMS_PER_SM programs per SM instead: 1 for tiles whose buffers fill an SM's shared memory, 2 where
two fit (then one program's epilogue overlaps the other's loads). The autotuner picks the tile shape,
stages, warps and that number among a few configs.

Layout: x_sorted [M, K] row-major with rows grouped by expert; w [G, K, N] (any strides; the snippets
store weights row-major, N contiguous); offs [G] int32 cumulative ends: group g owns rows offs[g-1] to
offs[g] (offs[-1] taken as 0). Rows past offs[G-1] are not written, as in torch._grouped_mm."""

# --8<-- [start:imports]
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton runs the kernels in its interpreter, on the CPU
import triton  # noqa: E402  (imported after the switch above, as Triton's documentation has it)
import triton.language as tl  # noqa: E402

# --8<-- [end:imports]


# --8<-- [start:configs]
def config(bm, bn, bk, stages, warps, programs_per_sm):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "PROGRAMS_PER_SM": programs_per_sm},
        num_stages=stages,
        num_warps=warps,
    )


# A short list: every candidate is compiled once and timed once per (M, N, K). Shared memory per
# program: (BLOCK_M + BLOCK_N) x BLOCK_K x stages x 2 bytes; an H200 SM has 228 KiB, so the 96 KiB
# ones run two programs per SM.
CONFIGS = [
    config(128, 256, 64, 3, 8, 1),  # module 07's fastest tile for a dense 4096^3 bf16 matmul on an H200
    config(128, 128, 64, 4, 8, 1),
    config(128, 128, 64, 3, 4, 2),
    config(128, 128, 64, 3, 8, 2),
    config(64, 128, 64, 4, 4, 2),  # smaller row tiles waste less on a group's last, partial tile
    config(128, 64, 64, 4, 4, 2),
]


def cpu_autotune_bench(kernel_call, quantiles):
    """The autotuner's benchmark where there is no GPU: each candidate runs once (checked, not timed)
    in the interpreter and all tie; the first one is kept."""
    kernel_call()
    return [1.0 for _ in quantiles]


AUTOTUNE_BENCH = None if torch.cuda.is_available() else cpu_autotune_bench  # None: Triton's do_bench on a GPU
# On the CPU one small tile, nothing to tune: the interpreter pays per operation of every program and
# per element of every tl.dot (numpy has no fast float16 matmul), and there is no GPU to time on.
TUNED = CONFIGS if torch.cuda.is_available() else [config(64, 64, 32, 1, 4, 1)]
# --8<-- [end:configs]


# --8<-- [start:kernel]
@triton.autotune(configs=TUNED, key=["M", "N", "K"], do_bench=AUTOTUNE_BENCH)
@triton.jit(do_not_specialize=["G"])  # one binary for 8 and 128 groups (ints are specialized on divisibility by 16)
def grouped_mm_kernel(
    x_ptr, w_ptr, out_ptr, offs_ptr, M, N, K, G,
    stride_xm, stride_xk, stride_wg, stride_wk, stride_wn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS_PER_SM: tl.constexpr,  # sizes the grid (grouped_mm below); the kernel does not read it
):  # fmt: skip
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    tile = tl.program_id(0)  # this program's next tile, numbered over all groups
    first_tile = 0  # number of the first tile of group g
    start = 0  # first row of group g
    w_group = w_ptr  # group g's matrix: a pointer moved by stride_wg per group, never g * stride_wg in 32 bits
    for g in range(0, G):
        end = tl.load(offs_ptr + g)  # where the group ends, read on the device
        rows = end - start
        num_pid_m = (rows + BLOCK_M - 1) // BLOCK_M
        while tile < first_tile + num_pid_m * num_pid_n:  # this program's tiles in group g (none if empty)
            # The tile's place in its group, in bands of GROUP_M tile rows (module 07's order).
            t = tile - first_tile
            first_m = (t // (GROUP_M * num_pid_n)) * GROUP_M
            band_m = min(num_pid_m - first_m, GROUP_M)  # the last band may be shorter
            pid_m = first_m + (t % (GROUP_M * num_pid_n)) % band_m
            pid_n = (t % (GROUP_M * num_pid_n)) // band_m
            local_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # row in the group
            # Rows past the group's end read its last row, columns past N wrap: neither is stored.
            offs_m = start + tl.minimum(local_m, rows - 1)
            offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
            offs_k = tl.arange(0, BLOCK_K)
            x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
            w_ptrs = w_group + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
            acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)  # accumulate in float32
            for k in range(0, K, BLOCK_K):
                k_left = K - k  # the last step along K may be partial: mask it with zeros
                a = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
                acc = tl.dot(a, b, acc)  # on the tensor cores: wgmma on Hopper
                x_ptrs += BLOCK_K * stride_xk
                w_ptrs += BLOCK_K * stride_wk
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            out_ptrs = out_ptr + (start + local_m)[:, None].to(tl.int64) * stride_om + cols[None, :] * stride_on
            tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(local_m[:, None] < rows) & (cols[None, :] < N))
            tile += tl.num_programs(0)
        first_tile += num_pid_m * num_pid_n
        start = end
        w_group += stride_wg


# --8<-- [end:kernel]


# --8<-- [start:launch]
# SMs of the GPU (two on the CPU: then each program loops, as on a GPU). Read once here, not per call:
# inside torch.compile a plain int is a constant, a device query may not be.
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 2


def grouped_mm(x_sorted, w, offs, config: triton.Config | None = None, out=None):
    """torch._grouped_mm(x_sorted, w, offs) for a 2-D x_sorted [M, K], a 3-D w [G, K, N] and int32
    offsets [G], in Triton: autotuned, or with one config (no tuning); into out [M, N] if given.
    Reads no count on the host."""
    (M, K), (G, _, N) = x_sorted.shape, w.shape
    out = torch.empty(M, N, device=x_sorted.device, dtype=x_sorted.dtype) if out is None else out

    def grid(meta):
        # No more programs than tiles could be: at most cdiv(M, BLOCK_M) + G row tiles, whatever the counts.
        bound = (triton.cdiv(M, meta["BLOCK_M"]) + G) * triton.cdiv(N, meta["BLOCK_N"])
        return (min(meta["PROGRAMS_PER_SM"] * NUM_SMS, bound),)

    args = (x_sorted, w, out, offs, M, N, K, G, *x_sorted.stride(), *w.stride(), *out.stride())
    if config is None:
        grouped_mm_kernel[grid](*args)
    else:
        grouped_mm_kernel.fn[grid](*args, **config.all_kwargs())
    return out


# --8<-- [end:launch]


# --8<-- [start:tma_configs]
# The same product with its tiles brought in by TMA (grouped_mm_tma below). Each candidate also says how
# the weights are described (W_3D: one 3-D descriptor [G, K, N], the one measured; or the groups stacked as
# 2-D rows, tested on the CPU only). Not warp-specialized (not tried): module 07 got Triton 3.6 to specialize a
# plain matmul loop on the H200 at 4 warps; this kernel's K loop sits inside a while loop over the tiles.
def tma_config(bm, bn, bk, stages, warps, programs_per_sm, w_3d=True, tma_store=False, subtile=False):
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "PROGRAMS_PER_SM": programs_per_sm}
    store = {"TMA_STORE": tma_store, "EPILOGUE_SUBTILE": subtile}
    return triton.Config(meta | {"W_3D": w_3d} | store, num_stages=stages, num_warps=warps)


# What the autotuner chooses among. Shared memory per program: (BLOCK_M + BLOCK_N) x BLOCK_K x stages x 2
# bytes (an H200 SM has 228 KiB): 64 x 128 at 4 stages and 128 x 128 at 3 leave room for two programs.
# TMA_STORE: a tile whose rows all lie in its group leaves through a TMA store, copied out of shared memory
# by the TMA unit (the staged tile takes 64 KiB for 128 x 256, half with EPILOGUE_SUBTILE, which stores it
# in two halves).
TMA_CONFIGS = [
    tma_config(128, 256, 64, 3, 8, 1),
    tma_config(128, 256, 64, 4, 8, 1),
    tma_config(128, 256, 64, 3, 8, 1, tma_store=True),
    tma_config(128, 256, 64, 3, 8, 1, tma_store=True, subtile=True),
    tma_config(128, 256, 64, 4, 8, 1, tma_store=True, subtile=True),
    tma_config(64, 256, 64, 4, 4, 1, tma_store=True),
    tma_config(128, 128, 64, 4, 8, 1),
    tma_config(128, 128, 64, 3, 8, 2),
    tma_config(128, 128, 64, 3, 4, 2),
    tma_config(64, 256, 64, 4, 4, 1),
    tma_config(64, 128, 64, 4, 4, 2),
    tma_config(64, 128, 64, 4, 4, 1),
]
TMA_TUNED = TMA_CONFIGS if torch.cuda.is_available() else [tma_config(32, 32, 16, 1, 4, 1)]
# --8<-- [end:tma_configs]


# --8<-- [start:tma_kernel]
@triton.autotune(configs=TMA_TUNED, key=["M", "N", "K", "W_K_MAJOR"], do_bench=AUTOTUNE_BENCH)
@triton.jit(do_not_specialize=["G"])
def grouped_mm_tma_kernel(
    x_ptr, w_ptr, out_ptr, offs_ptr, M, N, K, G, stride_xm, stride_wg, stride_w_outer, stride_om, stride_on,
    W_K_MAJOR: tl.constexpr,  # w[g] stored [N, K] (K contiguous) rather than [K, N]
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS_PER_SM: tl.constexpr, W_3D: tl.constexpr, TMA_STORE: tl.constexpr = False,
    EPILOGUE_SUBTILE: tl.constexpr = False,
):  # fmt: skip
    # out as one [M, N] matrix, for the tiles stored through TMA: columns past N are not written
    C_N: tl.constexpr = BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N
    out_desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[stride_om, 1], block_shape=[BLOCK_M, C_N])
    # x as one [M, K] matrix: a tile is BLOCK_M rows from anywhere, its rows past the group's end belong
    # to the next group (read, never stored) or lie past M (read as zeros), its columns past K read as zeros.
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK_M, BLOCK_K])
    # w as stored, its contiguous dimension last (TMA wants it so). 3-D: a tile never leaves its group's
    # matrix, columns or rows past K and N read as zeros. 2-D: the G matrices stacked, group g's from row
    # g K (N-major) or g N (K-major), which needs stride_wg = K stride_w_outer or N stride_w_outer.
    if W_K_MAJOR:
        if W_3D:
            w_desc = tl.make_tensor_descriptor(
                w_ptr, shape=[G, N, K], strides=[stride_wg, stride_w_outer, 1], block_shape=[1, BLOCK_N, BLOCK_K]
            )
        else:
            w_desc = tl.make_tensor_descriptor(
                w_ptr, shape=[G * N, K], strides=[stride_w_outer, 1], block_shape=[BLOCK_N, BLOCK_K]
            )
    else:
        if W_3D:
            w_desc = tl.make_tensor_descriptor(
                w_ptr, shape=[G, K, N], strides=[stride_wg, stride_w_outer, 1], block_shape=[1, BLOCK_K, BLOCK_N]
            )
        else:
            w_desc = tl.make_tensor_descriptor(
                w_ptr, shape=[G * K, N], strides=[stride_w_outer, 1], block_shape=[BLOCK_K, BLOCK_N]
            )
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    tile = tl.program_id(0)  # this program's next tile, numbered over all groups (as in grouped_mm_kernel)
    first_tile = 0
    start = 0
    for g in range(0, G):
        end = tl.load(offs_ptr + g)
        rows = end - start
        num_pid_m = (rows + BLOCK_M - 1) // BLOCK_M
        while tile < first_tile + num_pid_m * num_pid_n:
            t = tile - first_tile
            first_m = (t // (GROUP_M * num_pid_n)) * GROUP_M
            band_m = min(num_pid_m - first_m, GROUP_M)
            pid_m = first_m + (t % (GROUP_M * num_pid_n)) % band_m
            pid_n = (t % (GROUP_M * num_pid_n)) // band_m
            row0 = start + pid_m * BLOCK_M  # the tile's first row of x and of out
            col0 = pid_n * BLOCK_N
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            # No masks: what lies past K reads as zeros in x, so it adds nothing whatever w holds there
            # (in the 2-D N-major view, the next group's first rows: finite weights times zeros).
            for k in range(0, K, BLOCK_K):
                a = x_desc.load([row0, k])
                if W_K_MAJOR:
                    if W_3D:
                        b = w_desc.load([g, col0, k]).reshape(BLOCK_N, BLOCK_K)
                    else:
                        b = w_desc.load([g * N + col0, k])
                    acc = tl.dot(a, b.T, acc)  # the [N, K] tile read transposed: wgmma takes it from shared memory
                else:
                    if W_3D:
                        b = w_desc.load([g, k, col0]).reshape(BLOCK_K, BLOCK_N)
                    else:
                        b = w_desc.load([g * K + k, col0])
                    acc = tl.dot(a, b, acc)
            c = acc.to(out_ptr.dtype.element_ty)
            if TMA_STORE and (pid_m + 1) * BLOCK_M <= rows:  # every row of the tile is this group's
                if EPILOGUE_SUBTILE:
                    left, right = tl.split(tl.permute(tl.reshape(c, (BLOCK_M, 2, C_N)), (0, 2, 1)))
                    out_desc.store([row0, col0], left)
                    out_desc.store([row0, col0 + C_N], right)
                else:
                    out_desc.store([row0, col0], c)
            else:  # a pointer store, masked: a TMA store of a partial tile would write the next group's rows
                local_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                cols = col0 + tl.arange(0, BLOCK_N)
                out_ptrs = out_ptr + (start + local_m)[:, None].to(tl.int64) * stride_om + cols[None, :] * stride_on
                tl.store(out_ptrs, c, mask=(local_m[:, None] < rows) & (cols[None, :] < N))
            tile += tl.num_programs(0)
        first_tile += num_pid_m * num_pid_n
        start = end


# --8<-- [end:tma_kernel]


# --8<-- [start:tma_launch]
def grouped_mm_tma(x_sorted, w, offs, config: triton.Config | None = None, out=None):
    """grouped_mm through TMA: the same arguments and result. x_sorted's rows and w's contiguous
    dimension (N or K: either layout) must have unit stride, the other strides and the base addresses
    16-byte aligned (TMA's rule), e.g. K and N multiples of 8 in 16-bit types; else ValueError.
    A config with W_3D=False also needs each group's matrix right after the previous one's and, with
    N-major weights, finite weights: a K tile's rows past K are the next group's first rows, multiplied
    by the zeros x reads past K (an inf or NaN there would still reach the output)."""
    (M, K), (G, _, N) = x_sorted.shape, w.shape
    out = torch.empty(M, N, device=x_sorted.device, dtype=x_sorted.dtype) if out is None else out
    if w.stride(2) == 1:
        k_major, outer = False, w.stride(1)
    elif w.stride(1) == 1:
        k_major, outer = True, w.stride(2)
    else:
        raise ValueError(f"grouped_mm_tma: w of strides {w.stride()} has neither N nor K contiguous")
    size = x_sorted.element_size()
    aligned = [x_sorted.data_ptr(), w.data_ptr(), x_sorted.stride(0) * size, w.stride(0) * size, outer * size]
    aligned += [out.data_ptr(), out.stride(0) * size]
    if x_sorted.stride(1) != 1 or out.stride(1) != 1 or any(a % 16 for a in aligned):
        raise ValueError(
            f"grouped_mm_tma: TMA needs unit inner strides and 16-byte aligned bases and strides; got x strides "
            f"{x_sorted.stride()}, w strides {w.stride()}, out strides {out.stride()} ({size}-byte elements)"
        )
    if config is not None and not config.kwargs["W_3D"] and w.stride(0) != outer * (N if k_major else K):
        raise ValueError(f"grouped_mm_tma: W_3D=False needs w's groups back to back; w strides {w.stride()}")
    # the descriptors made on the device live in a scratch buffer that Triton asks this allocator for
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=x_sorted.device, dtype=torch.int8))

    def grid(meta):
        bound = (triton.cdiv(M, meta["BLOCK_M"]) + G) * triton.cdiv(N, meta["BLOCK_N"])
        return (min(meta["PROGRAMS_PER_SM"] * NUM_SMS, bound),)

    args = (x_sorted, w, out, offs, M, N, K, G, x_sorted.stride(0), w.stride(0), outer, *out.stride())
    if config is None:
        grouped_mm_tma_kernel[grid](*args, W_K_MAJOR=k_major)
    else:
        grouped_mm_tma_kernel.fn[grid](*args, W_K_MAJOR=k_major, **config.all_kwargs())
    return out


# --8<-- [end:tma_launch]

if __name__ == "__main__":
    # Five groups, two of them empty, against a loop of torch.mm over the groups.
    counts = [70, 0, 3, 0, 150]
    dev, dtype = ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float16)
    x = torch.randn(sum(counts), 64, device=dev, dtype=dtype)
    w = torch.randn(len(counts), 64, 96, device=dev, dtype=dtype)
    offs = torch.tensor(counts, device=dev).cumsum(0).to(torch.int32)
    out = grouped_mm(x, w, offs)
    ends = offs.tolist()
    worst = max(
        (
            (out[s:e].float() - x[s:e].float() @ w[g].float()).abs().max().item()
            for g, (s, e) in enumerate(zip([0, *ends[:-1]], ends))
            if e > s
        ),
    )
    print(f"grouped_mm over groups of {counts} rows ({dtype}): max |difference| from a loop of mm {worst:.3g}")
    print(f"config: {grouped_mm_kernel.best_config.kwargs}")
