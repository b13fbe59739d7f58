"""A bfloat16 matmul in Triton against torch.mm (cuBLAS) at 4096^3 and 8192^3, reached step by step:

1. tutorial: one program per output tile, tiles visited in groups of GROUP_M rows so that
   neighbouring programs share their A and B tiles in L2; pointer loads; autotuned;
2. persistent: one program per SM, each looping over output tiles (no launch of a program per tile);
3. tma: the persistent kernel loading and storing through tensor descriptors (TMA, the Hopper
   copy engine that moves whole tiles between global and shared memory);
4. warp_specialized: the same loop marked tl.range(..., warp_specialize=True): on Hopper, Triton 3.6
   splits the loop into a producer warp group issuing TMA loads and two consumer warp groups
   issuing wgmma, which needs num_warps=4 and an unflattened loop (the snippet records, from the
   compiled code, whether the specialization happened).

Each step is autotuned over a few configs; the winning config, the autotuner's timing of every
candidate, the TFLOP/s (2 M N K flops per product) and the largest difference from torch.mm's
output are stored. Inputs are random, A is M x K and B is K x N, both row-major, for every step and
for torch.mm alike. On the CPU the kernels run in Triton's interpreter, in float16 on tiny shapes:
the interpreter multiplies bfloat16 operands of tl.dot as raw 16-bit integers."""

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

PROCESSES = 1  # one process: every number here is a device-side time (CUDA events), not a host timing

SIZES = [4096, 8192]  # M = N = K
RACED = "tma"  # the step that races cuBLAS on the scoreboard, named here, not picked from the timings
SMALL_SIZES = [96]  # on the CPU: one tile of the largest blocks, not a multiple of BLOCK_K


# --8<-- [start:configs]
def config(bm, bn, bk, stages, warps, **more):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, **more}, num_stages=stages, num_warps=warps
    )


# A short list each: every candidate is compiled and timed once per shape.
CONFIGS = [
    config(128, 256, 64, 3, 8),
    config(256, 128, 64, 3, 8),
    config(128, 128, 64, 4, 4),
    config(128, 128, 64, 4, 8),
]
# Step 2 also tries its tile loop flattened into the K loop (one software pipeline across tiles) or not.
PERSISTENT_CONFIGS = [config(bm, bn, 64, 3, 8, FLATTEN=f) for bm, bn in ((128, 256), (256, 128)) for f in (True, False)]
# Steps 3 and 4 also choose whether the output tile is stored in two halves (see the kernel); step 3
# also how many tile rows a group spans (GROUP_M: wider bands share more B columns in L2) and a
# 128 x 128 tile on one warp group, twice the tiles in flight.
TMA_CONFIGS = [
    config(128, 256, 64, 3, 8, EPILOGUE_SUBTILE=False),
    config(128, 256, 64, 3, 8, EPILOGUE_SUBTILE=True),
    config(128, 256, 64, 3, 8, EPILOGUE_SUBTILE=True, GROUP_M=16),
    config(128, 256, 64, 3, 8, EPILOGUE_SUBTILE=True, GROUP_M=32),
    config(128, 256, 64, 4, 8, EPILOGUE_SUBTILE=True),
    config(128, 128, 64, 4, 4, EPILOGUE_SUBTILE=False),
    config(128, 128, 64, 5, 4, EPILOGUE_SUBTILE=False),
]
# Warp specialization: one producer warp group issuing TMA loads, two consumer warp groups issuing
# wgmma. On Hopper, Triton 3.6 specializes only at num_warps=4 (the warps of one consumer); with 8 it
# compiles the plain loop without a word, which the compiled facts below record.
WS_CONFIGS = [
    config(128, 256, 64, 3, 4, EPILOGUE_SUBTILE=False),
    config(256, 128, 64, 3, 4, EPILOGUE_SUBTILE=False),
    config(128, 128, 64, 4, 4, EPILOGUE_SUBTILE=False),
    config(128, 128, 64, 5, 4, EPILOGUE_SUBTILE=False),
]


def cpu_autotune_bench(kernel_call, quantiles):
    """The autotuner's benchmark where there is no GPU: the interpreter has no device to time on, so
    each candidate runs once (checked, not timed) and all tie; the first one is taken."""
    kernel_call()
    return [1.0 for _ in quantiles]


AUTOTUNE_BENCH = None if torch.cuda.is_available() else cpu_autotune_bench  # None: Triton's do_bench on a GPU


# --8<-- [end:configs]


# --8<-- [start:tutorial]
@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Output tile (pid_m, pid_n) of a linear tile number, in groups of GROUP_M tile rows: the
    programs running together cover a GROUP_M-tall band and reuse its A rows and B columns in L2."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)  # the last group may be shorter
    pid_m = first_m + (tile_id % tiles_per_group) % group_m
    pid_n = (tile_id % tiles_per_group) // group_m
    return pid_m, pid_n


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"], do_bench=AUTOTUNE_BENCH)
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid_m, pid_n = tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M  # rows past the end wrap; their results are not stored
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # accumulate in float32
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K  # the last step along K may be partial: mask it with zeros
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)  # on the tensor cores: wgmma on Hopper
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


# --8<-- [end:tutorial]


# --8<-- [start:persistent]
@triton.autotune(configs=PERSISTENT_CONFIGS, key=["M", "N", "K"], do_bench=AUTOTUNE_BENCH)
@triton.jit
def matmul_kernel_persistent(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr = True,
):  # fmt: skip
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # One program per SM; program p computes tiles p, p + NUM_SMS, p + 2 NUM_SMS, ...
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        # Rows past the end read row 0 (never stored). The hints promise what the `% M` of the tutorial
        # let the compiler prove: runs of BLOCK_M contiguous offsets, so loads are vectorized.
        offs_m = tl.max_contiguous(tl.multiple_of(tl.where(offs_m < M, offs_m, 0), BLOCK_M), BLOCK_M)
        offs_n = tl.max_contiguous(tl.multiple_of(tl.where(offs_n < N, offs_n, 0), BLOCK_N), BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            ks = k * BLOCK_K + offs_k
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak, mask=ks[None, :] < K, other=0.0)
            b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn, mask=ks[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


# --8<-- [end:persistent]


# --8<-- [start:tma]
@triton.jit
def matmul_kernel_descriptors(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr = False,
):  # fmt: skip
    # Tensor descriptors: the shape, strides and tile shape of each matrix, made on the device; a load
    # or store through one is a TMA copy of a whole tile, out-of-bounds parts read as zeros, not written.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    # With EPILOGUE_SUBTILE the output tile leaves in two halves: half the shared memory for the store,
    # which leaves room for one more stage of A and B tiles in flight.
    C_N: tl.constexpr = BLOCK_N // 2 if EPILOGUE_SUBTILE else BLOCK_N
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, C_N])
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    # Hopper's warp specialization takes the tile loop as it is written: flattening is for the other case.
    for tile_id in tl.range(
        tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=not WARP_SPECIALIZE, warp_specialize=WARP_SPECIALIZE
    ):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c = acc.to(c_ptr.dtype.element_ty)
        if EPILOGUE_SUBTILE:
            left, right = tl.split(tl.permute(tl.reshape(c, (BLOCK_M, 2, C_N)), (0, 2, 1)))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left)
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + C_N], right)
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], c)


# Steps 3 and 4 are this one kernel, autotuned over different candidates.
matmul_kernel_tma = triton.autotune(configs=TMA_CONFIGS, key=["M", "N", "K"], do_bench=AUTOTUNE_BENCH)(
    matmul_kernel_descriptors
)
matmul_kernel_ws = triton.autotune(configs=WS_CONFIGS, key=["M", "N", "K"], do_bench=AUTOTUNE_BENCH)(
    matmul_kernel_descriptors
)


# --8<-- [end:tma]


# --8<-- [start:launch]
KERNELS = {
    "tutorial": matmul_kernel,
    "persistent": matmul_kernel_persistent,
    "tma": matmul_kernel_tma,
    "warp_specialized": matmul_kernel_ws,
}


def num_sms(device: torch.device) -> int:
    """Programs of a persistent kernel: one per SM (four on the CPU, to exercise the loop)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def matmul(step: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: triton.Config | None = None):
    """c = a @ b with one step's kernel, autotuned; with config, that one candidate (no tuning).
    Returns what the launch returns: the compiled kernel on a GPU (None in the interpreter).
    Steps 3 and 4 need 16-byte aligned rows for TMA: K and N multiples of 8 in 16-bit types."""
    (M, K), (_, N) = a.shape, b.shape
    kernel = KERNELS[step]
    tiles = lambda meta: triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
    if step == "tutorial":
        grid, meta = lambda meta: (tiles(meta),), {}
    else:
        grid, meta = lambda meta: (min(num_sms(a.device), tiles(meta)),), {"NUM_SMS": num_sms(a.device)}
    if step in ("tutorial", "persistent"):
        args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    else:
        # the descriptors made on the device live in a scratch buffer that Triton asks this allocator for
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=a.device, dtype=torch.int8))
        args = (a, b, c, M, N, K)
        meta["WARP_SPECIALIZE"] = step == "warp_specialized"
    if config is None:
        return kernel[grid](*args, **meta)
    return kernel.fn[grid](*args, **meta, **config.all_kwargs())


# --8<-- [end:launch]


def config_dict(cfg: triton.Config) -> dict:
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def autotune_report(kernel, cuda: bool) -> list:
    """Every candidate of the last tuning run and its median time in the autotuner's own timing
    (do_bench); None for a candidate that failed to compile (too much shared memory, say)."""
    if not cuda:
        return []
    rows = []
    for cfg, timing in getattr(kernel, "configs_timings", {}).items():
        ms = timing[0] if isinstance(timing, list | tuple) else timing
        rows.append({**config_dict(cfg), "autotune_ms": ms if math.isfinite(ms) else None})
    return rows


def compiled_facts(compiled) -> dict:
    """What the compiled winner is: registers, shared memory, and whether the loop was specialized
    (a ttg.warp_specialize region in its TTGIR, setmaxnreg in its PTX to move registers between
    the warp groups)."""
    if compiled is None or not hasattr(compiled, "asm"):
        return {}
    ttgir, ptx = compiled.asm.get("ttgir", ""), compiled.asm.get("ptx", "")
    return {
        "warp_specialized": "ttg.warp_specialize" in ttgir,
        "setmaxnreg_in_ptx": ptx.count("setmaxnreg"),
        "wgmma_in_ptx": ptx.count("wgmma.mma_async"),
        "shared_bytes": int(compiled.metadata.shared),
        "registers": int(getattr(compiled, "n_regs", 0) or 0),
    }


def clock_sampler(period_s: float = 0.005):
    """Read the GPU's SM clock, power draw and clock-event reasons through NVML every ``period_s`` on
    a background thread, each sample tagged with the variant the host last started (do_bench ends
    in a synchronisation, so the GPU runs that variant's calls while the tag holds). Returns
    ``(tag, stop)``: ``tag(name, fn)`` wraps a call; ``stop()`` ends sampling and returns, per
    variant, the clock and power summaries and the share of samples under a power cap or a
    slowdown. Without a GPU or NVML: ``stop()`` returns {}."""
    import threading

    current = {"name": None}

    def tag(name, fn):
        def call():
            current["name"] = name
            return fn()

        return call

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # no NVML here (a CPU run, or no nvidia-ml-py): nothing to read
        return tag, dict
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reasons = reasons or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    power_cap = 0x4  # NVML's SwPowerCap reason bit
    slowdown = 0x8 | 0x20 | 0x40 | 0x80  # hardware slowdown, software and hardware thermal, power brake
    samples, done = [], threading.Event()

    def sample():
        while not done.wait(period_s):
            if current["name"] is not None:
                mhz = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
                samples.append((current["name"], mhz, watts, reasons(handle)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def stop() -> dict:
        done.set()
        thread.join()
        out = {}
        for name in dict.fromkeys(s[0] for s in samples):
            mine = [s for s in samples if s[0] == name]
            out[name] = {
                "sm_clock_mhz": summarize([s[1] for s in mine], "MHz"),
                "power_w": summarize([s[2] for s in mine], "W"),
                "power_capped_share": sum(1 for s in mine if s[3] & power_cap) / len(mine),
                "slowdown_share": sum(1 for s in mine if s[3] & slowdown) / len(mine),
            }
        return out

    return tag, stop


def kernel_names(fn) -> list:
    """The kernels one call of ``fn`` launches, by name (torch.profiler); for cuBLAS, the name of the
    kernel its heuristic picked for the shape carries its tile, stages, cluster and schedule. Empty on
    the CPU."""
    if not torch.cuda.is_available():
        return []
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    return sorted({e.name for e in prof.events() if e.device_type == cuda and not e.name.startswith("Memset")})


def time_size(size: int, dtype: torch.dtype, dev: str, notes: list) -> dict:
    """One size: each step tuned and checked, then torch.mm and every step timed in turn, round after
    round, so that the clocks' drift over the run (a long GEMM run meets the GPU's power cap, which
    lowers them) lands on all alike. The tensors are freed on return."""
    cuda = dev == "cuda"
    a = torch.randn(size, size, device=dev, dtype=dtype)  # random data, never zeros
    b = torch.randn(size, size, device=dev, dtype=dtype)
    c = torch.empty(size, size, device=dev, dtype=dtype)
    flops = 2 * size**3
    expected = torch.mm(a, b)
    rows, calls = [], {"cublas": lambda: torch.mm(a, b, out=c)}
    for step in KERNELS:
        try:
            matmul(step, a, b, c)  # tunes on the first call for this shape: every candidate writes c
            compiled = matmul(step, a, b, c.fill_(float("nan")))  # the winner alone: what it misses stays NaN
        except Exception as exc:  # a step this Triton or this machine cannot run: say so, go on
            why = (str(exc).splitlines() or [""])[0][:200]
            notes.append(f"{size}^3 {step}: skipped, {type(exc).__name__}: {why}")
            continue
        written = not c.isnan().any().item()
        kernel = KERNELS[step]
        rows.append(
            {
                "step": step,
                "config": config_dict(kernel.best_config),
                "autotune": autotune_report(kernel, cuda),
                "compiled": compiled_facts(compiled),
                "all_written": written,
                "max_abs_diff_vs_torch": (c.float() - expected.float()).abs().max().item() if written else -1.0,
            }
        )
        calls[step] = lambda step=step: matmul(step, a, b, c)
    tag, stop = clock_sampler()
    calls = {name: tag(name, fn) for name, fn in calls.items()}
    times = gpu_us_each(calls, rounds=15, warmup_ms=250, rep_ms=40)  # a quarter second of warm-up each first
    clocks = stop()  # per variant: what the SM clock and the power draw were while it ran
    if cuda and not clocks:
        notes.append(f"{size}^3: the SM clock was not recorded (NVML, from nvidia-ml-py, could not be read)")
    cublas = times["cublas"]
    for row in rows:
        t = times[row["step"]]
        row.update(time_us=t, TFLOPs=rate(t, flops / 1e12, "TFLOP/s"))
        # cuBLAS's time over this step's, round by round: above 1, the step is faster
        row["vs_cublas"] = summarize([x / y for x, y in zip(cublas["rounds"], t["rounds"])], "x")
    return {
        "size": size,
        "cublas": {
            "time_us": cublas,
            "TFLOPs": rate(cublas, flops / 1e12, "TFLOP/s"),
            "kernels": kernel_names(lambda: torch.mm(a, b, out=c)),
        },
        "steps": rows,
        "max_abs_expected": expected.float().abs().max().item(),
        "clocks": clocks,
    }


def time_full_waves(size: int, dtype: torch.dtype, dev: str, config: dict) -> dict:
    """Where the gap at size^3 comes from: step RACED, with the config its autotuner chose at size^3,
    against torch.mm at size^3; at a shape with just enough more rows for its tiles to fill whole
    waves of programs over the SMs (the tail); and at shorter K loops (K = size / 4 and size / 2: the
    same tiles, each with less work to hide its fixed cost, the pipeline's fill and the epilogue).
    All in the same interleaved rounds."""
    sms = num_sms(torch.device(dev))
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    cfg = triton.Config(
        {k: v for k, v in config.items() if k not in ("num_warps", "num_stages")},
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    col_tiles = triton.cdiv(size, bn)
    waves = triton.cdiv(triton.cdiv(size, bm) * col_tiles, sms)
    shapes = {  # name: (M, K), N = size
        "square": (size, size),
        "full_waves": (triton.cdiv(waves * sms, col_tiles) * bm, size),
        "k_half": (size, size // 2),
        "k_quarter": (size, size // 4),
    }
    calls, out = {}, {}
    for name, (m, k) in shapes.items():
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, size, device=dev, dtype=dtype)
        c = torch.empty(m, size, device=dev, dtype=dtype)
        calls[f"cublas_{name}"] = lambda a=a, b=b, c=c: torch.mm(a, b, out=c)
        calls[f"{RACED}_{name}"] = lambda a=a, b=b, c=c: matmul(RACED, a, b, c, config=cfg)
        tiles = triton.cdiv(m, bm) * col_tiles
        out[name] = {"M": m, "N": size, "K": k, "tiles": tiles, "waves": tiles / sms}
        out[name]["cublas_kernels"] = kernel_names(calls[f"cublas_{name}"])
    tag, stop = clock_sampler()
    times = gpu_us_each({name: tag(name, fn) for name, fn in calls.items()}, rounds=15, warmup_ms=250, rep_ms=40)
    clocks = stop()
    for name in shapes:
        ours, theirs = times[f"{RACED}_{name}"], times[f"cublas_{name}"]
        # cuBLAS's time over ours, round by round: above 1, ours is faster
        out[name].update(time_us=ours, cublas_us=theirs)
        out[name]["vs_cublas"] = summarize([x / y for x, y in zip(theirs["rounds"], ours["rounds"])], "x")
        out[name]["clocks"] = {who: clocks[f"{who}_{name}"] for who in (RACED, "cublas") if f"{who}_{name}" in clocks}
    return {"sms": sms, "config": config, **out}


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float16
    notes = []
    if not cuda:
        notes += [
            "CPU run: the kernels ran in Triton's interpreter, in float16: its tl.dot multiplies bfloat16 "
            "operands as their raw 16-bit patterns (create_dot in triton/runtime/interpreter.py converts only "
            "8-bit floats; triton-lang/triton#11584)",
            "CPU run: the autotuner cannot time candidates without a GPU; each ran once and the first was kept",
            "CPU run: times are host times of the interpreter, not of any GPU",
        ]
    points = [time_size(size, dtype, dev, notes) for size in (SMALL_SIZES if small else SIZES)]
    raced = [s for s in points[0]["steps"] if s["step"] == RACED]
    tail = time_full_waves(points[0]["size"], dtype, dev, raced[0]["config"]) if raced else {}
    reps = [p["cublas"]["time_us"]["n"] for p in points] + [s["time_us"]["n"] for p in points for s in p["steps"]]
    races = []  # the scoreboard's rows (coursekit/scoreboard.py): step RACED, named before the run, against cuBLAS
    for p in points:
        for best in (s for s in p["steps"] if s["step"] == RACED):
            races.append(
                {
                    "name": f"Triton {str(dtype).removeprefix('torch.')} matmul {p['size']}^3 ({best['step']})",
                    "peer": "torch.mm (cuBLAS)",
                    "ours": best["time_us"],
                    "theirs": p["cublas"]["time_us"],
                    "bar": 1.0,
                    "chapter": "part-k/07-triton.md",
                }
            )
    return {
        "repetitions": min(reps),
        "dtype": str(dtype).removeprefix("torch."),
        "points": points,
        "notes": notes,
        "raced": RACED,
        "tail": tail,
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['dtype']} matmul on {device_name()}: TFLOP/s (2 M N K per product)")
    for p in r["points"]:
        print(f"  {p['size']}^3: cuBLAS {p['cublas']['TFLOPs']['median']:.1f}")
        for s in p["steps"]:
            cfg, facts = s["config"], s["compiled"]
            tile = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} s{cfg['num_stages']} w{cfg['num_warps']}"
            ws = f", specialized: {facts['warp_specialized']}" if facts else ""
            print(
                f"    {s['step']:<17} {s['TFLOPs']['median']:8.1f}  {s['vs_cublas']['median']:5.2f}x cuBLAS  "
                f"[{tile}{ws}]  max |diff| {s['max_abs_diff_vs_torch']:.3g}"
            )
        for name, c in p.get("clocks", {}).items():
            print(
                f"    clocks while {name} ran: SM {c['sm_clock_mhz']['median']:.0f} MHz, "
                f"{c['power_w']['median']:.0f} W, power-capped {c['power_capped_share']:.0%} of samples"
            )
    if r["tail"]:
        for name in ("square", "full_waves", "k_half", "k_quarter"):
            t = r["tail"][name]
            print(
                f"  {RACED} at {t['M']}x{t['N']}x{t['K']} ({t['tiles']} tiles, {t['waves']:.2f} waves of "
                f"{r['tail']['sms']} SMs): {t['vs_cublas']['median']:.3f}x cuBLAS"
            )
    for note in r["notes"]:
        print(f"  note: {note}")
