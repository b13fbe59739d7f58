"""An mkdocs hook (mkdocs.yml, `hooks:`): notebook pages import nothing from a CDN.

mkdocs-jupyter renders a notebook with nbconvert's `lab` template, whose `mermaid_js` macro
writes into every notebook page a module script that, if the page holds a Mermaid diagram,
imports mermaid.js and its ELK layouts from cdnjs.cloudflare.com. Neither package has a switch
for it: mkdocs-jupyter fixes the template file, and nbconvert's `HTMLExporter.mermaid_js_url`
is read only from the reader's Jupyter configuration, not from the project. The course's
notebooks have no Mermaid diagram, so the script is dead code that names a CDN, and the site
must work offline: this hook removes it. It fails the build instead when a notebook has a
Mermaid diagram (mermaid.js would then have to be self-hosted) or when the script is not found
in the shape it knows (a new nbconvert: look at what it writes now).
"""

import re

from mkdocs.exceptions import PluginError

_MERMAID_LOADER = re.compile(
    r'<script type="module">\s*document\.addEventListener\("DOMContentLoaded", async \(\) => \{\s*'
    r'const diagrams = document\.querySelectorAll\("\.jp-Mermaid > pre\.mermaid"\);.*?</script>\s*',
    re.S,
)


def on_page_content(html, page, config, files):
    where = page.file.src_uri
    if not where.endswith(".ipynb"):
        return html
    if re.search(r'class="jp-Mermaid\b|<pre class="mermaid"', html):
        raise PluginError(f"{where} has a Mermaid diagram: nbconvert would load mermaid.js from a CDN; self-host it")
    html, found = _MERMAID_LOADER.subn("", html)
    if found != 1 or re.search(r"cdnjs\.cloudflare\.com|mermaid[\w.-]*\.m?js", html):
        raise PluginError(
            f"{where}: nbconvert's Mermaid loader (an import from cdnjs) was found {found} times where one was "
            "expected, or something of it is left: coursekit/notebook_hook.py must learn the new template"
        )
    return html
