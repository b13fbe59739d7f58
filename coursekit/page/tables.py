"""Tables, outputs and the other block kinds: ``{{ output key:field }}`` (a stored text as a block),
``{{ provenance key }}`` (an expander), ``{{ hardware-sets }}``, ``{{ scoreboard }}`` and
``{{ reading-time page.md ... }}``."""

from __future__ import annotations

import html
import re
from pathlib import Path

from coursekit import results as store
from coursekit import scoreboard as races
from coursekit import teaching
from coursekit.page import markup, values
from coursekit.page.context import PageContext, ordered_sets
from coursekit.page.grammar import parse_value

STUB_MARK = '!!! note "In preparation"'


def table(head: list[str], rows: list[list[str]], css: str = "") -> str:
    """An HTML table of cells already escaped."""
    return (
        f"<table{f' class={chr(34)}{css}{chr(34)}' if css else ''}><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
        + "</tbody></table>"
    )


def output(ctx: PageContext, body: str, placeholder: str) -> str:
    """``{{ output module/snippet:field }}``: a stored text (a printed table) as a block."""
    ref = parse_value(body)
    if not ref or ref.fmt:
        ctx.fail(placeholder, "an output is written {{ output module/snippet:field }}")
    found = values.find(ctx, ref.key, ref.field, placeholder)
    if not isinstance(found.value, str):
        ctx.fail(placeholder, f"{ref.text} is not text")
    return ctx.page.stash(
        f'<div class="measured-output"><pre><code>{html.escape(found.value)}</code></pre>'
        f'<p class="provenance-line">{markup.provenance_line(ctx, ref.key, found.doc)}</p></div>'
    )


def _for_reader(key: str, value) -> str:
    """A provenance field as a reader can use it: a commit measured with uncommitted changes says so in words,
    and a re-keyed hash says what was checked, not which of the course's scripts checked it."""
    text = str(value)
    if key == "commit" and text.endswith("+dirty"):
        return f"{text[: -len('+dirty')]} with changes not yet committed (the snippet hash names the code that ran)"
    if key == "rehashed":
        said = "the snippet hash was recomputed after its formula changed;"
        return re.sub(r"snippet_hash recomputed by \S+;", said, text)
    return text


def provenance(ctx: PageContext, key: str, placeholder: str) -> str:
    """``{{ provenance key }}``: hardware, versions, date and downloads of one result."""
    doc = ctx.doc(key, placeholder)
    prov = doc["provenance"]
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(_for_reader(k, v))}</td></tr>" for k, v in sorted(prov.items())
    )
    rows += f"<tr><td>snippet hash</td><td><code>{html.escape(doc['snippet_hash'][:16])}</code></td></tr>"
    snippet = markup.snippet_path(ctx, doc, placeholder)
    links = f'<a download href="{html.escape(markup.data_link(ctx, doc))}">raw data (JSON)</a>'
    if snippet.exists():
        links += (
            f' · <a download href="{html.escape(markup.snippet_link(ctx, key))}">the snippet as one file that runs '
            f"alone ({html.escape(snippet.name)})</a>"
        )
    return ctx.page.stash(
        f'<details class="provenance"><summary>Provenance of <code>{html.escape(key)}</code>: '
        f"{html.escape(markup.short_versions(prov))}</summary><table>{rows}</table><p>{links}</p></details>"
    )


def _ceilings(ctx: PageContext, hw: str, placeholder: str) -> tuple[str, str]:
    """A set's copy bandwidth and GEMM throughput (methodology/ceilings), as the table prints them."""
    ceil = ctx.results_dir / hw / "methodology" / "ceilings.json"
    if not ceil.exists():
        return "—", "—"
    c = store.load(ceil)["data"]
    try:
        return tuple(
            f"{v:,.0f}" if v >= 100 else f"{v:.3g}"  # a CPU set's ceilings are small numbers
            for v in (c["copy"]["GBps"]["median"], c["gemm"]["TFLOPs"]["median"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        ctx.fail(placeholder, f"{ceil}: no copy.GBps / gemm.TFLOPs summary ({exc!r})")


HARDWARE_HEAD = [
    "set", "folder", "GPU", "driver", "CUDA", "torch", "triton", "Python", "CPU",
    "measured", "results", "processes (most)", "copy GB/s", "bf16 GEMM TFLOP/s",
]  # fmt: skip


def hardware_sets(ctx: PageContext, rest: str, placeholder: str) -> str:
    """``{{ hardware-sets }}``: every hardware set, its name on the site, folder, versions, dates,
    ceilings. A plain table in a div: Material styles and scroll-wraps tables without a class."""
    if rest.strip():
        ctx.fail(placeholder, "the hardware-sets table takes no arguments: {{ hardware-sets }}")
    rows = []
    for hw in ordered_sets(store.hardware_sets(ctx.results_dir)):
        try:
            docs = [store.load(p) for p in store.result_files(hw, ctx.results_dir)]
            if not docs:
                continue
            copy, gemm = _ceilings(ctx, hw, placeholder)
        except store.ResultError as exc:
            ctx.broken(placeholder, exc)
        prov = docs[0]["provenance"]
        dates = sorted(str(d["provenance"]["date"])[:10] for d in docs)
        processes = max(d["provenance"].get("processes", 1) for d in docs)
        cells = [store.set_label(hw, ctx.results_dir), hw]
        cells += [prov[k] for k in ("gpu", "driver", "cuda", "torch", "triton", "python", "cpu")]
        cells += [f"{dates[0]} to {dates[-1]}", str(len(docs)), str(processes), copy, gemm]
        rows.append([html.escape(str(c)) for c in cells])
    return ctx.page.stash(f'<div class="hardware-sets">{table(HARDWARE_HEAD, rows)}</div>')


SCOREBOARD_HEAD = [
    "Program",
    "Peer",
    "Ours",
    "Theirs",
    "Ratio (theirs / ours)",
    "Target",
    "Verdict",
    "Chapter",
    "Snippet",
    "Data",
]


def _race_row(ctx: PageContext, r: dict) -> str:
    prefix = ctx.page.url_prefix()
    doc = ctx.lookup(r["key"], "").doc
    num = lambda v, fmt: markup.measured_span(ctx, format(v, fmt), doc, [])  # noqa: E731
    digits = ",.1f" if r["theirs"] < 10_000 else ",.0f"
    spread = "per-round ratios, same rounds" if r["paired"] else "ratio of medians; spread from both ends"
    p10 = markup.measured_span(ctx, format(r["ratio_p10"], ".2f"), doc, [f"10th percentile of the ratio: {spread}"])
    p90 = markup.measured_span(ctx, format(r["ratio_p90"], ".2f"), doc, [f"90th percentile of the ratio: {spread}"])
    unit = markup.UNIT_TEXT.get(r["unit"], f" {html.escape(r['unit'])}")
    chapter = r["chapter"].removesuffix(".md")
    cells = [
        html.escape(r["name"]),
        html.escape(r["peer"]),
        f"{num(r['ours'], digits)}{unit}",
        f"{num(r['theirs'], digits)}{unit}",
        f"{num(r['ratio'], '.2f')} <small>(p10 {p10}, p90 {p90})</small>",
        f'<span class="constant">{r["bar"]:.2f}</span>',
        _verdict_cell(r),
        f'<a href="{prefix}{html.escape(chapter)}/">{html.escape(chapter.split("/")[-1])}</a>',
        f'<a href="{markup.snippet_link(ctx, r["key"])}">{html.escape(r["key"])}.py</a>',
        f'<a href="{markup.data_link(ctx, doc)}">json</a>',
    ]
    css = r["verdict"].replace(" ", "-")
    return f'<tr class="{css}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _verdict_cell(r: dict) -> str:
    """The row's verdict (coursekit/scoreboard.py): a miss in bold; a race whose median falls on
    different sides of the target in two GPU runs says so in its hover."""
    if r["verdict"] == races.MISSES:
        return f"<strong>{races.MISSES}</strong>"
    if r["flipped"]:
        hover = "the two GPU runs' medians fall on different sides of the course's target"
        return f'<span title="{html.escape(hover)}">{html.escape(r["verdict"])}</span>'
    return html.escape(r["verdict"])


def scoreboard(ctx: PageContext, rest: str, placeholder: str) -> str:
    """``{{ scoreboard }}``: every race stored for this hardware (coursekit/scoreboard.py), one row
    each: what the course wrote, its peer, both times, the ratio and its spread, the target and
    the verdict (meets, within noise, misses), with links to the chapter, the snippet and the raw data."""
    if rest.strip():
        ctx.fail(placeholder, "the scoreboard takes no arguments: {{ scoreboard }}")
    try:
        rows = races.rows(ctx.hardware, ctx.results_dir)
    except store.ResultError as exc:
        ctx.broken(placeholder, exc)
    if not rows:
        ctx.fail(placeholder, f"no result of {ctx.hardware!r} stores a race (data.races)")
    count = {v: sum(r["verdict"] == v for r in rows) for v in races.VERDICTS}
    head = "".join(f"<th>{h}</th>" for h in SCOREBOARD_HEAD)
    return ctx.page.stash(
        f'<p class="scoreboard-summary">{len(rows)} races on {html.escape(ctx.hardware)}: '
        f"{count[races.MEETS]} meet their target, {count[races.NOISE]} within noise, {count[races.MISSES]} miss it.</p>"
        '<div class="md-typeset__scrollwrap"><div class="md-typeset__table"><table class="scoreboard"><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(_race_row(ctx, r) for r in rows)
        + "</tbody></table></div></div>"
    )


def page_file(ctx: PageContext, page: str, placeholder: str) -> Path:
    """A page named relative to docs/ (never absolute, never outside docs/), which must exist."""
    docs = ctx.docs_dir.resolve()
    path = (ctx.docs_dir / page).resolve()
    if Path(page).is_absolute() or not path.is_relative_to(docs):
        ctx.fail(placeholder, f"{page!r} is not a page under {ctx.docs_dir}: name it relative to docs/")
    if not path.is_file():
        ctx.fail(placeholder, f"no page {ctx.docs_dir / page}")
    ctx.page.memo.setdefault("reads", set()).add(path)  # what a kept page depends on (pagecache)
    return path


def reading_time(ctx: PageContext, pages: str, placeholder: str) -> str:
    """Minutes of prose in one page, or the sum over several; a stub reads "in preparation"."""
    if not pages.split():
        ctx.fail(placeholder, "name the page(s) to time: {{ reading-time part-j/02-eager-per-op.md }}")
    minutes, written = 0, 0
    for page in pages.split():
        text = page_file(ctx, page, placeholder).read_text()
        if STUB_MARK in text:
            continue
        minutes += teaching.measure(text).reading_minutes
        written += 1
    text = f"{minutes} min" if written else "in preparation"
    return ctx.page.stash(f'<span class="reading-time">{text}</span>')
