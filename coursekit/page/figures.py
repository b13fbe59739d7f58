"""Figures, and the call into ``snippets/<module>/figures.py`` that figures and computed values share.

``{{ figure m02/crossover | caption }}`` calls ``crossover(results)`` of snippets/m02/figures.py and
embeds the plotly figure it returns as JSON (figures.js draws it), numbered per page, with its
caption and one provenance line. Where other hardware sets hold the results it reads, the same
function drawn on each of them rides along (``data-plotly-sets``) for the set selector.

``call`` is the one place the page calls a figures.py function; ``computed`` caches it, in memory
for the build and on disk between builds (coursekit/cache.py), keyed by figures.py, the course's
code and the set, and checked against the results the call read.
"""

from __future__ import annotations

import html
import json
import re

from coursekit import cache, figdata, prose
from coursekit import results as store
from coursekit.page import markup
from coursekit.page.context import PageContext, PlaceholderError

_COMPUTED: dict[str, dict] = {}


class FigureJSON:
    """A plotly figure as the page carries it (``figure_json``): what the cache keeps of a figure."""

    def __init__(self, text: str):
        self.json = text


def call(ctx: PageContext, name: str, placeholder: str, run: int = 0):
    """Call function <func> of snippets/<module>/figures.py on the context's set with what
    coursekit/figdata.py hands it (the notebooks hand it the same): (what it returned, {label:
    document read}, figures.py). ``run`` picks which process's data each result gives (the last one
    a result has). Where a CPU set's small sizes cannot draw it, the reference set's data draws it
    (its caption says so). A malformed result it reads stops the build, whichever set it is on."""
    if not re.fullmatch(r"[a-z0-9_]+/[a-z0-9_]+", name):
        ctx.fail(placeholder, "a figure is named <module folder>/<function in its figures.py>")
    path = figdata.figures_path(name, ctx.snippets_dir)
    try:
        fn = figdata.function(name, ctx.snippets_dir)
    except LookupError as exc:
        ctx.fail(placeholder, str(exc))
    except Exception as exc:  # a bug in figures.py at import time
        ctx.fail(placeholder, f"{path} failed to import: {type(exc).__name__}: {exc}")
    (results,) = args = figdata.arguments(ctx.hardware, figdata.Store(ctx.results_dir), run)
    try:
        value = fn(*args)
    except store.ResultError as exc:
        ctx.broken(placeholder, exc)
    except Exception as exc:
        if store.is_cpu_set(ctx.hardware) and not ctx.quiet:
            # a CPU set's small sizes lack what it reads: the reference's data, marked as borrowed
            return call(ctx.on(store.REFERENCE_HARDWARE, quiet=False), name, placeholder, run)
        if isinstance(exc, PlaceholderError):
            raise
        # a bug in the figure code, or a result it reads missing: name the figure, not just the page
        ctx.fail(placeholder, f"{path}:{name.split('/')[1]}() raised {type(exc).__name__}: {str(exc).strip(chr(39))}")
    ctx.borrowed |= any(" (" not in k and d["hardware"] != ctx.hardware for k, d in results.used.items())
    return value, results.used, path


def computed(ctx: PageContext, name: str, placeholder: str, run: int = 0):
    """``call``, cached while figures.py, the course's code and the results it read are unchanged: once
    per page, in memory for the build and on disk between builds (coursekit/cache.py). A plotly
    figure comes back as ``FigureJSON``, its spec as the page carries it."""
    path = ctx.snippets_dir / name.split("/")[0] / "figures.py"
    memo = ("figure", name, run, ctx.hardware, ctx.quiet)
    if memo in ctx.page.memo:
        value, used = ctx.page.memo[memo]
        ctx.borrowed |= any(" (" not in k and d["hardware"] != ctx.hardware for k, d in used.items())
        return value, used, path
    code, listing = ctx.page.code_hash(), ctx.page.listing()
    k = cache.key("figure", cache.file_hash(path), code, name, run, ctx.hardware, ctx.quiet, listing)
    entry = _COMPUTED.get(k) or cache.get("figures", k)
    used = _replay(ctx, entry) if entry else None
    if used is not None:
        _COMPUTED[k] = entry
        value = entry["value"]
    else:
        value, used, path = call(ctx, name, placeholder, run)
        if callable(getattr(value, "to_json", None)) and hasattr(value, "layout"):
            value = FigureJSON(figure_json(value))
        files = {label: (d["hardware"], d["key"]) for label, d in used.items()}
        hashed = {
            label: (*hk, cache.file_hash(store.result_path(hk[1], hk[0], ctx.results_dir)))
            for label, hk in files.items()
        }
        entry = _COMPUTED[k] = {"value": value, "used": hashed}
        cache.put("figures", k, entry)
    ctx.borrowed |= any(" (" not in k and d["hardware"] != ctx.hardware for k, d in used.items())
    ctx.page.memo[memo] = (value, used)
    return value, used, path


def _replay(ctx: PageContext, entry: dict) -> dict | None:
    """The documents a cached call read, if every one is unchanged; else None."""
    used = {}
    for label, (hardware, key, digest) in entry["used"].items():
        path = store.result_path(key, hardware, ctx.results_dir)
        if cache.file_hash(path) != digest:
            return None
        used[label] = ctx.page.load(path)
    return used


def _shorter(value):
    """A figure's floats at five significant digits (one decimal from 10,000 up): what a hover or
    an axis shows, without the float's last bits, so that a page stays light."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or value == 0:
            return value
        return round(value, 1) if abs(value) >= 1e4 else float(f"{value:.5g}")
    if isinstance(value, list):
        return [_shorter(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorter(v) for k, v in value.items()}
    return value


def figure_json(fig) -> str:
    """A figure's spec as the page carries it: no template (figures.js applies the page's palette),
    every axis with automargin, so that its tick labels and title grow the margin instead of being
    clipped by it, and floats shortened (_shorter)."""
    fig.layout.template = None
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return json.dumps(_shorter(json.loads(fig.to_json())), separators=(",", ":"))


def caption_of(ctx: PageContext, rest: str, placeholder: str) -> tuple[str, str, int]:
    """``{{ figure m03/speedup | Speed-up of each mode over eager }}``: the figure's name, its
    caption (required: what the figure shows, in prose; `code` allowed) and its number on the page
    (figures are numbered per page in order of appearance)."""
    name, _, caption = rest.partition("|")
    name, caption = name.strip(), " ".join(caption.split())
    if not caption:
        ctx.fail(
            placeholder, f"a figure needs a caption that says what it shows: {{{{ figure {name} | <what it shows> }}}}"
        )
    typed = prose.find_typed(caption)
    if typed:
        ctx.fail(
            placeholder,
            f"the caption types a number that looks measured ({typed[0].text!r}): "
            "say what the figure shows, the figure gives the numbers",
        )
    ctx.page.figures += 1
    return name, caption, ctx.page.figures


def other_sets(ctx: PageContext, name: str, placeholder: str, used: dict, spec_json: str) -> str:
    """The attributes a figure gets where it can be drawn on other sets too: the same function
    called on each other set whose own results it reads, ``data-plotly-sets`` = {set: {"data":
    traces}} (plus "layout" where it differs from the page's), and ``data-plotly-reference``;
    figures.js draws the selected set solid, the reference dashed. Nothing for a figure that names
    its sets itself (two runs compared) or borrows its data."""
    if not ctx.page.other_sets or any(" (" in k or d["hardware"] != ctx.hardware for k, d in used.items()):
        return ""
    layout = json.loads(spec_json).get("layout", {})
    sets = {}
    for hw, (fig, used_here, _) in ctx.per_set(lambda c: computed(c, name, placeholder)).items():
        if not used_here or any(d["hardware"] != hw for d in used_here.values()) or not isinstance(fig, FigureJSON):
            continue  # drawn from the reference's data: nothing of its own to overlay
        spec = json.loads(fig.json)
        sets[hw] = {"data": spec.get("data", [])}
        if spec.get("layout", {}) != layout:
            sets[hw]["layout"] = spec.get("layout", {})
    if not sets:
        return ""
    attr = markup.json_attr("data-plotly-sets", sets)
    ctx.page.switchable += 1
    if len(attr) > 400_000:
        ctx.fail(placeholder, f"the figure's other hardware sets are {len(attr)} bytes; keep them under 400 kB")
    reference, here = html.escape(store.REFERENCE_HARDWARE), html.escape(ctx.hardware)
    return f'{attr} data-plotly-reference="{reference}" data-plotly-hardware="{here}"'


def provenance(ctx: PageContext, used: dict) -> str:
    """The figure's provenance line: where its data comes from. The versions it was measured on are
    said once per page (the first figure, or where they differ from the page's first)."""
    if len(used) > 4:  # a figure over many results (e.g. two whole runs): one line, not one per result
        sets = sorted({d["hardware"] for d in used.values()})
        keys = sorted({k.split(" (")[0] for k in used})
        first = next(iter(used.values()))["provenance"]
        return (
            f"Drawn from {len(used)} stored results ({html.escape(', '.join(keys))}) of the sets "
            f"{html.escape(', '.join(sets))}, measured on {html.escape(markup.short_versions(first))}; "
            "raw data under <code>downloads/data/</code>"
        )
    lines = []
    for k, d in used.items():
        said = markup.short_versions(d["provenance"]) in ctx.page.versions_said
        lines.append(markup.provenance_line(ctx, k, d, borrowed=" (" not in k, versions=not said))
        ctx.page.versions_said.add(markup.short_versions(d["provenance"]))
    return "; ".join(lines)


def figure(ctx: PageContext, rest: str, placeholder: str) -> str:
    """``{{ figure module/function | caption }}``."""
    name = rest.partition("|")[0].strip()
    module_dir, _, func = name.partition("/")
    fig, used, path = computed(ctx, name, placeholder)
    if not isinstance(fig, FigureJSON):
        ctx.fail(placeholder, f"{path}:{func}() returned a {type(fig).__name__}, not a plotly Figure")
    name, caption, number = caption_of(ctx, rest, placeholder)
    if len(fig.json) > 400_000:
        ctx.fail(placeholder, f"figure data is {len(fig.json)} bytes; keep a figure under 400 kB")
    overlay = other_sets(ctx, name, placeholder, used, fig.json)  # the other hardware sets' traces
    label = f"Figure {number}. {caption.replace('`', '')}"
    shown = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(caption, quote=False))
    return ctx.page.stash(
        f'<figure class="course-figure" id="fig-{html.escape(module_dir)}-{html.escape(func)}">'
        f'<div class="course-plot" role="img" aria-label="{html.escape(label)}"'
        f"{markup.json_text_attr('data-plotly', fig.json)}{overlay}></div>"
        f'<figcaption><p class="figure-caption"><span class="figure-number">Figure {number}.</span> {shown}</p>'
        f'<p class="provenance-line">{provenance(ctx, used)}</p></figcaption></figure>'
    )
