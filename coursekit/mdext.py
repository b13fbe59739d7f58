"""Markdown extension: measured numbers, figures and provenance from build_results/.

Placeholders (one syntax family, ``{{ ... }}``; the kinds are the registry ``KINDS``, coursekit/page/kinds.py):

    {{ m02/host_overhead:host_us.no_grad | .1f }}   a value: data.<path> of result m02/host_overhead
    {{ m03/modes:points[tokens=4096].modes.eager.time_us | .0f }}
                                                    a list item is chosen by its fields, never by position
    {{ m02/crossover:bytes | /1e6 .0f }}            scaled first: bytes printed as MB
    {{ m02/host_overhead:host_us.no_grad | .1f range }}
                                                    the range of the medians over the result's processes
                                                    (shown anyway where another process's median lies
                                                    outside process 1's 10th-90th percentile band)
    {{ m02/crossover:@provenance.torch }}           a field of the result document itself
    {{ output m02/profile_breakdown:table }}        a stored text (a printed table) as a block
    {{ figure m02/crossover | What it shows }}      function crossover() of snippets/m02/figures.py,
                                                    drawn as "Figure N." (numbered per page) with
                                                    its caption, which every figure must have
    {{ m03/derived:by_tokens.1.predicted_us | .0f }} a value computed from stored results: where no
                                                    result m03/derived exists, function derived() of
                                                    snippets/m03/figures.py, called like a figure
    {{ provenance m02/host_overhead }}              an expander: hardware, versions, date, downloads
    {{ evidence m02/evidence }}                     under a figure: the files behind it (a profiler trace,
                                                    a memory snapshot, compile logs, Triton IR) as download
                                                    links with size, what each shows and the tool that opens it
    {{ cited 4.8 TB/s | NVIDIA H200 datasheet }}    a number from a named source, not measured here
    {{ hardware-sets }}                             a table of every hardware folder in build_results/
    {{ assert m02/a:x.y < m02/b:z }}                a claim the prose makes about two measurements;
                                                    renders nothing (see ``claim`` for when it holds)
    {{ reading-time part-j/02-eager-per-op.md }}    minutes to read the main line (coursekit/teaching.py), pages summed
    {{ scoreboard }}                                every stored race of the set: both times, the ratio, the target
    {{ chapter-box }}                               a chapter's opening box: what it builds on, its GPU time, its
                                                    notebook (``chapter-box mNN`` names a module; ``all`` and
                                                    ``total`` are the run-it-yourself page's table and sum)

A value that ends at a timing summary prints its median; hovering shows the spread, the other
processes' medians and where it was measured. A numeric format demands a number. A placeholder
that cannot be filled stops the build with an error that names the page, the line and the key;
so does any ``{{`` or ``}}`` left over outside code (write ``\\{{`` for literal braces).

The extension is a Python-Markdown preprocessor that runs after pymdownx.snippets (priority
32), so placeholders inside included files are filled too. This module is only the preprocessor:
it finds the placeholders outside code fences (the grammar: coursekit/page/grammar.py) and hands
each to its kind (the registry ``KINDS``: coursekit/page/kinds.py), over a page context
(coursekit/page/context.py). Result files are read and validated once per build
(coursekit/results.py caches them); what figures.py functions return is cached between builds
(coursekit/cache.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from coursekit import results as store
from coursekit.page import figures, grammar, markup, pagecache
from coursekit.page.context import MissingValue, Page, PageContext, PlaceholderError, ordered_sets
from coursekit.page.grammar import PLACEHOLDER, SPACED_BRACES
from coursekit.page.kinds import KINDS
from coursekit.page.markup import DOWNLOADS
from coursekit.page.tables import STUB_MARK
from coursekit.page.values import value

__all__ = ["DOWNLOADS", "KINDS", "PLACEHOLDER", "STUB_MARK", "MissingValue", "PlaceholderError", "makeExtension"]


def fill(ctx: PageContext, m) -> str:
    """What replaces one placeholder: its kind's output, or a value's."""
    placeholder, body = m.group(0), m["body"]
    head, rest = grammar.kind_of(body)
    handler = KINDS.get(head)
    if handler is not None:
        return handler(ctx, rest, placeholder)
    ref = grammar.parse_value(body)
    if ref is not None:
        return value(ctx, ref, placeholder)
    # Nothing else uses {{ }} on this site, so anything else is a typo ({{ figures ... }},
    # {{ M02/... }}) and must not slip through as literal text. Write \{{ for a literal.
    ctx.fail(
        placeholder,
        "not a placeholder this site knows: a value is {{ module/snippet:field | format }}; the other kinds are "
        + ", ".join(KINDS)
        + " (write \\{{ for literal braces)",
    )


def check_leftovers(ctx: PageContext, line: str) -> None:
    """No stray ``{{``/``}}`` outside code, and no placeholder typed with spaced braces (``{ { x } }``):
    a malformed placeholder must not reach the page as literal text."""
    # inline code is filled like prose (a kernel name can sit in backticks), so it is checked too
    text = re.sub(r"\\\{\{[^{}]*?\}\}", " ", line).replace("\\{{", "  ")
    for m in PLACEHOLDER.finditer(text):
        before, after = text[: m.start()], text[m.end() :]
        if before.endswith("{") or after.startswith("}"):
            ctx.fail(m.group(0), "extra braces around a placeholder ({{{ ... }}})")
    rest = PLACEHOLDER.sub(" ", text)
    for stray in ("{{", "}}"):
        if stray in rest:
            i = rest.index(stray)
            ctx.fail(
                line.strip()[:80],
                f"a stray {stray!r} at {rest[max(0, i - 20) : i + 20]!r}: a placeholder is "
                "{{ module/snippet:field | format }} (write \\{{ for literal braces)",
            )
    prose = re.sub(r"(`+).+?\1", lambda m: " " * len(m.group(0)), rest)  # code spans may hold "{ {"
    spaced = SPACED_BRACES.search(prose)
    if spaced:
        ctx.fail(
            line.strip()[:80],
            f"braces typed apart at {prose[max(0, spaced.start() - 20) : spaced.end() + 20]!r}: a placeholder is "
            "written {{ ... }} with its braces together (write \\{{ for literal braces)",
        )


class ResultsPreprocessor(Preprocessor):
    """Fills every placeholder of a page outside code fences (coursekit/page/ does the work)."""

    def __init__(self, md, config):
        super().__init__(md)
        self.hardware = os.environ.get("COURSE_HARDWARE") or config["hardware"]
        self.results_dir = Path(config["results_dir"])
        self.snippets_dir = Path(config["snippets_dir"])
        self.docs_dir = Path(config["docs_dir"])

    def context(self) -> PageContext:
        """A fresh page on this extension's hardware set, its other sets found."""
        page = Page(self.md, self.results_dir, self.snippets_dir, self.docs_dir)
        ctx = PageContext(page, self.hardware)
        ctx.check_hardware()
        page.other_sets = ordered_sets([hw for hw in store.hardware_sets(self.results_dir) if hw != self.hardware])
        return ctx

    def call_figures(self, name: str, placeholder: str, run: int = 0):
        """A figures.py function called as the page calls it (coursekit/page/figures.py: ``call``)."""
        return figures.call(self.context(), name, placeholder, run)

    figure_json = staticmethod(figures.figure_json)

    def run(self, lines):
        page = self.context().page
        where = (
            str(page.path()),
            page.url_prefix(),
            self.hardware,
            *map(str, (self.results_dir, self.snippets_dir, self.docs_dir)),
        )
        k = pagecache.key(lines, where, pagecache.world(self.results_dir, self.snippets_dir, self.docs_dir))
        kept = pagecache.replay(k, self.md)
        if kept is not None:
            return kept
        start = self.md.htmlStash.html_counter
        out = self.fill_page(lines)
        pagecache.keep(k, self.md, out, self.memo_reads, start)
        return out

    def fill_page(self, lines):
        """Every placeholder of the page filled, its set marker added where it shows measured data."""
        ctx = self.context()
        out = []
        for ctx.page.line, (line, code) in enumerate(zip(lines, grammar.fenced(lines)), 1):
            if not code:
                check_leftovers(ctx, line)
                line = PLACEHOLDER.sub(lambda m: fill(ctx, m), line)
                line = line.replace("\\{{", "{{")
            out.append(line)
        if ctx.page.switchable:  # a page that shows something measured: hardware.js builds its set selector
            out += ["", markup.set_marker(ctx)]  # a block of its own (a trailing "" would put it in a <p>)
        self.memo_reads = ctx.page.memo.get("reads", set())
        return out


class CourseResultsExtension(Extension):
    def __init__(self, **kwargs):
        self.config = {
            "hardware": [store.REFERENCE_HARDWARE, "hardware folder under build_results/ (env COURSE_HARDWARE wins)"],
            "results_dir": ["build_results", "results store, relative to the working directory"],
            "snippets_dir": ["snippets", "snippets folder, relative to the working directory"],
            "docs_dir": ["docs", "docs folder, for naming the page in errors"],
        }
        super().__init__(**kwargs)

    def extendMarkdown(self, md):
        # After pymdownx.snippets (32), so included files are filled too, and after
        # normalize_whitespace (30), which would strip the stash markers of the HTML we insert;
        # before fenced code blocks (25) and raw HTML blocks (20).
        md.preprocessors.register(ResultsPreprocessor(md, self.getConfigs()), "course_results", 28)


def makeExtension(**kwargs):
    return CourseResultsExtension(**kwargs)
