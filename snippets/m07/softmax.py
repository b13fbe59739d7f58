"""Fused row softmax in Triton against torch.softmax, eager and compiled, for rows of N = 1,024 to
32,768 in float32 and bfloat16. Each input is 2^28 bytes (256 MiB, over four times the H200's L2),
so the rows number 2^28 / (N x element size). One kernel, two ways through a row, chosen by the
autotuner per N and dtype along with the warps and the rows per program:

- one pass: a program holds ROWS whole rows in registers, reads each element once and writes it once;
- online: a program walks its row in CHUNK-wide blocks (rows too long to hold need it; the
  autotuner may pick it for shorter ones where it times faster), keeping a running maximum
  and a running sum of exponentials rescaled as the maximum grows (online softmax), then reads
  the row again to write it. The first read asks L2 to keep the row (eviction_policy="evict_last"),
  the second read and the write to let go of it ("evict_first"), so that the second read is served
  from L2 (Inductor's looped reductions give their two reads the same hints).

Bandwidth counts the bytes a softmax must move, one read and one write of the tensor (the online
way reads it twice, so its real traffic is higher). The compiled peer is torch.compile of the same
torch.softmax call, compiled once per shape (dynamic=False) and timed warm; on a GPU also with
mode="max-autotune-no-cudagraphs" (every reduction config Inductor knows timed, then coordinate
descent), launched from Python like the other two, so that all are timed the same way. Where
Liger Kernel is installed, its softmax (LigerSoftmaxFunction: a whole row per program, 4 to 32 warps
by row length) races too, called as its users call it."""

import math

# --8<-- [start:imports]
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton runs the kernels in its interpreter, on the CPU
import triton  # noqa: E402  (imported after the switch above, as Triton's documentation has it)
import triton.language as tl  # noqa: E402

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, rate, summarize  # noqa: E402

try:  # Liger Kernel's softmax (pure Triton; pip install liger-kernel): raced where it is installed
    from importlib.metadata import version

    from liger_kernel.ops import LigerSoftmaxFunction

    LIGER = f"Liger Kernel {version('liger-kernel')}"
except ImportError:
    LigerSoftmaxFunction, LIGER = None, None

PROCESSES = 1  # one process: every number here is a device-side time (CUDA events), not a host timing

TENSOR_BYTES = 2**28  # each input: 256 MiB, beyond the H200's 60 MB L2 several times over
COLUMNS = [1024, 2048, 4096, 8192, 16384, 32768]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SMALL_SHAPES = [(5, 64), (3, 1000)]  # (rows, N) on the CPU: a row shorter than its block, and one not a power of two


# --8<-- [start:configs]
# Candidates for the autotuner: one-pass with 1 to 16 rows per program, or online in CHUNK-wide blocks.
SOFTMAX_CONFIGS = (
    [triton.Config({"ROWS": 1, "ONLINE": False, "CHUNK": 1, "FLAT": True}, num_warps=w) for w in (4, 8, 16, 32)]
    # the same row as a [1, ROW_BLOCK] block, kept at many warps to show what the 1-D form gains
    + [triton.Config({"ROWS": 1, "ONLINE": False, "CHUNK": 1, "FLAT": False}, num_warps=w) for w in (16, 32)]
    + [
        triton.Config({"ROWS": r, "ONLINE": False, "CHUNK": 1, "FLAT": False}, num_warps=w)
        for r, w in ((2, 4), (4, 4), (4, 8), (8, 4), (8, 8), (16, 16))
    ]
    + [
        triton.Config({"ROWS": 1, "ONLINE": True, "CHUNK": c, "FLAT": False}, num_warps=w)
        for c, w in ((2048, 4), (4096, 8), (4096, 16), (8192, 16), (8192, 32), (16384, 32))
    ]
)


def prune_configs(configs, named_args, **kwargs):
    """Keep the candidates that suit this row length. One pass holds ROWS x ROW_BLOCK values in
    registers: keep 4 to 64 per thread (fewer leaves threads idle, more spills registers), and several
    rows per program only for short rows. Online only where a row spans two chunks or more."""
    n_cols, row_block = named_args["n_cols"], kwargs["ROW_BLOCK"]
    kept = []
    for config in configs:
        rows, online, chunk = config.kwargs["ROWS"], config.kwargs["ONLINE"], config.kwargs["CHUNK"]
        per_thread = rows * row_block // (32 * config.num_warps)
        if online and n_cols >= 2 * chunk:
            kept.append(config)
        elif not online and 4 <= per_thread <= 64 and (rows == 1 or row_block <= 2048):
            kept.append(config)
    return kept or configs[:1]  # tiny rows (the CPU run): one program of 4 warps per row


def cpu_autotune_bench(kernel_call, quantiles):
    """The autotuner's benchmark where there is no GPU: the interpreter has no device to time on, so
    each candidate runs once (checked, not timed) and all tie; the first one left is taken."""
    kernel_call()
    return [1.0 for _ in quantiles]


# --8<-- [end:configs]


# --8<-- [start:kernel]
@triton.autotune(
    configs=SOFTMAX_CONFIGS,
    key=["n_cols"],  # and the tensors' dtypes, which the autotuner adds to the key itself
    prune_configs_by={"early_config_prune": prune_configs},
    do_bench=None if torch.cuda.is_available() else cpu_autotune_bench,  # None: Triton's own, on the GPU
)
@triton.jit
def softmax_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    ROW_BLOCK: tl.constexpr,  # n_cols rounded up to a power of two: a whole row as one block
    ROWS: tl.constexpr,  # rows per program
    ONLINE: tl.constexpr,  # walk the row in CHUNK-wide blocks instead of holding it whole
    CHUNK: tl.constexpr,
    FLAT: tl.constexpr,  # one pass over one row (ROWS = 1) as a 1-D block
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    x_rows = x_ptr + rows[:, None].to(tl.int64) * x_row_stride  # [ROWS, 1] pointers to the rows' starts
    y_rows = y_ptr + rows[:, None].to(tl.int64) * y_row_stride
    if not ONLINE and FLAT:  # one pass over one row as a 1-D block (the autotuner also times it as [1, ROW_BLOCK])
        row = tl.program_id(0).to(tl.int64)  # the grid has exactly n_rows programs
        cols = tl.arange(0, ROW_BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        num = tl.exp(x - tl.max(x, axis=0))  # padding past the row's end loads as -inf: exp(-inf) = 0 adds nothing
        y = num * (1.0 / tl.sum(num, axis=0))
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)
    elif not ONLINE:  # one pass over ROWS rows: the whole rows in registers, one read and one write per element
        cols = tl.arange(0, ROW_BLOCK)[None, :]
        mask = row_ok[:, None] & (cols < n_cols)
        x = tl.load(x_rows + cols, mask=mask).to(tl.float32)  # compute in float32 whatever the storage
        x = tl.where(cols < n_cols, x, float("-inf"))  # padding past the row's end: exp(-inf) = 0 adds nothing
        x = x - tl.max(x, axis=1)[:, None]  # subtract the row maximum: exp never overflows
        num = tl.exp(x)
        y = num * (1.0 / tl.sum(num, axis=1))[:, None]  # one division per row, a multiply per element
        tl.store(y_rows + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:  # online: a running max m and a running sum d of exp(x - m), rescaled whenever m grows
        m = tl.full([ROWS], float("-inf"), tl.float32)
        d = tl.zeros([ROWS], tl.float32)
        for start in range(0, n_cols, CHUNK):
            cols = start + tl.arange(0, CHUNK)[None, :]
            mask = row_ok[:, None] & (cols < n_cols)
            # evict_last: keep the row in L2 for the second read below, before the other rows' traffic
            x = tl.load(x_rows + cols, mask=mask, eviction_policy="evict_last").to(tl.float32)
            x = tl.where(cols < n_cols, x, float("-inf"))
            m_new = tl.maximum(m, tl.max(x, axis=1))
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m = m_new
        inv_d = 1.0 / d
        for start in range(0, n_cols, CHUNK):  # second read of the row (from L2 if it is still there)
            cols = start + tl.arange(0, CHUNK)[None, :]
            mask = row_ok[:, None] & (cols < n_cols)
            # evict_first: neither this read nor the output is needed again; leave L2 to other rows
            x = tl.load(x_rows + cols, mask=mask, eviction_policy="evict_first").to(tl.float32)
            y = tl.exp(x - m[:, None]) * inv_d[:, None]
            tl.store(y_rows + cols, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


def softmax(x: torch.Tensor, out: torch.Tensor | None = None, config: triton.Config | None = None) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, autotuned per row length and dtype; with
    config, that one candidate instead (no tuning)."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    args = (x, out, n_rows, n_cols, x.stride(0), out.stride(0))
    grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)
    row_block = triton.next_power_of_2(n_cols)
    if config is None:
        softmax_kernel[grid](*args, ROW_BLOCK=row_block)
    else:
        softmax_kernel.fn[grid](*args, ROW_BLOCK=row_block, **config.all_kwargs())
    return out


# --8<-- [end:kernel]


def paired_ratio(theirs: dict, ours: dict) -> dict:
    """theirs / ours round by round (both timed in the same rounds): a summary of the ratios."""
    return summarize([t / o for t, o in zip(theirs["rounds"], ours["rounds"])], "x")


def finite_ms(timing) -> float | None:
    """The median of an autotuner timing; None for a candidate that failed to compile or launch (inf)."""
    ms = timing[0] if isinstance(timing, list | tuple) else timing
    return ms if math.isfinite(ms) else None


def chosen_config(n_cols: int, dtype: torch.dtype) -> dict:
    """The candidate the autotuner kept for this row length and dtype, and the candidates it timed."""
    key = next(k for k in softmax_kernel.cache if k[0] == n_cols and str(dtype) in k)
    best = softmax_kernel.cache[key]
    timings = getattr(softmax_kernel, "configs_timings", {}) if torch.cuda.is_available() else {}
    return {
        **best.kwargs,
        "num_warps": best.num_warps,
        "candidates": [{**c.kwargs, "num_warps": c.num_warps, "autotune_ms": finite_ms(t)} for c, t in timings.items()],
    }


def time_shape(n_rows: int, n_cols: int, dtype: torch.dtype, dev: str, backend: str) -> dict:
    """One shape and dtype: Triton's softmax, torch.softmax eager and compiled, each warm, timed with
    do_bench. The tensors are freed on return, before the next shape allocates its own."""
    x = torch.randn(n_rows, n_cols, device=dev, dtype=dtype)  # random data, never zeros
    out = torch.empty_like(x)
    moved = 2 * x.numel() * x.element_size()  # one read, one write
    torch._dynamo.reset()  # a fresh compile for this shape: one static graph, no recompile limit
    compiled = torch.compile(lambda t: torch.softmax(t, dim=-1), dynamic=False, backend=backend)
    expected = torch.softmax(x, dim=-1)
    compiled_out = compiled(x)  # compiles here, before any timing
    peers = {"torch_eager": lambda: torch.softmax(x, dim=-1), "torch_compile": lambda: compiled(x)}
    if backend == "inductor":  # Inductor at its best: every reduction config timed, then coordinate descent
        tuned = torch.compile(lambda t: torch.softmax(t, dim=-1), dynamic=False, mode="max-autotune-no-cudagraphs")
        tuned_out = tuned(x)  # autotunes here, before any timing
        peers["torch_compile_max_autotune"] = lambda: tuned(x)
    if LigerSoftmaxFunction is not None:  # as its users call it: a new output each call, like torch.softmax
        liger_out = LigerSoftmaxFunction.apply(x)  # compiles here, before any timing
        peers["liger"] = lambda: LigerSoftmaxFunction.apply(x)
    softmax(x, out)  # autotunes here, before any timing: every candidate writes out
    got = softmax(x, out.fill_(float("nan")))  # the winner alone: an element it does not write stays NaN
    written = not got.isnan().any().item()
    diff = (got.float() - expected.float()).abs().max().item() if written else -1.0
    # All in turn, round after round: a drift in clocks over the run lands on all alike.
    times = gpu_us_each({"triton": lambda: softmax(x, out), **peers}, rounds=20)
    diffs = {"triton_vs_eager": diff, "compiled_vs_eager": (compiled_out.float() - expected.float()).abs().max().item()}
    if "torch_compile_max_autotune" in peers:
        diffs["max_autotune_vs_eager"] = (tuned_out.float() - expected.float()).abs().max().item()
    if "liger" in peers:
        diffs["liger_vs_eager"] = (liger_out.float() - expected.float()).abs().max().item()
    return {
        "n_cols": n_cols,
        "n_rows": n_rows,
        "bytes_moved": moved,
        "config": chosen_config(n_cols, dtype),
        "all_written": written,
        "max_abs_diff": diffs,
        "variants": {name: {"time_us": t, "GBps": rate(t, moved / 1e9, "GB/s")} for name, t in times.items()},
        "speedup": {  # per round: the peer's time over ours, in the same round
            "vs_eager": paired_ratio(times["torch_eager"], times["triton"]),
            "vs_compile": paired_ratio(times["torch_compile"], times["triton"]),
            **(
                {"vs_max_autotune": paired_ratio(times["torch_compile_max_autotune"], times["triton"])}
                if "torch_compile_max_autotune" in times
                else {}
            ),
            **({"vs_liger": paired_ratio(times["liger"], times["triton"])} if "liger" in times else {}),
        },
    }


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    backend = "inductor" if cuda else "aot_eager"
    notes = []
    if not cuda:
        notes += [
            "CPU run: the Triton kernel ran in Triton's interpreter; times are host times",
            "CPU run: torch.compile used backend='aot_eager' (Dynamo and AOTAutograd, no Inductor): a cold "
            "Inductor build of its C++ kernels takes about half a minute on a 2-core machine",
            "CPU run: the autotuner cannot time candidates without a GPU; each ran once and the first was kept",
        ]
    if LIGER is None:
        notes.append("Liger Kernel is not installed here (pip install liger-kernel): its softmax was not raced")
    points = []
    for dtype_name, dtype in DTYPES.items():
        item = torch.tensor([], dtype=dtype).element_size()
        shapes = SMALL_SHAPES if small else [(TENSOR_BYTES // (n * item), n) for n in COLUMNS]
        for n_rows, n_cols in shapes:
            points.append({"dtype": dtype_name, **time_shape(n_rows, n_cols, dtype, dev, backend)})
    reps = [v["time_us"]["n"] for p in points for v in p["variants"].values()]
    peer_names = {
        "torch_eager": "torch.softmax",
        "torch_compile": f"torch.compile ({backend})",
        "torch_compile_max_autotune": "torch.compile (max-autotune, no CUDA graphs)",
        "liger": f"{LIGER} softmax",
    }
    races = [  # the scoreboard's rows (coursekit/scoreboard.py): every shape, against every peer
        {
            "name": f"Triton softmax, {p['dtype']}, {p['n_rows']:,} x {p['n_cols']:,}",
            "peer": peer,
            "ours": p["variants"]["triton"]["time_us"],
            "theirs": p["variants"][variant]["time_us"],
            "bar": 1.0,
            "chapter": "part-k/07-triton.md",
        }
        for p in points
        for variant, peer in peer_names.items()
        if variant in p["variants"]
    ]
    return {
        "repetitions": min(reps),
        "tensor_bytes": TENSOR_BYTES,
        "compile_backend": backend,
        "liger": LIGER,
        "points": points,
        "notes": notes,
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"row softmax on {device_name()}: GB/s (one read + one write), and Triton's speed-up")
    columns = ("triton", "eager", "compile", "vs eager", "vs comp.")
    print(f"  {'dtype':<9} {'rows x N':>15}" + "".join(f" {c:>9}" for c in columns) + "  config")
    for p in r["points"]:
        v, s, c = p["variants"], p["speedup"], p["config"]
        way = f"online CHUNK={c['CHUNK']}" if c["ONLINE"] else f"one pass, {c['ROWS']} row(s)"
        print(
            f"  {p['dtype']:<9} {p['n_rows']:>6} x {p['n_cols']:<6}"
            + "".join(f" {v[k]['GBps']['median']:9.1f}" for k in ("triton", "torch_eager", "torch_compile"))
            + f" {s['vs_eager']['median']:8.2f}x {s['vs_compile']['median']:8.2f}x  {way}, {c['num_warps']} warps"
            + (f"; {s['vs_liger']['median']:.2f}x {r['liger']}" if "vs_liger" in s else "")
        )
    for note in r["notes"]:
        print(f"  note: {note}")
