"""``{{ evidence mNN/evidence }}``: the files behind a figure, as download links.

An evidence snippet (coursekit/evidence.py) writes files a reader opens in a tool; the build job
stores them beside its result (``build_results/<set>/mNN/evidence/``) and the plugin serves them
at ``downloads/data/<set>/mNN/evidence/<file>`` (coursekit/plugin.py). The placeholder, written
under the figure they explain, renders a "Get the evidence" box: each file as a link with its size,
what it is, what it shows and the tool that opens it, then the provenance line of the result.

The files are those of the page's hardware set; where that set has no such result, the reference
set's, said so in the provenance line (as a value borrowed from the reference is); where neither
has it, or a listed file is not stored, the build stops naming page, line and key.
"""

from __future__ import annotations

import html

from coursekit import results as store
from coursekit.page import markup
from coursekit.page.context import PageContext
from coursekit.page.grammar import KEY


def size_words(n: int) -> str:
    """A file's size as a reader reads it: 3 KB, 0.8 MB."""
    if n < 1000 * 1000:
        return f"{max(1, round(n / 1000))} KB"
    return f"{n / 1e6:.1f} MB"


def file_link(ctx: PageContext, doc: dict, name: str) -> str:
    """Where the site serves one evidence file of a result (coursekit/plugin.py), from the page."""
    return f"{ctx.page.url_prefix()}{markup.DOWNLOADS}/data/{doc['hardware']}/{doc['key']}/{name}"


def evidence(ctx: PageContext, rest: str, placeholder: str) -> str:
    key = rest.strip()
    if not KEY.fullmatch(key):
        ctx.fail(
            placeholder, "an evidence box is written {{ evidence module/snippet }}, e.g. {{ evidence m02/evidence }}"
        )
    doc = ctx.doc(key, placeholder)
    listed = doc["data"].get("artifacts")
    if not listed:
        ctx.fail(
            placeholder, f"result {key!r} of hardware {doc['hardware']!r} lists no evidence files (data.artifacts)"
        )
    folder = store.evidence_dir(store.result_path(key, doc["hardware"], ctx.results_dir))
    items = []
    for described, record in zip(listed, doc["artifacts"], strict=True):
        path = folder / record["name"]
        if not path.is_file() or path.stat().st_size != record["bytes"]:
            ctx.fail(
                placeholder,
                f"the evidence file {path} of result {key!r} is missing or not the one its result records "
                f"({record['bytes']} bytes): run the snippet again (scripts/build_results.py --only {key})",
            )
        gz = ", gzipped" if record["name"].endswith(".gz") else ""
        items.append(
            f'<li><a download href="{html.escape(file_link(ctx, doc, record["name"]))}">'
            f"{html.escape(described['what'])}</a> ({html.escape(size_words(record['bytes']))}{gz}): "
            f"{html.escape(described['shows'])}; open it in {html.escape(described['opens_with'])}.</li>"
        )
    return ctx.page.stash(
        '<div class="admonition info evidence"><p class="admonition-title">Get the evidence</p>'
        f"<ul>{''.join(items)}</ul>"
        f'<p class="provenance-line">{markup.provenance_line(ctx, key, doc)}</p></div>'
    )
