"""The evidence behind the matmul-steps figure: what Triton makes of each step's kernel, as text, in
one archive to open in a text editor. Each of the four steps of matmul.py (tutorial, persistent, tma,
warp_specialized) is compiled for Hopper (sm_90, the H200's) as its first launch at M = N = K = 4096
in bfloat16 would compile it, with the first config of its candidate list, through the same call as
artifacts.py; the archive holds, per step, its Triton IR (.ttir), its GPU IR with layouts (.ttgir),
its PTX (.ptx) and the SASS that cuobjdump prints from its cubin (.sass), plus a README.txt that
names this snippet and says how the steps differ. Compiling needs no GPU, so a CPU run writes the
same archive (for the same Triton). Timed: each step's compile, the cache bypassed, host clock.

On a GPU it also writes a profiler trace of the tma step at 4096^3 (its first config, not tuned)
beside torch.mm (cuBLAS), a few launches each, to open in ui.perfetto.dev."""

# --8<-- [start:imports]
import gzip
import io
import json
import os
import tarfile
import tempfile
import time

os.environ["TRITON_INTERPRET"] = "0"  # this snippet compiles kernels (and, on a GPU, runs them): no interpreter
import torch  # noqa: E402
import triton  # noqa: E402
from artifacts import compile_matmul, sass_of  # noqa: E402
from matmul import (  # noqa: E402
    CONFIGS,
    PERSISTENT_CONFIGS,
    TMA_CONFIGS,
    WS_CONFIGS,
    matmul,
    matmul_kernel,
    matmul_kernel_descriptors,
    matmul_kernel_persistent,
)
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us, summarize  # noqa: E402
from coursekit.evidence import artifact  # noqa: E402

PROCESSES = 1  # the files are evidence to read; the compile times are one-off host timings

KEY = "m07/evidence"  # every file this snippet writes starts with m07-evidence-
SIZE = 4096  # M = N = K of the launch whose compile this reproduces, and of the profiled launches
STAGES = {"ttir": "kernel.ttir", "ttgir": "kernel.ttgir", "ptx": "kernel.ptx"}  # compiled.asm key -> file
PROFILED_CALLS = 5  # launches of each kernel in the trace
H200_SMS = 132  # programs of a persistent step: one per SM of the H200, as artifacts.py compiles without a GPU

# --8<-- [start:steps]
# step -> (kernel, its first candidate, what the step changes), compiled as matmul.py launches it
STEPS = {
    "tutorial": (matmul_kernel.fn, CONFIGS[0], {}, "one program per output tile, pointer loads (cp.async)"),
    "persistent": (
        matmul_kernel_persistent.fn,
        PERSISTENT_CONFIGS[0],
        {"NUM_SMS": H200_SMS},
        "one program per SM looping over tiles, the tile loop flattened into the K loop, pointer loads",
    ),
    "tma": (
        matmul_kernel_descriptors,
        TMA_CONFIGS[0],
        {"NUM_SMS": H200_SMS, "WARP_SPECIALIZE": False},
        "the persistent loop loading and storing whole tiles through tensor descriptors (TMA)",
    ),
    "warp_specialized": (
        matmul_kernel_descriptors,
        WS_CONFIGS[0],
        {"NUM_SMS": H200_SMS, "WARP_SPECIALIZE": True},
        "the tma kernel with its tile loop split into a producer warp group (TMA loads) and consumers (wgmma)",
    ),
}
# --8<-- [end:steps]


def config_words(config: triton.Config) -> str:
    kw = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{kw}, num_warps={config.num_warps}, num_stages={config.num_stages}"


def sass_words(tool: str) -> str:
    """The cuobjdump that printed the SASS, by name (no machine's folders), or why there was none."""
    if tool.startswith("unavailable"):
        return f"no tool here ({tool})"
    return "the cuobjdump that Triton ships" if "triton" in tool else os.path.basename(tool)


def readme(target: GPUTarget, sass_tool: str) -> str:
    lines = [
        f"course snippet: {KEY} (snippets/m07/evidence.py)",
        f"Triton {triton.__version__}, torch {torch.__version__}, target {target.backend}:{target.arch}",
        f"Each folder is one step of snippets/m07/matmul.py, compiled as its first launch at M = N = K = {SIZE}",
        "in bfloat16 would compile it (pointers 16-byte aligned, sizes divisible by 16), with the first",
        "config of its candidate list (the tuned winner on the GPU may differ):",
        "",
    ]
    for step, (_, config, constants, what) in STEPS.items():
        lines += [
            f"{step}: {what}",
            f"    {config_words(config)}" + "".join(f", {k}={v}" for k, v in constants.items()),
        ]
    lines += [
        "",
        "Files per step: kernel.ttir (Triton IR: tt.load / tt.descriptor_load, tt.dot), kernel.ttgir (GPU IR:",
        "the layouts at the top, ttng.warp_group_dot = wgmma, async copies, ttg.warp_specialize), kernel.ptx",
        "(wgmma.mma_async, cp.async or cp.async.bulk.tensor = TMA, setmaxnreg), kernel.sass (HGMMA, LDGSTS or",
        f"UTMALDG/UTMASTG, USETMAXREG), disassembled from the cubin by {sass_words(sass_tool)}.",
        "Search each file for those words to see where the steps part ways.",
    ]
    return "\n".join(lines) + "\n"


def add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


# --8<-- [start:archive]
def write_ir(path, target: GPUTarget) -> dict:
    """Compile every step (the cache bypassed, host time taken) and write its IR stages into one
    gzipped tar at path. Returns per step its compile summary and the bytes of each stage."""
    out, files, tools = {}, {}, {}
    for step, (kernel, config, constants, _) in STEPS.items():
        kept = []  # the compiled kernel of the timed call
        compile_step = lambda: kept.append(compile_matmul(kernel, config, target, **constants))
        with triton.knobs.compilation.scope():
            triton.knobs.compilation.always_compile = True  # a real compile, not the on-disk cache's copy
            compile_us = host_us(compile_step, calls=1, repeats=1, warmup=0)
        compiled = kept[-1]
        sass, tool = sass_of(compiled.asm["cubin"])
        texts = {f"{step}/{name}": compiled.asm[stage] for stage, name in STAGES.items()}
        texts[f"{step}/kernel.sass"] = sass or f"no SASS: cuobjdump {tool}\n"
        files.update(texts)
        tools[step] = tool
        out[step] = {
            "compile_us": compile_us,
            "sass_tool": sass_words(tool),
            "bytes": {k: len(v) for k, v in texts.items()},
        }
    with tarfile.open(path, "w:gz", compresslevel=9) as tar:
        add_text(tar, "README.txt", readme(target, tools["tma"]))
        for name, text in files.items():
            add_text(tar, name, text)
    return out


# --8<-- [end:archive]


def write_trace(prof, path) -> None:
    """export_chrome_trace to a temporary file, then gzip it to path."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as src:
            trace = src.read()
    finally:
        os.unlink(tmp)
    json.loads(trace)  # the profiler wrote a complete JSON document
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(trace)


def profiled_tma(path) -> dict:
    """On a GPU: PROFILED_CALLS launches of the tma step (its first config) and of torch.mm at SIZE^3."""
    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    calls = {
        "triton tma step": lambda: matmul("tma", a, b, c, TMA_CONFIGS[0]),
        "torch.mm": lambda: torch.mm(a, b, out=c),
    }
    for fn in calls.values():  # compile and warm up outside the trace
        fn()
    torch.cuda.synchronize()
    host = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        for name, fn in calls.items():
            start = time.perf_counter()
            with record_function(name):
                for _ in range(PROFILED_CALLS):
                    fn()
                torch.cuda.synchronize()
            host.append((time.perf_counter() - start) * 1e6 / PROFILED_CALLS)
    write_trace(prof, path)
    return {"calls": PROFILED_CALLS, "profiled_call_us": summarize(host, "us", clock="host")}


def measure(small: bool = False) -> dict:  # small changes nothing: compiling costs the same anywhere
    cuda = torch.cuda.is_available()
    target = triton.runtime.driver.active.get_current_target() if cuda else GPUTarget("cuda", 90, 32)
    ir_path = artifact(KEY, "triton_ir.tar.gz")
    steps = write_ir(ir_path, target)
    artifacts = [
        {
            "name": ir_path.name,
            "what": "Triton IR",
            "opens_with": "a text editor",
            "shows": (
                "each matmul step's Triton IR, GPU IR with layouts, PTX and SASS as compiled for sm_90, "
                "one folder per step, with a README naming how the steps differ"
            ),
        }
    ]
    data = {
        "repetitions": 1,
        "device": "cuda" if cuda else "cpu",
        "target": f"{target.backend}:{target.arch}",
        "triton": triton.__version__,
        "size": SIZE,
        "steps": steps,
    }
    if cuda:
        trace_path = artifact(KEY, "trace.json.gz")
        data["profiled"] = profiled_tma(trace_path)
        artifacts.append(
            {
                "name": trace_path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": f"{PROFILED_CALLS} launches of the tma step at {SIZE}³ beside {PROFILED_CALLS} of torch.mm, "
                "each kernel on the GPU's row",
            }
        )
    else:
        data["notes"] = ["no GPU here: the IR was compiled on the host for sm_90; no profiler trace"]
    data["artifacts"] = artifacts
    return data


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"matmul steps compiled for {r['target']} with Triton {r['triton']} on {device_name()}")
    for step, s in r["steps"].items():
        print(f"  {step:<17} compile {s['compile_us']['median'] / 1e6:5.2f} s, SASS by {s['sass_tool']}")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
