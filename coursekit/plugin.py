"""MkDocs plugin ``course``: the files a reader downloads, generated at site build.

- ``downloads/<module>/<snippet>.py``: each measured snippet as one file that runs alone, the
  course's helpers it uses inlined (coursekit/deps.py: ``standalone``);
- ``downloads/data/<hardware>/<module>/<snippet>.json``: each stored result, as stored.

They are served as files rather than embedded in pages, so a page carries only links. The
Markdown extension (coursekit/mdext.py) writes the links. Nothing is written to docs/.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files

from coursekit import deps
from coursekit import results as store
from coursekit.mdext import DOWNLOADS


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
