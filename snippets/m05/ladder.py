"""One pre-norm transformer block (LayerNorm, causal self-attention through
F.scaled_dot_product_attention, a GELU MLP) down the ladder of torch.compile's IRs, with the
number of operations at each rung: the graph Dynamo captures (torch functions), the joint
forward-and-backward graph AOTAutograd traces (ATen operators), the forward and backward graphs
the min-cut partitioner cuts it into, and the same joint graph decomposed to core ATen. The
rung below, Inductor's, is kernels.py's. Op counts are deterministic for a given torch, device
and dtype; what is timed is how long each tracing stage takes on the host."""

# --8<-- [start:imports]
import torch
import torch.nn.functional as F
from torch import nn
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch._functorch.partitioners import min_cut_rematerialization_partition

# --8<-- [end:imports]
from coursekit.bench import device_name, host_us

PROCESSES = 1  # op counts are deterministic; the trace times are host timings quoted only as rough sizes


# --8<-- [start:model]
class Block(nn.Module):
    """Pre-norm transformer block: x + attention(norm(x)), then + MLP(norm(.))."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (b, heads, t, d // heads)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


# --8<-- [end:model]


# --8<-- [start:count]
def count_ops(graph: torch.fx.Graph) -> dict:
    """Operations in an FX graph: every call (placeholders and the output node left out), and
    how many distinct targets they call."""
    calls = [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    return {"ops": len(calls), "distinct": len({str(n.target) for n in calls})}


# --8<-- [end:count]


# --8<-- [start:capture]
def capture(model, x, decompositions=None, partitioner=min_cut_rematerialization_partition) -> dict:
    """Compile model with a backend that keeps, instead of compiling, the graph Dynamo captured,
    the joint graph AOTAutograd traced and the forward and backward graphs the partitioner cut it
    into (min-cut, as Inductor does, unless told otherwise). One forward call traces all of them."""
    graphs = {}

    def partition(joint, joint_inputs, **kwargs):
        graphs["joint"], graphs["num_fwd_outputs"] = joint.graph, kwargs["num_fwd_outputs"]
        fw, bw = partitioner(joint, joint_inputs, **kwargs)
        graphs["forward"], graphs["backward"] = fw.graph, bw.graph
        return fw, bw

    def keep(gm, example_inputs):  # a "compiler" that runs the graph as it is
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        graphs["dynamo"] = gm.graph
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=keep, partition_fn=partition, decompositions=decompositions
        )

    torch._dynamo.reset()
    torch.compile(model, backend=backend, fullgraph=True)(x)
    return graphs


# --8<-- [end:capture]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    batch, seq, d, heads = (2, 16, 64, 4) if small else (4, 2048, 2048, 16)
    repeats, warmup = (1, 0) if small else (3, 1)
    torch.manual_seed(0)
    model = Block(d, heads).to(dev, dtype)
    x = torch.randn(batch, seq, d, device=dev, dtype=dtype, requires_grad=True)

    # Each stage traced repeats times, timed on the host; the graphs kept are the last trace's.
    def dynamo_only():
        torch._dynamo.reset()
        return torch.compile(model, backend=lambda gm, _: gm.forward, fullgraph=True)(x)

    graphs = {}
    trace_us = {
        "dynamo": host_us(dynamo_only, calls=1, repeats=repeats, warmup=warmup),
        "dynamo_aot": host_us(lambda: graphs.update(capture(model, x)), calls=1, repeats=repeats, warmup=warmup),
    }
    levels = {name: count_ops(graphs[name]) for name in ("dynamo", "joint", "forward", "backward")}
    ops_by_target = {}
    for n in graphs["joint"].nodes:
        if n.op == "call_function":
            ops_by_target[str(n.target)] = ops_by_target.get(str(n.target), 0) + 1
    core = {}
    trace_us["dynamo_aot_core_aten"] = host_us(
        lambda: core.update(capture(model, x, core_aten_decompositions())), calls=1, repeats=repeats, warmup=warmup
    )
    levels["joint_core_aten"] = count_ops(core["joint"])

    torch._dynamo.reset()
    return {
        "repetitions": repeats,
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": {"batch": batch, "seq": seq, "d_model": d, "heads": heads},
        "levels": levels,
        "dynamo_targets": [str(n.target) for n in graphs["dynamo"].nodes if n.op == "call_function"],
        "joint_ops_by_target": dict(sorted(ops_by_target.items(), key=lambda kv: -kv[1])),
        "trace_us": trace_us,
        "notes": [
            "ops: call_function/call_method/call_module nodes of the FX graph; distinct: distinct targets; "
            "dynamo_targets: what Dynamo's graph calls, in order; joint_ops_by_target: the joint graph's calls",
            "joint/forward/backward: AOTAutograd's graphs, partitioned by min_cut_rematerialization_partition; "
            "joint_core_aten: the joint graph traced with core_aten_decompositions()",
            "the attention operator differs by device: a fused CPU flash attention on a CPU, a CUDA one on a GPU",
            "trace_us: the host time of each stage, first trace included on a CPU (one sample: one-time set-up in it)",
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    s = r["shape"]
    print(
        f"transformer block, batch {s['batch']} x seq {s['seq']} x d {s['d_model']}, {r['dtype']}, on {device_name()}"
    )
    print(f"{'level':<24}{'ops':>6}{'distinct':>10}")
    for name, c in r["levels"].items():
        print(f"{name:<24}{c['ops']:>6}{c['distinct']:>10}")
    for name, t in r["trace_us"].items():
        print(f"trace time {name:<22}{t['median'] / 1e3:8.1f} ms")
