"""coursekit: the course site's machinery.

- bench:   the one timing helper the snippets use
- results: the results store (schema, snippet hashes, atomic writes, look-ups)
- runner:  runs one snippet in a fresh process (used by build)
- build:   the GPU build job (scripts/build_results.py)
- mdext:   the Markdown extension that puts measured numbers and figures into pages
"""
