"""Values: ``{{ module/snippet:field | format }}`` (stored, or computed by a figures.py function) and
``{{ cited VALUE | SOURCE }}``.

A value that ends at a timing summary prints its median; its hover gives the spread, the other
processes' medians and where it was measured. ``| .1f range`` prints the range of the medians over
the processes (shown anyway where the processes disagree beyond process 1's spread).
"""

from __future__ import annotations

import html
import json
import re

from coursekit import results as store
from coursekit.page import figures, markup
from coursekit.page.context import MissingValue, PageContext
from coursekit.page.grammar import ValueRef


def format_number(ctx: PageContext, value, spec: str, placeholder: str, what: str) -> str:
    """A Python format spec, optionally after a scale ("/1e6 .0f"); a numeric spec demands a number."""
    spec = (spec or "").strip()
    if isinstance(value, str):
        if spec:
            ctx.fail(placeholder, f"{what} is the text {value!r}; the format {spec!r} needs a number")
        return value
    if not store.is_number(value):
        ctx.fail(placeholder, f"{what} is {value!r} ({type(value).__name__}), not a number or text")
    scale = re.match(r"^([/*])\s*([0-9.e+-]+)\s*", spec)
    try:
        if scale:
            factor = float(scale[2])
            value = value / factor if scale[1] == "/" else value * factor
            spec = spec[scale.end() :]
        if isinstance(value, float) and spec.endswith("d"):
            value = round(value)
        return significant(ctx, value, spec, format(value, spec))
    except (ValueError, TypeError, ZeroDivisionError) as exc:
        ctx.fail(placeholder, f"format {spec!r} does not apply to {what}: {exc}")


def significant(ctx: PageContext, value, spec: str, text: str) -> str:
    """Another set's number that the page's fixed-point format rounds to nothing (a CPU's "0 GB/s"
    where the reference's format expects thousands) keeps two significant digits."""
    if ctx.quiet and value and not re.search(r"[1-9]", text) and re.search(r"\.\d+%?$|[fd%]$", spec):
        if spec.endswith("%"):
            return format(value * 100, ".2g") + "%"
        return format(value, ",.2g" if "," in spec else ".2g")
    return text


def _computable(ctx: PageContext, key: str) -> bool:
    """Whether ``key`` names a function of its module's figures.py and no stored result."""
    module_dir, func = key.split("/")
    if any(store.result_path(key, hw, ctx.results_dir).exists() for hw in (ctx.hardware, store.REFERENCE_HARDWARE)):
        return False
    memo = ("functions", module_dir)
    if memo not in ctx.page.memo:  # the functions its figures.py defines, read once per page
        source = ctx.snippets_dir / module_dir / "figures.py"
        text = source.read_text() if source.exists() else ""
        ctx.page.memo[memo] = set(re.findall(r"^def (\w+)\(", text, re.M))
    return func in ctx.page.memo[memo]


def find(ctx: PageContext, key: str, field: str, placeholder: str) -> store.Lookup:
    """A stored value, or one that snippets/<module>/figures.py computes from stored values."""
    try:
        found = ctx.lookup(key, field)
        ctx.borrowed |= found.doc["hardware"] != ctx.hardware
        return found
    except MissingValue as exc:
        if not _computable(ctx, key):
            ctx.fail(placeholder, str(exc))
    except store.ResultError as exc:
        ctx.broken(placeholder, exc)
    if store.is_cpu_set(ctx.hardware) and not ctx.quiet:
        found = ctx.own_or_reference(lambda c: find(c, key, field, placeholder))
        ctx.borrowed |= found.doc["hardware"] != ctx.hardware
        return found
    return _computed_value(ctx, key, field, placeholder)


def _walk_computed(ctx: PageContext, value, key: str, field: str, path, placeholder: str):
    try:
        return store.walk(value, field, f"{key}: ", f"what {path}:{key.split('/')[1]}() returns")
    except KeyError as exc:
        ctx.fail(placeholder, exc.args[0])


def _computed_value(ctx: PageContext, key: str, field: str, placeholder: str) -> store.Lookup:
    """``field`` of what figures.py's function ``key`` returns, on every process's data."""
    computed, used, path = figures.computed(ctx, key, placeholder, 0)
    if not used:
        ctx.fail(placeholder, f"{path}:{key.split('/')[1]}() read no stored result, so it measured nothing")
    value = _walk_computed(ctx, computed, key, field, path, placeholder)
    processes = max(len(d.get("runs", [])) + 1 for d in used.values())
    per_process = [value]  # the same computation on each process's data, for claims and the hover
    for run in range(1, processes):
        again, _, _ = figures.computed(ctx, key, placeholder, run)
        per_process.append(_walk_computed(ctx, again, key, field, path, placeholder))
    # borrowed only where the page's own set lacked a result (not where figures.py asked for another
    # set by name, as the methodology page's comparison of two runs does)
    borrowed = [d["hardware"] for k, d in used.items() if " (" not in k and d["hardware"] != ctx.hardware]
    if all(" (" in k for k in used) and ctx.hardware != store.REFERENCE_HARDWARE:
        borrowed = [store.REFERENCE_HARDWARE]  # it reads only sets it names: the same on every set
    ctx.borrowed |= bool(borrowed)
    doc = {
        "snippet": f"snippets/{key.split('/')[0]}/figures.py:{key.split('/')[1]}()",
        "hardware": borrowed[0] if borrowed else ctx.hardware,
        "provenance": next(iter(used.values()))["provenance"],
        "derived_from": sorted(used),
        "per_process": per_process,
    }
    return store.Lookup(value, doc, path)


def value(ctx: PageContext, ref: ValueRef, placeholder: str) -> str:
    """``{{ key:field | format }}``: the value on the page's set, with each other set's text."""
    text, doc, notes = ctx.own_or_reference(lambda c: value_text(c, ref, placeholder))
    values = {}
    for hw, (text_there, doc_there, _) in ctx.per_set(lambda c: value_text(c, ref, placeholder)).items():
        if doc_there["hardware"] == hw and not _nothing_there(hw, text, text_there):
            values[hw] = text_there  # measured there, not borrowed from the reference
    return ctx.page.stash(markup.with_sets(ctx, markup.measured_span(ctx, text, doc, notes), values))


def _nothing_there(hw: str, text: str, text_there: str) -> bool:
    """A CPU set's exact zero where the page's set measured something (a GPU's idle share, its
    kernel time): what a CPU cannot measure, shown as not measured there, never as "0"."""
    zero = re.search(r"\d", text_there) and not re.search(r"[1-9]", text_there)
    return bool(store.is_cpu_set(hw) and zero and re.search(r"[1-9]", text))


def _node(ctx: PageContext, ref: ValueRef, placeholder: str) -> tuple[object, dict, list]:
    """The value at ``ref``, its document, and its value in each process."""
    if not ref.field.startswith("@"):
        found = find(ctx, ref.key, ref.field, placeholder)
        return found.value, found.doc, ctx.across_processes(found.doc, ref.field, placeholder)
    doc = node = ctx.doc(ref.key, placeholder)
    for part in ref.field[1:].split("."):  # a field of the result document itself
        if not isinstance(node, dict) or part not in node:
            ctx.fail(placeholder, f"no field {ref.field[1:]!r} in result {ref.key!r}")
        node = node[part]
    return node, doc, [node]


def value_text(ctx: PageContext, ref: ValueRef, placeholder: str) -> tuple[str, dict, list[str]]:
    """A value's text on the context's set, the result it came from, and the notes for its hover."""
    fmt, what = ref.fmt, ref.text
    want_range = fmt.endswith("range")
    fmt = fmt.removesuffix("range").strip()
    node, doc, values = _node(ctx, ref, placeholder)
    num = lambda v: format_number(ctx, v, fmt, placeholder, what)  # noqa: E731
    notes = []
    disagree = False  # another process's median outside process 1's own band
    if store.is_summary(node) and len(values) > 1 and all(store.is_summary(v) for v in values):
        disagree = any(not node["p10"] <= v["median"] <= node["p90"] for v in values[1:])
    if store.is_summary(node):
        notes.append(markup.spread_note(node, num(node["p10"]), num(node["p90"])))
        node = node["median"]
        values = [v["median"] if store.is_summary(v) else v for v in values]
    elif isinstance(node, dict | list) or node is None:
        ctx.fail(placeholder, f"{what} is a {type(node).__name__}, not a number or text")
    text = num(node)
    if len(values) > 1 and len({json.dumps(v, sort_keys=True) for v in values}) > 1:
        notes.append(f"process medians {', '.join(num(v) for v in values)}")
    if want_range and len(values) < 2:
        ctx.fail(placeholder, f"'range' needs a result measured in several processes; {ref.key} has one")
    if want_range or disagree:
        # Where the processes disagree beyond one process's spread, a single median would overstate
        # what is known: the page shows the range of the processes' medians.
        if disagree:
            notes.insert(0, "the processes disagree beyond process 1's spread: shown is the range of their medians")
        lo, hi = num(min(values)), num(max(values))
        if lo == hi:  # the medians differ only below the format's precision: one number says it
            text = lo
        else:
            text = f"{lo} to {hi}" if min(values) < 0 else f"{lo}–{hi}"  # "-10–21" would read as a dash
    return text, doc, notes


def cited(ctx: PageContext, body: str, placeholder: str) -> str:
    """``{{ cited VALUE | SOURCE }}``: a number from a named source, not measured here."""
    number, bar, source = (s.strip() for s in body.partition("|"))
    if not bar or not number or not source:
        ctx.fail(placeholder, "a cited figure needs both halves: {{ cited VALUE | SOURCE }}")
    return ctx.page.stash(
        f'<span class="cited" title="{html.escape("cited, not measured here: " + source)}" {markup.TAPPABLE}>'
        f"{html.escape(number)}</span>"
    )
