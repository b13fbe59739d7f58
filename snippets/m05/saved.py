"""What the forward keeps for the backward: the tensors AOTAutograd's forward graph returns besides
the model's output, under the default partitioner (which keeps what the forward already computed
and the backward reads, as eager autograd does) and under the min-cut partitioner Inductor uses
(which recomputes cheap ops in the backward where that keeps fewer bytes), against every tensor
the forward computes and what eager autograd saves. Two models: the transformer block of
ladder.py and a norm + activation + residual block, x + gelu(layer_norm(x)) (module 06's), each
traced with Inductor's decompositions, as Inductor partitions them, and the norm block also without
(ATen's layer_norm and gelu whole, which the partitioner will not recompute).

Bytes are read from each saved node's metadata (meta["val"]): a view counts as the tensor it views
(its storage stays alive), and the parameters and the input, kept alive by the caller anyway, are
counted apart from activations. Timed: the trace, partition included, under each partitioner."""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F
from torch import nn
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition
from torch._inductor.decomposition import select_decomp_table

# --8<-- [end:imports]
# isort: split
from ladder import Block, capture  # the block and the graph capture of ladder.py

from coursekit.bench import device_name, host_us

PROCESSES = 1  # bytes are deterministic; the trace times are host timings quoted only as rough sizes


# --8<-- [start:saved]
class NormBlock(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + F.gelu(self.norm(x))


def base(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose tensor a view node views (itself if it is no view): what stays in memory."""
    while getattr(node.target, "is_view", False):
        node = node.args[0]
    return node


def nbytes(node: torch.fx.Node) -> int:
    val = node.meta.get("val")
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0


def saved_for_backward(graphs: dict) -> dict:
    """The forward graph's outputs after the block's own: the tensors kept for the backward,
    deduplicated by the tensor they view, split into inputs (parameters, x) and activations."""
    output = next(n for n in graphs["forward"].nodes if n.op == "output")
    saved = [n for n in output.args[0][graphs["num_fwd_outputs"] :] if isinstance(n, torch.fx.Node)]
    bases = {base(n) for n in saved if nbytes(n)}
    activations = [b for b in bases if b.op != "placeholder"]
    return {
        "tensors": len(saved),
        "activation_bytes": sum(nbytes(b) for b in activations),
        "input_bytes": sum(nbytes(b) for b in bases if b.op == "placeholder"),
        "activations": sorted(
            ([b.name, str(b.target), list(b.meta["val"].shape), nbytes(b)] for b in activations),
            key=lambda r: (-r[3], r[0]),  # largest first
        ),
    }


def computed_bytes(graph: torch.fx.Graph) -> int:
    """Every tensor a forward graph computes, views left out: what saving everything would keep."""
    return sum(nbytes(n) for n in graph.nodes if n.op == "call_function" and base(n) is n)


# --8<-- [end:saved]


# --8<-- [start:eager]
def eager_saved_bytes(model, x) -> int:
    """Bytes of activations eager autograd keeps for the backward: every tensor it packs, one per
    storage, the parameters' and x's storages left out."""
    kept = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in kept:
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(storages.values())


# --8<-- [end:eager]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    batch, seq, d, heads = (2, 16, 64, 4) if small else (4, 2048, 2048, 16)
    repeats, warmup = (1, 0) if small else (3, 1)
    torch.manual_seed(0)
    models = {"block": Block(d, heads).to(dev, dtype), "norm_block": NormBlock(d).to(dev, dtype)}
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype, requires_grad=True)
    cases = [  # (model, decompositions), each under both partitioners
        ("block", "inductor"),
        ("norm_block", "inductor"),
        ("norm_block", "aten"),
    ]
    tables = {"inductor": select_decomp_table(), "aten": None}
    partitioners = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}
    results = []
    for model_name, decomp in cases:
        for name, partitioner in partitioners.items():
            graphs = {}
            trace = lambda m=models[model_name], t=tables[decomp], p=partitioner: graphs.update(capture(m, x, t, p))
            time_us = host_us(trace, calls=1, repeats=repeats, warmup=warmup)
            found = saved_for_backward(graphs)
            results.append(
                {"model": model_name, "decompositions": decomp, "partitioner": name, **found, "trace_us": time_us}
            )
            results[-1]["all_forward_bytes"] = computed_bytes(graphs["forward"])
    torch._dynamo.reset()
    return {
        "repetitions": repeats,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": {"batch": batch, "seq": seq, "d_model": d, "heads": heads},
        "input_bytes": x.numel() * x.element_size(),
        "cases": results,
        "eager_autograd_bytes": {name: eager_saved_bytes(m, x) for name, m in models.items()},
        "notes": [
            "decompositions: inductor = traced with Inductor's select_decomp_table(), as Inductor partitions; "
            "aten = none (layer_norm and gelu stay single ATen ops)",
            "activation_bytes: saved tensors that the forward computes, one per storage (a saved view counts as "
            "its base); input_bytes: saved parameters and x; activations: [node, op, shape, bytes], largest first",
            "all_forward_bytes: every non-view tensor of that partitioner's forward graph, the output included",
            "eager_autograd_bytes: what eager autograd packs for the backward (saved_tensors_hooks), one per "
            "storage, parameters and x left out",
            "trace_us: Dynamo + AOTAutograd + the partitioner, on the host",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    s = r["shape"]
    print(f"batch {s['batch']} x seq {s['seq']} x d {s['d_model']}, {r['dtype']}, on {device_name()}")
    mib = 2**20
    for name, b in r["eager_autograd_bytes"].items():
        print(f"  {name:<10} eager autograd saves {b / mib:8.3f} MiB of activations")
    print(f"  {'model':<11}{'decomp.':<9}{'partition':<10}{'saved':>6}{'activations MiB':>17}{'forward MiB':>13}")
    for c in r["cases"]:
        saved_mib, forward_mib = c["activation_bytes"] / mib, c["all_forward_bytes"] / mib
        print(
            f"  {c['model']:<11}{c['decompositions']:<9}{c['partitioner']:<10}{c['tensors']:>6}"
            f"{saved_mib:>17.3f}{forward_mib:>13.3f}"
        )
        kept = [
            f"{op.removeprefix('aten.').replace('<built-in function getitem>', 'getitem')}"
            for _, op, _, _ in c["activations"]
        ]
        print(f"{'':13}keeps: {', '.join(kept)}")
