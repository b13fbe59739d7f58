"""Figures and computed values for module 05: one transformer block down torch.compile's IRs.

``results(key)`` returns a stored result's data: "m05/ladder" (op counts of Dynamo's graph and of
AOTAutograd's joint, forward and backward graphs), "m05/kernels" (Inductor's IR nodes, kernels and
library calls), "m05/saved" (bytes kept for the backward under each partitioner), "m05/export"
(torch.export's program before and after run_decompositions) and "m05/functionalize". Everything
here is a count or a byte size, deterministic for a given torch, device and dtype; no timing is
drawn.
"""

import plotly.graph_objects as go

from coursekit.plotting import BLUE, ORANGE, legend, margin

# Operators that only re-describe memory they are given (views, aliases) or unpack a tuple
# (getitem): they move no data. Everything else computes or copies.
VIEW_OPS = {
    "t",
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "transpose",
    "select",
    "slice",
    "squeeze",
    "unsqueeze",
    "expand",
    "unbind",
    "detach",
    "alias",
    "as_strided",
}
UNPACK = "<built-in function getitem>"
COLORS = {"compute": BLUE, "views": "#9bb7e0", "unpack": "#cccccc", "kernels": ORANGE, "library": "#7a4a1a"}


def _op_name(target: str) -> str:
    """'aten.mm.default' -> 'mm'; '<built-in function linear>' -> 'linear'; '<function f at 0x..>' -> 'f'."""
    if target.startswith("aten.") or target.startswith("prims."):
        return target.split(".")[1]
    if not target.startswith("<"):
        return target
    words = target.strip("<>").split()
    return words[2] if len(words) > 2 and words[0] == "built-in" else (words[1] if len(words) > 1 else target)


def _composition(counts: dict) -> dict:
    """Split {target: calls} into operators that compute, views and tuple unpacking."""
    out = {"compute": 0, "views": 0, "unpack": 0}
    for target, n in counts.items():
        if target == UNPACK:
            out["unpack"] += n
        elif _op_name(target) in VIEW_OPS:
            out["views"] += n
        else:
            out["compute"] += n
    return out


def _dynamo_counts(ladder: dict) -> dict:
    """Dynamo's graph by target. Its call_function targets are stored; the call_method nodes
    (ops minus those) are the block's .view, .permute, .transpose and .reshape: views."""
    counts = {}
    for t in ladder["dynamo_targets"]:
        counts[t] = counts.get(t, 0) + 1
    methods = ladder["levels"]["dynamo"]["ops"] - len(ladder["dynamo_targets"])
    if methods:
        counts["view"] = methods  # counted as views by _composition
    return counts


def _calls_text(part: str, graph: dict) -> str:
    lines = [f"{part}: {len(graph['kernels'])} generated kernels, {len(graph['library_calls'])} library calls"]
    lines += [f"  kernel   {k}" for k in graph["kernels"]]
    seen = {}
    for call in graph["library_calls"]:
        seen[call] = seen.get(call, 0) + 1
    lines += [f"  library  {call}  (x{n})" if n > 1 else f"  library  {call}" for call, n in seen.items()]
    return "\n".join(lines)


def _numel(shape: list) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _case(saved: dict, model: str, decompositions: str, partitioner: str) -> dict:
    (found,) = [
        c
        for c in saved["cases"]
        if c["model"] == model and c["decompositions"] == decompositions and c["partitioner"] == partitioner
    ]
    return found


def derived(results) -> dict:
    """Counts and ratios the chapter quotes that are not stored as such: the make-up of each graph
    (compute, views, unpacking), the nodes the partitioner duplicates, Inductor's totals, the
    stored texts joined for display, and byte ratios of the partitioners' choices."""
    ladder, kernels = results("m05/ladder"), results("m05/kernels")
    export, saved, fn = results("m05/export"), results("m05/saved"), results("m05/functionalize")
    levels = ladder["levels"]
    joint = ladder["joint_ops_by_target"]
    by_name = {}
    for target, n in joint.items():
        by_name[_op_name(target)] = by_name.get(_op_name(target), 0) + n

    block_kept = _case(saved, "block", "inductor", "min_cut")["activation_bytes"]
    wide = saved["shape"]["batch"] * saved["shape"]["seq"] * 4 * saved["shape"]["d_model"]  # a tokens x 4d tensor
    block_all = _case(saved, "block", "inductor", "min_cut")["all_forward_bytes"]
    norm_min = _case(saved, "norm_block", "inductor", "min_cut")
    norm_default = _case(saved, "norm_block", "inductor", "default")
    block_default_names = {a[0] for a in _case(saved, "block", "inductor", "default")["activations"]}
    block_min_names = {a[0] for a in _case(saved, "block", "inductor", "min_cut")["activations"]}
    return {
        "dynamo": {
            "call_function": len(ladder["dynamo_targets"]),
            "call_method": levels["dynamo"]["ops"] - len(ladder["dynamo_targets"]),
            **_composition(_dynamo_counts(ladder)),
        },
        "joint": {**_composition(joint), "mm": by_name.get("mm", 0), "t": by_name.get("t", 0)},
        "export": {
            "exported": _composition(export["exported"]["targets"]),
            "core": _composition(export["core_aten"]["targets"]),
        },
        "duplicated_by_partition": levels["forward"]["ops"] + levels["backward"]["ops"] - levels["joint"]["ops"],
        "joint_core_growth": levels["joint_core_aten"]["ops"] - levels["joint"]["ops"],
        "inductor": {
            "kernels": sum(kernels["kernel_count"].values()),
            "library_calls": sum(kernels["library_call_count"].values()),
        },
        "kernel_table": "\n\n".join(_calls_text(part, kernels["graphs"][part]) for part in ("forward", "backward")),
        "export_head": "\n".join(export["head"]),
        "inputs": sum(export["inputs"].values()),
        "functionalize": {
            name: {"ops": len(fn[name]["operators"]), "mutating": len(fn[name]["mutating"])}
            for name in ("before", "after")
        },
        "saved": {
            "block_all_over_kept": block_all / block_kept,
            "norm_default_over_min_cut": norm_default["activation_bytes"] / norm_min["activation_bytes"],
            "norm_min_cut_per_row": norm_min["activation_bytes"] / (saved["shape"]["batch"] * saved["shape"]["seq"]),
            "block_swapped": len(block_default_names ^ block_min_names) // 2,
            "block_mlp_bytes": sum(
                a[3] for a in _case(saved, "block", "inductor", "min_cut")["activations"] if _numel(a[2]) == wide
            ),
        },
    }


def triton(results) -> dict:
    """Module 07's compile of one Triton matmul for the H200 (m07/artifacts), as text: each stage
    with its size, and the one matrix-multiply operation as each stage writes it."""
    art = results("m07/artifacts")
    sizes = [
        f"{s['stage']:<6} {s['lines'] if s['lines'] is not None else '(binary)':>9} "
        f"{'lines' if s['lines'] is not None else '':<6}{s['bytes']:>9,} bytes"
        for s in art["stages"]
    ]
    ex = art["tma"]["excerpts"]
    dot = [
        f"ttir   {ex['ttir_dot']}",
        f"ttgir  {ex['ttgir_dot']}",
        f"ptx    {ex['ptx_wgmma']}",
        f"sass   {ex['sass_hgmma']}",
    ]
    return {
        "stage_sizes": "\n".join(sizes),
        "dot_by_stage": "\n".join(dot),
        "layouts": "\n".join(art["ttgir_layouts"]),
    }


def op_counts(results) -> go.Figure:
    """Operations at each rung for the one block: the graphs above Inductor in blue, Inductor's
    output (generated kernels and library calls) in orange and brown."""
    ladder, kernels, export = results("m05/ladder"), results("m05/kernels"), results("m05/export")
    levels = ladder["levels"]
    graph_rows = [  # (label, count), torch.compile's rungs top to bottom, then torch.export's
        ("Dynamo FX graph", levels["dynamo"]["ops"]),
        ("AOTAutograd joint (fw + bw)", levels["joint"]["ops"]),
        ("joint, core ATen table (fw + bw)", levels["joint_core_aten"]["ops"]),
        ("AOTAutograd forward", levels["forward"]["ops"]),
        ("AOTAutograd backward", levels["backward"]["ops"]),
        ("Inductor IR nodes (fw + bw)", kernels["ir_nodes_before_fusion"]),
        ("torch.export", export["exported"]["ops"]),
        ("torch.export, core ATen", export["core_aten"]["ops"]),
    ]
    inductor_rows = [
        ("Inductor code, forward", "forward"),
        ("Inductor code, backward", "backward"),
    ]
    order = [label for label, _ in graph_rows[:6]] + [label for label, _ in inductor_rows]
    order += [label for label, _ in graph_rows[6:]]
    fig = go.Figure()
    fig.add_bar(
        y=[label for label, _ in graph_rows],
        x=[n for _, n in graph_rows],
        orientation="h",
        name="graph operations",
        marker_color=COLORS["compute"],
        hovertemplate="%{y}: %{x} operations<extra></extra>",
    )
    fig.add_bar(
        y=[label for label, _ in inductor_rows],
        x=[kernels["kernel_count"][part] for _, part in inductor_rows],
        orientation="h",
        name="generated Triton kernels",
        marker_color=COLORS["kernels"],
        hovertemplate="%{y}: %{x} Triton kernels<extra></extra>",
    )
    fig.add_bar(
        y=[label for label, _ in inductor_rows],
        x=[kernels["library_call_count"][part] for _, part in inductor_rows],
        orientation="h",
        name="library calls (cuBLAS, cuDNN)",
        marker_color=COLORS["library"],
        hovertemplate="%{y}: %{x} library calls<extra></extra>",
    )
    fig.update_layout(
        barmode="stack",
        height=540,
        margin=margin(l=10, b=110),
        legend=legend(-0.16, x=0, traceorder="normal"),
        xaxis_title="operations (Inductor code: kernels and calls)",
    )
    fig.update_yaxes(
        automargin=True, categoryorder="array", categoryarray=list(reversed(order)), title_text="rung of the ladder"
    )
    return fig


def composition(results) -> go.Figure:
    """What the operations are, at the four rungs whose operators are stored one by one: the
    ones that compute or copy, the views, and the getitems that unpack a tuple."""
    ladder, export = results("m05/ladder"), results("m05/export")
    rows = [
        ("Dynamo FX graph", _composition(_dynamo_counts(ladder))),
        ("torch.export", _composition(export["exported"]["targets"])),
        ("torch.export, core ATen", _composition(export["core_aten"]["targets"])),
        ("AOTAutograd joint (fw + bw)", _composition(ladder["joint_ops_by_target"])),
    ]
    fig = go.Figure()
    for key, label in (
        ("compute", "compute or copy"),
        ("views", "views and aliases"),
        ("unpack", "getitem (tuple unpacking)"),
    ):
        fig.add_bar(
            y=[name for name, _ in rows],
            x=[c[key] for _, c in rows],
            orientation="h",
            name=label,
            marker_color=COLORS[key],
            hovertemplate="%{y}: %{x} " + key + "<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        height=400,
        margin=margin(l=10, b=100),
        legend=legend(-0.22, x=0, traceorder="normal"),
        xaxis_title="operations in the graph",
    )
    fig.update_yaxes(
        automargin=True,
        categoryorder="array",
        categoryarray=[name for name, _ in reversed(rows)],
        title_text="graph",
    )
    return fig


def saved_bytes(results) -> go.Figure:
    """Bytes of activations kept from the forward for the backward (parameters and the input left
    out), on a log axis: every tensor the forward graph computes, what eager autograd keeps, the
    default partitioner and the min-cut partitioner."""
    saved = results("m05/saved")
    eager = saved["eager_autograd_bytes"]
    groups = [
        ("transformer block", "block", "inductor"),
        ("norm block,<br>decomposed", "norm_block", "inductor"),
        ("norm block,<br>ATen ops whole", "norm_block", "aten"),
    ]
    series = [
        (
            "every tensor the forward computes",
            "#888888",
            lambda m, d: _case(saved, m, d, "min_cut")["all_forward_bytes"],
        ),
        ("eager autograd", "#2a9d5c", lambda m, d: eager[m]),
        ("default_partition", "#9bb7e0", lambda m, d: _case(saved, m, d, "default")["activation_bytes"]),
        ("min-cut partition", BLUE, lambda m, d: _case(saved, m, d, "min_cut")["activation_bytes"]),
    ]
    fig = go.Figure()
    for label, color, value in series:
        fig.add_bar(
            x=[g for g, _, _ in groups],
            y=[value(m, d) / 1e6 for _, m, d in groups],
            name=label,
            marker_color=color,
            hovertemplate="%{x}<br>" + label + ": %{y:.4g} MB<extra></extra>",
        )
    fig.update_yaxes(type="log", title="kept for the backward (MB, log scale)", exponentformat="power")
    fig.update_xaxes(tickangle=0, title_text="model")
    fig.update_layout(
        barmode="group",
        height=500,
        margin=margin(l=60, b=110),
        legend=legend(-0.16, x=0),
    )
    return fig


def runs(results) -> dict:
    """The training step's device time in each of the build's two forced runs (``first``,
    ``second``, as coursekit.plotting.RUNS names them): compiled and eager, each the stored summary
    of that run (its median printed, p10 and p90 beside it)."""
    from coursekit.plotting import RUNS

    return {name: dict(results("m05/kernels", hardware=hardware)["step_time_us"]) for name, hardware in RUNS.items()}
