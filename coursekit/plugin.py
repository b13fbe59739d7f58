"""MkDocs plugin ``course``: the files a reader downloads, generated at site build.

- ``downloads/<module>/<snippet>.py``: each measured snippet as one file that runs alone, the
  course's helpers it uses inlined (coursekit/deps.py: ``standalone``);
- ``downloads/data/<hardware>/<module>/<snippet>.json``: each stored result, as stored.

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
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files

from coursekit import deps
from coursekit import results as store
from coursekit.mdext import DOWNLOADS

_MERMAID_LOADER = re.compile(
    r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*'
    r'const diagrams = document\.querySelectorAll\("\.jp-Mermaid > pre\.mermaid"\);.*?</script>\s*',
    re.S,
)


class CoursePlugin(BasePlugin):
    def on_files(self, files: Files, config) -> Files:
        for path in store.snippet_files():
            key = store.snippet_key(path)
            files.append(File.generated(config, f"{DOWNLOADS}/{key}.py", content=deps.standalone(path)))
        for hw in store.hardware_sets():
            for result in sorted((store.RESULTS_DIR / hw).rglob("*.json")):
                rel = Path(result).relative_to(store.RESULTS_DIR).as_posix()
                files.append(File.generated(config, f"{DOWNLOADS}/data/{rel}", content=result.read_bytes()))
        return files

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
        return html
