"""``{{ chapter-box }}`` under a chapter's title: what it builds on (includes/chapters.yml), its reading
time, the snippets it runs (their downloads), the GPU seconds their stored results took on the
reference set, and its notebook; ``{{ chapter-box m02 }}`` names the module. ``{{ chapter-box all }}``
is a table of every module and ``{{ chapter-box total }}`` the GPU time of every stored result (the
"Run it yourself" page). The data: coursekit/chapters.py."""

from __future__ import annotations

import html

from coursekit import chapters
from coursekit import results as store
from coursekit.page import markup, tables
from coursekit.page.context import PageContext


def gpu_time(ctx: PageContext, spent, text: str) -> str:
    """A number of GPU seconds, with a hover that says what they are."""
    reference = store.REFERENCE_HARDWARE
    doc = {
        "about": f"added up from the provenance of {len(spent.results)} stored results",
        "hardware": reference,
        "provenance": spent.provenance,
    }
    how = (
        f"GPU seconds the stored results took to measure on {reference}: each result's processes' "
        f"running time times the GPUs it held, summed; measured {spent.dates[0]} to {spent.dates[1]}"
    )
    return markup.measured_span(ctx, text, doc, [how])


def _link(ctx: PageContext, chapter) -> str:
    url = ctx.page.url_prefix() + chapter.page.removesuffix(".md") + "/"
    return f'<a href="{html.escape(url)}">{html.escape(chapter.title)}</a>'


def _all(ctx: PageContext, known: dict, every: list[str]) -> str:
    """``{{ chapter-box all }}``: a row per module (what its downloads import, GPUs, GPU seconds)."""
    reference, rows = store.REFERENCE_HARDWARE, []
    for module, chapter in known.items():
        keys = chapters.snippet_keys(module, ctx.snippets_dir)
        spent = chapters.spent(keys, reference, ctx.results_dir)
        required, optional = chapters.requirements(module, ctx.snippets_dir)
        imports = [f"<code>{html.escape(n)}</code>" for n in required]
        imports += [f"<code>{html.escape(n)}</code> (optional)" for n in optional]
        before = ", ".join(p.removeprefix("m") for p in chapter.prerequisites) or "—"
        cells = [_link(ctx, chapter), before, ", ".join(imports), str(spent.gpus), str(len(keys))]
        rows.append(cells + [gpu_time(ctx, spent, f"{spent.seconds:,.0f}")])
    spent = chapters.spent(every, reference, ctx.results_dir)
    others = sorted({k.split("/")[0] for k in every} - set(known))
    first = f"All, with {', '.join(others)}" if others else "All"
    rows.append([first, "", "", str(spent.gpus), str(len(every)), gpu_time(ctx, spent, f"{spent.seconds:,.0f}")])
    head = ["Module", "Builds on", "Imports", "GPUs", "Snippets", "GPU seconds (reference)"]
    return ctx.page.stash(tables.table(head, rows))  # no class: Material styles it as a Markdown table


def _module_of(ctx: PageContext, arg: str, known: dict, placeholder: str) -> str:
    page = ctx.page.path()
    module = arg or (chapters.module_of(page.relative_to(ctx.docs_dir).as_posix()) if page else None)
    if module not in known:
        ctx.fail(
            placeholder,
            f"{module or 'this page'} is no module of includes/chapters.yml: a chapter box goes on a "
            "chapter page (docs/part-*/NN-*.md) or names its module, {{ chapter-box m02 }}",
        )
    return module


def _box(ctx: PageContext, chapter, known: dict, keys: list[str], spent, placeholder: str) -> str:
    """The box itself: five lines about one chapter."""
    if not (ctx.docs_dir / chapter.notebook).exists():
        ctx.fail(placeholder, f"no {ctx.docs_dir / chapter.notebook}: run `python scripts/notebooks.py`")
    links = [(html.escape(markup.snippet_link(ctx, k)), html.escape(k.split("/")[1])) for k in keys]
    runs = ", ".join(f'<a download href="{url}"><code>{name}.py</code></a>' for url, name in links)
    gpus = f" on {spent.gpus} GPUs" if spent.gpus > 1 else ""
    before = ", ".join(_link(ctx, known[p]) for p in chapter.prerequisites) or "nothing: start here"
    notebook = f"{ctx.page.url_prefix()}{html.escape(chapter.notebook.removesuffix('.ipynb'))}/"
    items = [
        f"<strong>Builds on</strong>: {before}",
        f"<strong>Reading time</strong>: {tables.reading_time(ctx, chapter.page, placeholder)}",
        f"<strong>Runs</strong> (each snippet a file that runs alone): {runs}",
        f"<strong>GPU time</strong>: {gpu_time(ctx, spent, f'{spent.seconds:,.0f} s')} for "
        f"its {len(spent.results)} stored results, {spent.processes} processes{gpus}, on the reference set",
        f'<strong>Notebook</strong>: <a href="{notebook}">'
        "this chapter's code run on a CPU, and its figures redrawn from the stored results</a>",
    ]
    return ctx.page.stash(
        '<div class="admonition info chapter-box"><p class="admonition-title">This chapter</p><ul>'
        + "".join(f"<li>{item}</li>" for item in items)
        + "</ul></div>"
    )


def chapter_box(ctx: PageContext, rest: str, placeholder: str) -> str:
    """``{{ chapter-box [module | all | total] }}``."""
    arg, reference = rest.strip(), store.REFERENCE_HARDWARE
    try:
        known = chapters.chapters(ctx.docs_dir)
        every = [store.snippet_key(p) for p in store.snippet_files(ctx.snippets_dir)]
        if arg == "total":
            spent = chapters.spent(every, reference, ctx.results_dir)
            return ctx.page.stash(gpu_time(ctx, spent, f"{spent.seconds:,.0f} GPU seconds"))
        if arg == "all":
            return _all(ctx, known, every)
        module = _module_of(ctx, arg, known, placeholder)
        keys = chapters.snippet_keys(module, ctx.snippets_dir)
        spent = chapters.spent(keys, reference, ctx.results_dir)
    except chapters.ChapterError as exc:
        ctx.fail(placeholder, str(exc))
    return _box(ctx, known[module], known, keys, spent, placeholder)
