"""torch.export on the transformer block of ladder.py: the ExportedProgram's graph (ATen operators,
whole graph, no Python left, parameters lifted to inputs), its operator count, the same program
after run_decompositions() (the core ATen operator set, what a backend outside PyTorch has to
implement), and the first lines of the program as str() prints it. Timed: export and the
decomposition, on the host."""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]
# isort: split
from ladder import Block, count_ops  # the block and the op count of ladder.py

from coursekit.bench import device_name, host_us

PROCESSES = 1  # op counts are deterministic; the export times are host timings quoted only as rough sizes
SHOWN_LINES = 12


# --8<-- [start:export]
def export_block(model, x) -> torch.export.ExportedProgram:
    return torch.export.export(model, (x,))


def head(ep: torch.export.ExportedProgram, lines: int) -> list[str]:
    """The program's first lines as str() prints it, source-location comments and blank lines left out."""
    kept = [ln for ln in str(ep).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return kept[:lines]


# --8<-- [end:export]


def targets(gm: torch.fx.GraphModule) -> dict:
    """How many times each operator is called, most called first."""
    counts = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            counts[str(n.target)] = counts.get(str(n.target), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    batch, seq, d, heads = (2, 16, 64, 4) if small else (4, 2048, 2048, 16)
    repeats, warmup = (1, 0) if small else (3, 1)
    torch.manual_seed(0)
    model = Block(d, heads).to(dev, dtype)
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype)

    found = {}
    export_us = host_us(lambda: found.update(ep=export_block(model, x)), calls=1, repeats=repeats, warmup=warmup)
    ep = found["ep"]
    decompose_us = host_us(lambda: found.update(core=ep.run_decompositions()), calls=1, repeats=repeats, warmup=warmup)
    core = found["core"]
    torch.testing.assert_close(ep.module()(x), model(x), atol=2e-2, rtol=2e-2)
    kinds = {}
    for spec in ep.graph_signature.input_specs:
        kinds[spec.kind.name.lower()] = kinds.get(spec.kind.name.lower(), 0) + 1
    return {
        "repetitions": repeats,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": {"batch": batch, "seq": seq, "d_model": d, "heads": heads},
        "exported": {**count_ops(ep.graph_module.graph), "targets": targets(ep.graph_module)},
        "core_aten": {**count_ops(core.graph_module.graph), "targets": targets(core.graph_module)},
        "inputs": kinds,
        "head": head(ep, SHOWN_LINES),
        "export_us": export_us,
        "run_decompositions_us": decompose_us,
        "notes": [
            "ops: call_function nodes; distinct: distinct operators (count_ops of ladder.py)",
            "core_aten: ep.run_decompositions() with its default table, core ATen",
            "inputs: the graph signature's inputs by kind (parameters lifted to graph inputs, then the user's x)",
            f"head: the first {SHOWN_LINES} lines of str(ep), '# File:' comments and blank lines left out",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    s = r["shape"]
    print(f"torch.export, batch {s['batch']} x seq {s['seq']} x d {s['d_model']}, {r['dtype']}, on {device_name()}")
    for name in ("exported", "core_aten"):
        print(f"  {name:<10} {r[name]['ops']:>4} ops, {r[name]['distinct']:>3} distinct")
    print(f"  inputs: {r['inputs']}")
    export_ms, decompose_ms = r["export_us"]["median"] / 1e3, r["run_decompositions_us"]["median"] / 1e3
    print(f"  export {export_ms:.0f} ms, run_decompositions {decompose_ms:.0f} ms")
    print("\n".join(line[:160] for line in r["head"]))
