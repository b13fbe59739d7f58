"""What Triton makes of a kernel, stage by stage: the TMA step of the matmul (matmul.py) compiled for
Hopper (the H200's sm_90) as a launch at M = N = K = 4096 in bfloat16 would compile it, with its
first config, through Triton's IR (TTIR), its GPU IR with layouts (TTGIR), LLVM IR, PTX and the
cubin; the tensor-core instructions counted in each (wgmma in PTX, HGMMA in the SASS that
cuobjdump prints from the cubin); the layouts TTGIR assigns. Two neighbours for contrast: the
tutorial step (pointer loads: cp.async, no TMA) and the warp-specialized step (partitions,
setmaxnreg). Counts are of instructions in the code, not of instructions executed.

Compiling needs no GPU: Triton's compiler and the ptxas and cuobjdump it ships run on the host, so
this snippet gives the same artifacts on a machine without one (for the same Triton). What it
times is the compile of the TMA step, the cache bypassed, in host time."""

# --8<-- [start:imports]
import os
import re

os.environ["TRITON_INTERPRET"] = "0"  # this snippet compiles kernels and never runs one: no interpreter, even on a CPU
import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

# --8<-- [end:imports]
# isort: split
from matmul import CONFIGS, TMA_CONFIGS, WS_CONFIGS, matmul_kernel, matmul_kernel_descriptors  # noqa: E402

from coursekit.bench import device_name, host_us  # noqa: E402

PROCESSES = 1  # one process: a compile is timed with the cache bypassed, so a fresh process adds nothing

SIZE = 4096  # M = N = K of the launch whose compile this reproduces
STAGES = ["ttir", "ttgir", "llir", "ptx", "cubin"]


# --8<-- [start:compile]
def compile_matmul(kernel, config: triton.Config, target: GPUTarget, **constants):
    """Compile kernel(a_ptr, b_ptr, c_ptr, M, N, K, ...) for target as its first launch on bfloat16
    tensors of SIZE x SIZE would: the same call triton.jit makes then, with the same specialization
    (pointers 16-byte aligned and sizes divisible by 16, so the compiler may assume both)."""
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32"}
    constexprs = {**config.kwargs, **constants}
    signature.update({name: "constexpr" for name in constexprs})
    if "stride_am" in kernel.arg_names:  # the pointer kernel: row strides of SIZE, unit column strides
        signature.update({f"stride_{s}": "i32" for s in ("am", "bk", "cm")})
        constexprs.update({f"stride_{s}": 1 for s in ("ak", "bn", "cn")})  # the JIT specializes 1 to a constant
        signature.update({f"stride_{s}": "constexpr" for s in ("ak", "bn", "cn")})
    divisible = [i for i, name in enumerate(kernel.arg_names) if signature.get(name) in ("*bf16", "i32")]
    source = ASTSource(
        fn=kernel,
        signature={name: signature[name] for name in kernel.arg_names},
        constexprs=constexprs,
        attrs={(i,): [["tt.divisibility", 16]] for i in divisible},
    )
    return triton.compile(
        source, target=target, options={"num_warps": config.num_warps, "num_stages": config.num_stages}
    )


# --8<-- [end:compile]


def first(pattern: str, text: str) -> str:
    """The first match of pattern in text, without Triton's location suffixes; "" if none."""
    m = re.search(pattern, text, re.M)
    return re.sub(r"\s+loc\(#?[\w\"]*\)", "", m.group(0)).strip() if m else ""


def sass_of(cubin: bytes) -> tuple[str, str]:
    """The SASS of a cubin through the cuobjdump that Triton ships (or one on the PATH), and the
    tool's path; ("", why) where none runs."""
    try:
        from triton.tools.disasm import get_sass, path_to_cuobjdump

        return get_sass(cubin), str(path_to_cuobjdump())
    except Exception as exc:  # no cuobjdump here: the counts from SASS are left out, and the note says why
        return "", f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def facts(compiled) -> dict:
    """Counts that say where the work went, in each stage's own words."""
    asm = compiled.asm
    ttir, ttgir, ptx = asm["ttir"], asm["ttgir"], asm["ptx"]
    sass, tool = sass_of(asm["cubin"])
    count = lambda pattern, text: len(re.findall(pattern, text))
    return {
        "shared_bytes": int(compiled.metadata.shared),
        "num_warps": int(compiled.metadata.num_warps),
        "ttir": {"dot": count(r"\btt\.dot\b", ttir), "descriptor_loads": count(r"tt\.descriptor_load\b", ttir)},
        "ttgir": {
            "warp_group_dot": count(r"ttng\.warp_group_dot\b", ttgir),  # the wgmma op, before PTX
            "tma_loads": count(r"ttng\.async_tma_copy_global_to_local\b", ttgir),
            "cp_async_loads": count(r"ttg\.async_copy_global_to_local\b", ttgir),
            "warp_specialize": count(r"ttg\.warp_specialize\b", ttgir),
        },
        "ptx": {
            "wgmma": count(r"wgmma\.mma_async", ptx),
            "tma_loads": count(r"cp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global", ptx),
            "tma_stores": count(r"cp\.async\.bulk\.tensor\.\w+\.global\.shared", ptx),
            "cp_async": count(r"cp\.async\.cg\.shared\.global", ptx),
            "setmaxnreg": count(r"setmaxnreg", ptx),
            "mma_sync": count(r"\bmma\.sync", ptx),
        },
        "sass": {
            "tool": tool,
            "HGMMA": count(r"\bHGMMA\b", sass),
            "UTMALDG": count(r"\bUTMALDG\b", sass),
            "UTMASTG": count(r"\bUTMASTG\b", sass),
            "LDGSTS": count(r"\bLDGSTS\b", sass),
            "USETMAXREG": count(r"\bUSETMAXREG\b", sass),
        },
        "excerpts": {
            "ttir_dot": first(r"^.*\btt\.dot\b.*$", ttir),
            "ttgir_dot": first(r"^.*\bttng\.warp_group_dot\b.*$", ttgir),
            "ptx_wgmma": first(r"wgmma\.mma_async\S*", ptx),
            "ptx_tma_load": first(r"cp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global\S*", ptx),
            "sass_hgmma": first(r"HGMMA\.\S+", sass),
        },
    }


def measure(small: bool = False) -> dict:  # small: one timed compile instead of three; the same artifacts
    cuda = torch.cuda.is_available()
    target = triton.runtime.driver.active.get_current_target() if cuda else GPUTarget("cuda", 90, 32)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 132  # the H200's
    config = TMA_CONFIGS[0]  # 128 x 256 x 64 tiles, 3 stages, 8 warps, the output tile stored whole
    tma = lambda: compile_matmul(matmul_kernel_descriptors, config, target, NUM_SMS=num_sms, WARP_SPECIALIZE=False)
    with triton.knobs.compilation.scope():
        triton.knobs.compilation.always_compile = True  # bypass the on-disk cache: time a real compile
        compile_us = host_us(tma, calls=1, repeats=1 if small else 3, warmup=0)
    compiled = tma()
    layouts = [
        re.sub(r"\s+", " ", line) for line in compiled.asm["ttgir"].splitlines() if re.match(r"#\w+ = #tt", line)
    ]
    stages = []
    for name in STAGES:
        text = compiled.asm[name]
        stages.append({"stage": name, "bytes": len(text), "lines": text.count("\n") if isinstance(text, str) else None})
    tutorial = compile_matmul(matmul_kernel.fn, CONFIGS[0], target)  # the same tiles
    ws = compile_matmul(matmul_kernel_descriptors, WS_CONFIGS[0], target, NUM_SMS=num_sms, WARP_SPECIALIZE=True)
    tma_facts = facts(compiled)
    notes = []
    if not cuda:
        notes.append(f"no GPU here: compiled for {target.backend}:{target.arch} (the H200's), on the host")
    if tma_facts["sass"]["tool"].startswith("unavailable"):
        notes.append(f"no SASS: cuobjdump {tma_facts['sass']['tool']}")
    return {
        "repetitions": compile_us["n"],
        "target": f"{target.backend}:{target.arch}",
        "triton": triton.__version__,
        "size": SIZE,
        "kernel": "matmul_kernel_descriptors (matmul.py, step tma)",
        "config": {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages},
        "asm_keys": list(compiled.asm.keys()),
        "stages": stages,
        "compile_us": compile_us,
        "ttgir_layouts": layouts,
        "tma": tma_facts,
        "tutorial": facts(tutorial),
        "warp_specialized": {
            **facts(ws),
            "config": {**WS_CONFIGS[0].kwargs, "num_warps": WS_CONFIGS[0].num_warps},
        },
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"{r['kernel']} for {r['target']} on {device_name()}, Triton {r['triton']}, config {r['config']}")
    print(f"  compile (cache bypassed): {r['compile_us']['median'] / 1e6:.2f} s; asm keys: {', '.join(r['asm_keys'])}")
    for s in r["stages"]:
        lines = f"{s['lines']:6d} lines" if s["lines"] is not None else "  (binary)  "
        print(f"  {s['stage']:<6} {lines} {s['bytes']:9d} bytes")
    print("  TTGIR layouts:")
    for layout in r["ttgir_layouts"]:
        print(f"    {layout}")
    print(f"  {'':<18} {'wgmma (PTX)':>12} {'HGMMA (SASS)':>13} {'TMA loads':>10} {'cp.async':>9} {'setmaxnreg':>11}")
    for name in ("tutorial", "tma", "warp_specialized"):
        f = r[name]
        print(
            f"  {name:<18} {f['ptx']['wgmma']:12d} {f['sass']['HGMMA']:13d} {f['ptx']['tma_loads']:10d}"
            f" {f['ptx']['cp_async']:9d} {f['ptx']['setmaxnreg']:11d}"
        )
    for key, line in r["tma"]["excerpts"].items():
        print(f"  {key:<13} {line[:100]}")
    for note in r["notes"]:
        print(f"  note: {note}")
