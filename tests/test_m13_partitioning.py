"""Module 13 on the CPU: the kernel classifier, regional compilation's one graph, the cache layers'
copies, the static KV cache against a full forward, and the profile's shape without kernels."""

import torch
from conftest import load_snippet
from torch._dynamo.utils import counters

model_mod = load_snippet("m13/_model")
train_step = load_snippet("m13/train_step")
regional = load_snippet("m13/regional")
caches = load_snippet("m13/caches")


def test_classifier_sorts_known_kernel_names():
    known = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1": "gemm",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT": "gemm",
        "triton_tem_fused_mm_0": "gemm",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Params)": "attention",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80": "attention",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>": "optimizer",
        "triton_for_fused_0": "optimizer",
        "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>": "memory_bound",
        "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0": "memory_bound",
        "triton_red_fused__log_softmax_1": "memory_bound",
        "Memcpy HtoD (Pageable -> Device)": "memory_bound",
        "void cub::DeviceRadixSortOnesweepKernel<...>": "other",
    }
    assert {name: train_step.classify(name) for name in known} == known


def test_profile_summary_keeps_unmatched_names():
    fake = {
        "busy_us": 80.0,
        "span_us": 100.0,
        "kernels_per_step": 3,
        "class_us": {c: 0.0 for c in [*train_step.CLASSES, "other"]},
        "by_name": {"nvjet_tst_x": (50.0, 1.0), "mystery_kernel": (20.0, 1.0), "triton_poi_fused_add_0": (10.0, 1.0)},
    }
    s = train_step.summarize_profiles([fake, fake])
    assert abs(s["idle_share"]["median"] - 0.2) < 1e-9
    assert [k["name"] for k in s["top_kernels"]] == ["nvjet_tst_x", "mystery_kernel", "triton_poi_fused_add_0"]
    assert [k["name"] for k in s["unmatched"]] == ["mystery_kernel"]


def test_profile_steps_on_the_cpu_counts_no_kernels_but_runs_every_step():
    calls = []
    p = train_step.profile_steps(lambda: calls.append(torch.ones(4).sum()), steps=3)
    assert len(calls) == 3
    assert p["busy_us"] == 0 and p["span_us"] == 0 and p["kernels_per_step"] == 0


def test_static_cache_decode_gives_the_full_forwards_tokens():
    model = model_mod.build(model_mod.CPU, "cpu", torch.float32).eval()
    model.setup_cache(2)
    idx = torch.randint(model_mod.CPU.vocab, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(idx)
        steps = torch.cat([model(idx[:, i : i + 1], torch.tensor([i])) for i in range(idx.shape[1])], dim=1)
    assert torch.equal(full.argmax(-1), steps.argmax(-1))
    assert (full - steps).abs().max() < 1e-4


def _unique_graphs(strategy, layers=3):
    torch._dynamo.reset()
    model = model_mod.build(model_mod.CPU, "cpu", torch.float32, layers=layers).eval()
    x = torch.randint(model_mod.CPU.vocab, (1, 8))
    with torch.no_grad():
        reference = model(x)
        fn = regional.compiled(model, strategy, backend="eager")
        counters.clear()
        out = fn(x)
        graphs = counters["stats"]["unique_graphs"]
        again = fn(x)
    torch._dynamo.reset()
    return graphs, reference, out, again


def test_regional_compiles_the_block_once_and_matches_eager():
    graphs, reference, out, again = _unique_graphs("regional")
    assert graphs == 1  # three blocks, one graph: the second and third reuse the first's code
    assert torch.allclose(out, reference, atol=1e-6) and torch.equal(out, again)


def test_whole_and_nested_match_eager():
    for strategy in ("whole", "nested"):
        graphs, reference, out, _ = _unique_graphs(strategy)
        assert graphs >= 1
        assert torch.allclose(out, reference, atol=1e-6), strategy


def test_cache_layers_copy_only_their_parts(tmp_path):
    cold = tmp_path / "cold"
    for rel, text in {
        "triton/0/abc/kernel.cubin": "k",
        "cache/0123": "{}",
        "fxgraph/xy/entry": "g",
        "aotautograd/zz/entry": "a",
        "ab/cabc.py": "code",
        "ab/cabc.best_config": "{}",
    }.items():
        (cold / rel).parent.mkdir(parents=True, exist_ok=True)
        (cold / rel).write_text(text)
    layout = caches.listing(cold)
    assert set(layout) == {"triton", "cache", "fxgraph", "aotautograd", "<2-char code dirs>"}
    assert layout["<2-char code dirs>"] == {"files": 2, "bytes": 6, "best_config_files": 1}
    expected = {
        "triton": {"triton"},
        "triton+autotune": {"triton", "cache", "<2-char code dirs>"},
        "all": set(layout),
    }
    for case, keys in expected.items():
        caches.warm_copy(cold, tmp_path / case.replace("+", "-"), case)
        assert set(caches.listing(tmp_path / case.replace("+", "-"))) == keys, case
    tuned = caches.listing(tmp_path / "triton-autotune")["<2-char code dirs>"]
    assert tuned["best_config_files"] == tuned["files"] == 1  # the launch configs, not the generated code


perlayer_model = load_snippet("m13/_perlayer")
perlayer = load_snippet("m13/perlayer")


def test_cache_per_layer_decodes_as_the_stacked_cache_and_the_full_forward():
    model, stacked = perlayer_model.build_perlayer(model_mod.CPU, "cpu", torch.float32)
    model.setup_cache(2)
    stacked.setup_cache(2)
    assert model.head.weight.data_ptr() == stacked.head.weight.data_ptr()  # one set of weights
    assert {b.k.shape for b in model.blocks} == {(2, model_mod.CPU.heads, model_mod.CPU.max_len, 8)}
    idx = torch.randint(model_mod.CPU.vocab, (2, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = model(idx)
        steps = torch.cat([model(idx[:, i : i + 1], torch.tensor([i])) for i in range(10)], dim=1)
        old = torch.cat([stacked(idx[:, i : i + 1], torch.tensor([i])) for i in range(10)], dim=1)
    assert torch.equal(steps, old)  # same ops in the same order: bit for bit
    assert (full - steps).abs().max() < 1e-4
    assert perlayer_model.cache_bytes(model) == stacked.kv.numel() * stacked.kv.element_size()


def test_cache_per_layer_leaves_functionalisation_nothing_to_scatter():
    model, stacked = perlayer_model.build_perlayer(model_mod.CPU, "cpu", torch.float32)
    model.setup_cache(1)
    stacked.setup_cache(1)
    token, pos = torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    layer = model.blocks[0].k.numel()
    with torch.no_grad():
        per_layer = perlayer.functionalized_ops(model, token, pos, layer)
        old = perlayer.functionalized_ops(stacked, token, pos, layer)
    layers = model_mod.CPU.layers
    assert per_layer["select_scatter"] == 0 and per_layer["larger_than_a_layer"] == 0
    assert per_layer["cache_sized_outputs"] == {"index_copy.default": 2 * layers}
    assert old["select_scatter"] == 4 * layers and old["larger_than_a_layer"] == 4 * layers


WRAPPER = """
triton_poi_fused_index_copy_0 = async_compile.triton('triton_poi_fused_index_copy_0', '''
@triton.jit
def triton_poi_fused_index_copy_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 64
    xoffset = tl.program_id(0) * XBLOCK
''', device_str='cuda')

triton_poi_fused_1 = async_compile.triton('triton_poi_fused_1', '''
@triton.jit
def triton_poi_fused_1(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK : tl.constexpr, XBLOCK : tl.constexpr):
    ynumel = 32
    xnumel = 256
    yoffset = tl.program_id(1) * YBLOCK
''', device_str='cuda')

def call(args):
    arg0_1, arg1_1 = args
    with torch.cuda._DeviceGuard(0):
        buf0 = empty_strided_cuda((1, 4, 1, 16), (64, 16, 16, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [index_copy_], Original ATen: [aten.index_copy]
        triton_poi_fused_index_copy_0.run(arg0_1, arg1_1, buf0, 64, stream=stream0)
        buf1 = empty_strided_cuda((2, 4, 32, 16), (2048, 512, 16, 1), torch.bfloat16)
        # Topologically Sorted Source Nodes: [], Original ATen: [aten.select_scatter]
        triton_poi_fused_1.run(buf0, buf1, 32, 256, stream=stream0)
        triton_poi_fused_index_copy_0.run(arg0_1, arg1_1, buf0, 64, stream=stream0)
    return (buf1, )
"""


def test_code_scan_finds_cache_sized_buffers_and_launches():
    scan = perlayer.scan_code([WRAPPER], layer_cache_numel=4 * 32 * 16)  # one layer's k: (1, 4, 32, 16)
    assert scan["allocations"] == 2 and scan["cache_sized_allocations"] == 1
    assert scan["cache_sized_shapes"] == ["(2, 4, 32, 16)"]
    assert scan["triton_kernels"] == 2 and scan["triton_launches"] == 3
    assert scan["cache_sized_launches"] == 1 and scan["cache_sized_kernels"] == ["triton_poi_fused_1"]
    assert scan["select_scatter_mentions"] == 1
    clean = perlayer.scan_code([WRAPPER.split("        buf1")[0]], layer_cache_numel=4 * 32 * 16)
    assert clean["cache_sized_allocations"] == 0 and clean["cache_sized_launches"] == 0
