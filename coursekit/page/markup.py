"""The HTML every placeholder kind shares: a measured number's span and hover, a provenance line,
the links to downloads, the attributes that carry other hardware sets' values (hardware.js)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from coursekit import results as store
from coursekit import stats
from coursekit.page.context import PageContext, ordered_sets

START_TAG = re.compile(r"""<[\w-]+(?:\s+[\w:-]+(?:=(?:"[^"]*"|'[^']*'|[^\s"'>]+))?)*""")  # up to its ">"
UNIT_TEXT = {"us": " µs", "x": "×", "": ""}  # a stored unit as the prose writes it
TAPPABLE = 'tabindex="0" role="button"'  # a measured number's provenance opens from the keyboard too
DOWNLOADS = "downloads"  # site folder of the generated snippet downloads and raw data (coursekit/plugin.py)


def short_versions(prov: dict) -> str:
    parts = [prov.get("gpu", "?")]
    parts += [f"{k} {prov[k]}" for k in ("torch", "triton", "jax") if prov.get(k)]
    parts.append(f"CUDA {prov.get('cuda')}")
    parts.append(str(prov.get("date", "?"))[:10])
    return ", ".join(str(p) for p in parts)


def json_attr(name: str, value) -> str:
    """`` name='<compact JSON>'``: single quotes, so that the JSON's own quotes need no escaping."""
    return json_text_attr(name, json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def json_text_attr(name: str, text: str) -> str:
    """`` name='<JSON text>'`` for JSON already written (a figure's, as plotly wrote it); single
    quotes, since a figure's every key and hover label would cost six bytes a quote as ``&quot;``."""
    return f" {name}='{html.escape(text, quote=False).replace(chr(39), '&#39;')}'"


def with_sets(ctx: PageContext, element: str, values: dict[str, str]) -> str:
    """A measured value's element with ``data-hw``: its text on each other set that measured it
    itself (hardware.js swaps it in; a set not named shows the reference value, marked)."""
    if not ctx.page.other_sets:
        return element
    ctx.page.switchable += 1
    tag = START_TAG.match(element)  # the attribute goes last in the element's start tag
    return element[: tag.end()] + json_attr("data-hw", values) + element[tag.end() :]


def set_marker(ctx: PageContext) -> str:
    """What hardware.js builds the page's set selector from: every set, labelled, in order."""
    sets = ordered_sets([ctx.hardware, *ctx.page.other_sets])
    marker = {
        "sets": [[hw, store.set_label(hw, ctx.results_dir)] for hw in sets],
        "page": ctx.hardware,
        "reference": store.REFERENCE_HARDWARE,
        # sets measured at other sizes (a CPU set's small ones): never drawn on the reference's axes
        "other_sizes": [hw for hw in sets if store.is_cpu_set(hw)],
    }
    return ctx.page.stash(f'<div class="hw-sets" hidden{json_attr("data-hw-sets", marker)}></div>')


def spread_words(s: dict) -> str:
    """What a summary's p10 and p90 are (coursekit/stats.py takes nearest-rank percentiles, so
    with few samples they are the extremes, or the next ones in)."""
    rank = stats.percentile(range(s["n"]), 0.10)  # how many samples lie below p10 (and above p90)
    if rank == 0:
        return "min–max"
    if rank == 1:
        return f"10th–90th percentile (the 2nd of {s['n']} from each end)"
    return "10th–90th percentile"


def spread_note(s: dict, p10: str, p90: str) -> str:
    """A summary's hover note: 'median of 3 samples; min–max 7.1–7.9 µs'."""
    unit = UNIT_TEXT.get(s.get("unit", ""), f" {s.get('unit', '')}".rstrip())
    samples = "sample" if s["n"] == 1 else "samples"
    return f"median of {s['n']} {samples}; {spread_words(s)} {p10}–{p90}{unit}"


def source_words(doc: dict) -> str:
    if doc.get("about"):  # a number the course adds up from its results (the chapter box's GPU time)
        return doc["about"]
    if "derived_from" in doc:
        return f"computed by {doc['snippet']} from {', '.join(doc['derived_from'])}, measured"
    return f"measured by {doc['snippet']}"


def measured_span(ctx: PageContext, text: str, doc: dict, notes: list[str]) -> str:
    title = "; ".join([*notes, f"{source_words(doc)} on {short_versions(doc['provenance'])}"])
    css = "measured"
    if doc["hardware"] != ctx.hardware:
        title = f"not measured on {ctx.hardware}: the {doc['hardware']} value; " + title
        css += " fallback"
    if len(text) > 20:  # a name or a phrase, not a number: it may wrap (course.css)
        css += " words"
    # a control: tap, click or Enter shows the title in a popover (docs/assets/javascripts/provenance.js)
    return f'<span class="{css}" title="{html.escape(title)}" {TAPPABLE}>{html.escape(text)}</span>'


def data_link(ctx: PageContext, doc: dict) -> str:
    return f"{ctx.page.url_prefix()}{DOWNLOADS}/data/{doc['hardware']}/{doc['key']}.json"


def snippet_link(ctx: PageContext, key: str) -> str:
    return f"{ctx.page.url_prefix()}{DOWNLOADS}/{key}.py"


def snippet_path(ctx: PageContext, doc: dict, placeholder: str) -> Path:
    """The result's snippet, which must lie inside snippets/ (results are data, not trusted paths)."""
    path = (ctx.snippets_dir.parent / doc["snippet"]).resolve()
    if not path.is_relative_to(ctx.snippets_dir.resolve()):
        ctx.fail(placeholder, f"result {doc.get('key')!r} names the snippet {doc['snippet']!r}, outside snippets/")
    return path


def provenance_line(ctx: PageContext, key: str, doc: dict, borrowed: bool = True, versions: bool = True) -> str:
    """One line of provenance; ``borrowed=False`` for a set a figure asked for by name;
    ``versions=False`` where the page has said them once already."""
    prov = doc["provenance"]
    if borrowed and doc["hardware"] != ctx.hardware:
        note = f"<strong>Not measured on {html.escape(ctx.hardware)}; reference data:</strong> "
    elif doc["hardware"] != ctx.hardware:  # a set the figure names itself: say which
        note = f"{html.escape(store.set_label(doc['hardware'], ctx.results_dir))}: "
    else:
        note = ""
    where = f" on {html.escape(short_versions(prov))}" if versions else ""
    if "derived_from" in doc:
        return (
            f"{note}Computed by <code>{html.escape(doc['snippet'])}</code> from "
            f"{html.escape(', '.join(doc['derived_from']))}, measured{where}"
        )
    return (
        f"{note}Measured by <code>{html.escape(doc['snippet'])}</code>{where} "
        f'(<a download href="{html.escape(data_link(ctx, doc))}">raw data</a>)'
    )
