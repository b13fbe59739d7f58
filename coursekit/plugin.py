"""MkDocs plugin ``course``: the files a reader downloads, generated at site build.

- ``downloads/<module>/<snippet>.py``: each measured snippet as one file that runs alone, the
  course's helpers it uses inlined (coursekit/deps.py: ``standalone``);
- ``downloads/data/<hardware>/<module>/<snippet>.json``: each stored result, as stored;
- ``downloads/data/<hardware>/<module>/<snippet>/<file>``: the evidence files a result records
  (a profiler trace, a memory snapshot, compile logs, Triton IR: coursekit/evidence.py), copied
  from the store and only when changed.

They are served as files rather than embedded in pages, so a page carries only links. The
Markdown extension (coursekit/mdext.py) writes the links. Nothing is written to docs/.

It also keeps notebook pages offline. mkdocs-jupyter renders a notebook with nbconvert's ``lab``
template, whose ``mermaid_js`` macro writes into every notebook page a module script that, if
the page holds a Mermaid diagram, imports mermaid.js and its ELK layouts from
cdnjs.cloudflare.com. Neither package has a switch for it (mkdocs-jupyter fixes the template;
nbconvert reads ``HTMLExporter.mermaid_js_url`` only from the reader's Jupyter configuration).
The course's notebooks have no Mermaid diagram, so the script is dead code that names a CDN:
``on_page_content`` removes it, and fails the build when a notebook has a Mermaid diagram
(mermaid.js would then have to be self-hosted) or when the script is not in the shape it knows
(a new nbconvert: look at what it writes now).

Notebook pages are restyled as the site's own pages: nbconvert's ``lab`` template inlines
JupyterLab's stylesheets (about 0.6 MB on every notebook page, in light-theme colours only) and a
copy-button script of its own. ``on_page_content`` removes them and turns each code cell's
``<div class="highlight-ipynb"><pre>`` into Material's ``<div class="highlight"><pre><code>``, so
code takes the theme's colours in light and dark mode and Material's copy button; a few lines of
CSS (``NOTEBOOK_CSS``) lay out the cells. A notebook page also gets a link to download the
notebook (mkdocs-jupyter's ``include_source`` copies the ``.ipynb`` beside the page, and Material
draws no link to it). The module notebooks (``notebooks/mNN.ipynb``) are kept out of the search
index (their chapters hold the same code and text, and the index is fetched by every page; Material's
``data-search-exclude`` cannot exclude a cell: its parser compares elements by tag name, so the
first ``</div>`` inside ends the exclusion). A notebook whose code cells were not run (a cell
without an execution count, other than those tagged ``skip-execution``) fails the build:
scripts/notebooks.py runs them.

And it gives the ``abbr`` extension its glossary: every ``*[HBM]: High-bandwidth memory`` line of
includes/abbreviations.md, explained on hover on every page. pymdownx.snippets' ``auto_append``
would append the file to the text of every page too, but also to every code block that the tests
expand with the site's snippets settings (tests/test_codeblocks.py), where it is not Python.
"""

from __future__ import annotations

import json
import logging
import re
from html import escape
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files

from coursekit import cache
from coursekit import results as store
from coursekit.mdext import DOWNLOADS
from coursekit.notebooks import DATA_TAG

_MERMAID_LOADER = re.compile(
    r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*'
    r'const diagrams = document\.querySelectorAll\("\.jp-Mermaid > pre\.mermaid"\);.*?</script>\s*',
    re.S,
)
# What nbconvert's template adds that the site's own theme does: stylesheets, its copy buttons and
# their script, and a hidden copy of each cell's code for them.
_NOTEBOOK_CHROME = re.compile(
    r"<style\b[^>]*>.*?</style>\s*"
    r"|<script>\s*\(function \(global, factory\).*?</script>\s*"
    r"|<script>\s*document\.addEventListener\('clipboard-copy'.*?</script>\s*"
    r'|<div class="zeroclipboard-container">\s*<clipboard-copy\b.*?</clipboard-copy>\s*</div>\s*'
    r'|<div class="clipboard-copy-txt" id="cell-\d+">.*?</div>\s*',
    re.S,
)
_NOTEBOOK_CODE = re.compile(r'<div class="highlight-ipynb hl-python"><pre>(.*?)</pre></div>', re.S)
NOTEBOOK_MODULE = re.compile(r"notebooks/m\d\d\.ipynb")
NOTEBOOK_CSS = """<style>
.jupyter-wrapper .jp-InputPrompt, .jupyter-wrapper .jp-OutputPrompt, .jupyter-wrapper .jp-Collapser,
.jupyter-wrapper .anchor-link { display: none; }
.jupyter-wrapper .jp-CodeCell { margin: 0 0 1.2em; }
.jupyter-wrapper .celltoolbar { font-size: .7rem; margin-bottom: -.6em; }
.jupyter-wrapper .cell-tag { border: 1px solid var(--md-default-fg-color--lighter); border-radius: .2rem;
  padding: 0 .3em; margin-right: .3em; }
.jupyter-wrapper .jp-OutputArea-output > pre { margin: -.4em 0 0; padding: .5em .8em; overflow-x: auto;
  font-size: .8em; border-left: .2rem solid var(--md-default-fg-color--lighter); }
</style>"""
ABBREVIATIONS = store.ROOT / "includes" / "abbreviations.md"
ABBREVIATION = re.compile(r"^\*\[(?P<abbr>[^\]]+)\]:\s*(?P<title>\S.*)$")


def glossary(path: Path = ABBREVIATIONS) -> dict[str, str]:
    """``*[ABBR]: what it stands for`` lines (the abbr extension's syntax), one per line; any other
    non-blank line, or an abbreviation defined twice, is an error naming the file and line."""
    found: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("<!--"):
            continue
        m = ABBREVIATION.match(line)
        if not m:
            raise PluginError(f"{path}:{number}: not an abbreviation line `*[ABBR]: what it stands for`: {line!r}")
        if m["abbr"] in found:
            raise PluginError(f"{path}:{number}: {m['abbr']} is defined twice")
        if "{{" in line or "}}" in line:  # the abbr extension puts the text in every page's hover, unfilled
            raise PluginError(
                f"{path}:{number}: {m['abbr']}'s hover text holds a placeholder; a glossary entry is plain text "
                "(no measured number: it is shown on every page, where nothing fills it)"
            )
        found[m["abbr"]] = m["title"].strip()
    return found


class _DirtyNotice(logging.Filter):
    """MkDocs warns on every ``--dirty`` build that its navigation may be inaccurate, and this site's
    ``strict: true`` turns any warning into a failed build; the plugin gives the pages it did not
    read their titles (``CoursePlugin.on_nav``), so the notice is kept as information."""

    def filter(self, record):
        if record.levelno == logging.WARNING and record.getMessage().startswith("A 'dirty' build is being performed"):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class CoursePlugin(BasePlugin):
    def __init__(self):
        super().__init__()
        self.dirty = False
        self.titles: dict[str, str] = {}

    def on_startup(self, *, command, dirty):
        """Defined so that MkDocs keeps this plugin across ``mkdocs serve``'s rebuilds (the titles)."""
        self.dirty = dirty
        builder = logging.getLogger("mkdocs.commands.build")
        if dirty and not any(isinstance(f, _DirtyNotice) for f in builder.filters):
            builder.addFilter(_DirtyNotice())

    def on_nav(self, nav, config, files):
        """``mkdocs serve --dirty`` rebuilds only the pages saved since the last build and does not read
        the others, so the navigation and the footer of a rebuilt page would name them by nothing: they
        get the titles the last build gave them."""
        if self.dirty:
            for page in nav.pages:
                if page.title is None and page.file.src_uri in self.titles:
                    page.title = self.titles[page.file.src_uri]
        return nav

    def on_page_context(self, context, page, config, nav):
        self.titles[page.file.src_uri] = page.title
        return context

    def on_config(self, config):
        repo = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)/?", config.repo_url or "")
        if repo and config.repo_name in (None, "GitHub"):  # MkDocs names every GitHub repository "GitHub"
            config.repo_name = repo[1]
        if "abbr" in config.markdown_extensions:
            config.mdx_configs.setdefault("abbr", {})["glossary"] = glossary()
        return config

    def on_files(self, files: Files, config) -> Files:
        for path in store.snippet_files():
            key = store.snippet_key(path)
            files.append(File.generated(config, f"{DOWNLOADS}/{key}.py", content=cache.standalone(path)))
        for hw in store.hardware_sets():
            for result in sorted((store.RESULTS_DIR / hw).rglob("*.json")):
                rel = Path(result).relative_to(store.RESULTS_DIR).as_posix()
                files.append(File.generated(config, f"{DOWNLOADS}/data/{rel}", content=result.read_bytes()))
                # a result's evidence files (coursekit/evidence.py), beside it in the store and on the site;
                # copied from their place (abs_src_path), so `mkdocs serve` copies only what changed
                folder = store.evidence_dir(result)
                if not folder.is_dir():
                    continue
                for record in store.load(result).get("artifacts", []):
                    served = f"{DOWNLOADS}/data/{rel.removesuffix('.json')}/{record['name']}"
                    files.append(File.generated(config, served, abs_src_path=str(folder / record["name"])))
        return files

    def on_post_build(self, config):
        """The build's cache keeps what recent builds used (coursekit/cache.py). A dirty rebuild renders
        no notebook it did not save, and mkdocs-jupyter (whose on_post_build runs after this one)
        would then evict every other notebook's rendering from its cache: they are marked used."""
        cache.prune()
        jupyter = config.plugins.get("mkdocs-jupyter")
        if self.dirty and jupyter is not None and jupyter.config["cache"]:
            used = getattr(jupyter, "_used_cache_paths", None)
            if not isinstance(used, set):
                raise PluginError(
                    "mkdocs-jupyter no longer keeps _used_cache_paths: coursekit/plugin.py must learn how a "
                    "dirty rebuild keeps the notebooks' cache"
                )
            used.update(Path(jupyter.config["cache_dir"]).glob("*.json"))

    def on_page_markdown(self, markdown, page, config, files):
        """``{{ repo-url }}`` on a page is the configured repository (``repo_url``, ``REPO_URL`` for a
        fork), so that a clone command names the repository the site was built from."""
        if "{{ repo-url }}" in markdown:
            if not config.repo_url:
                raise PluginError(f"{page.file.src_uri} uses {{{{ repo-url }}}}, but mkdocs.yml sets no repo_url")
            markdown = markdown.replace("{{ repo-url }}", config.repo_url.rstrip("/"))
        return markdown

    def on_page_content(self, html, page, config, files):
        where = page.file.src_uri
        if not where.endswith(".ipynb"):
            return html
        if re.search(r'class="jp-Mermaid\b|<pre class="mermaid"', html):
            raise PluginError(
                f"{where} has a Mermaid diagram: nbconvert would load mermaid.js from a CDN; self-host it"
            )
        html, found = _MERMAID_LOADER.subn("", html)
        if found != 1 or re.search(r"cdnjs\.cloudflare\.com|mermaid[\w.-]*\.m?js", html):
            raise PluginError(
                f"{where}: nbconvert's Mermaid loader (an import from cdnjs) was found {found} times where one was "
                "expected, or something of it is left: coursekit/plugin.py must learn the new template"
            )
        cells = json.loads(Path(page.file.abs_src_path).read_text())["cells"]
        unrun = [
            i
            for i, cell in enumerate(cells, 1)
            if cell["cell_type"] == "code"
            and cell.get("execution_count") is None
            and "skip-execution" not in cell.get("metadata", {}).get("tags", [])
        ]
        if unrun:
            raise PluginError(
                f"{where}: code cells {unrun} were never run, so the page would show them without outputs: "
                "run `python scripts/notebooks.py` (it executes every notebook on the CPU and saves the outputs)"
            )
        html, chrome = _NOTEBOOK_CHROME.subn("", html)
        html, code = _NOTEBOOK_CODE.subn(r'<div class="highlight"><pre><code>\1</code></pre></div>', html)
        # a cell tagged DATA_TAG shows no source (mkdocs.yml's remove_input_tags) and has no output
        coded = sum(c["cell_type"] == "code" and DATA_TAG not in c.get("metadata", {}).get("tags", []) for c in cells)
        if not chrome or code != coded or re.search(r"highlight-ipynb|<clipboard-copy|<style", html):
            raise PluginError(
                f"{where}: nbconvert's stylesheets, copy buttons or code blocks are not where coursekit/plugin.py "
                f"expects them ({chrome} removed, {code} code blocks for {coded} code cells): it must learn the "
                "new template"
            )
        html = NOTEBOOK_CSS + html
        if NOTEBOOK_MODULE.fullmatch(where):
            page.meta["search"] = {**(page.meta.get("search") or {}), "exclude": True}
        name = Path(where).name
        link = (
            f'<p class="notebook-download"><a download href="{escape(name)}">Download the notebook '
            f"({escape(name)})</a> to run it in Jupyter, inside a clone of the repository or anywhere else.</p>"
        )
        title_end = html.find("</h1>")  # below the notebook's title
        if title_end < 0:
            return link + html
        return html[: title_end + 5] + link + html[title_end + 5 :]
