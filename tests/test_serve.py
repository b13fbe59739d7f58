"""`mkdocs serve --dirty`, the writer's edit loop (README): a save rebuilds the saved page alone, and
that page is the page a full build writes, its navigation included."""

from __future__ import annotations

import json
import os

from mkdocs.commands.build import build
from mkdocs.config import load_config

PAGES = {
    "index.md": "# Home page\n\nText.\n",
    "alpha.md": "# Alpha chapter\n\nOne word.\n",
    "beta.md": "# Beta chapter\n",
}


def site(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    cell = {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# A notebook"]}
    (docs / "nb.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\ntheme: mkdocs\nnav: [index.md, alpha.md, beta.md, nb.ipynb]\nplugins:\n  - course\n"
        f"  - mkdocs-jupyter: {{include: ['*.ipynb'], cache_dir: '{tmp_path / 'nbcache'}'}}\n"
    )
    return tmp_path


def serve_build(root, *, first: bool):
    config = load_config(config_file=str(root / "mkdocs.yml"), site_dir=str(root / "site"), strict=True)
    if first:
        config.plugins.on_startup(command="serve", dirty=True)
    build(config, dirty=True)


def test_a_dirty_rebuild_writes_the_saved_page_alone_and_names_the_pages_it_did_not_read(tmp_path):
    root = site(tmp_path)
    serve_build(root, first=True)
    full = (root / "site" / "alpha" / "index.html").read_text()
    assert "Beta chapter" in full and "One word." in full
    (root / "docs" / "alpha.md").write_text(PAGES["alpha.md"].replace("One word", "A word"))
    os.utime(root / "site" / "alpha" / "index.html", (0, 0))  # the save is newer than its page
    beta = root / "site" / "beta" / "index.html"
    os.utime(beta, (1e9, 1e9))
    os.utime(root / "docs" / "beta.md", (1e9 - 10, 1e9 - 10))
    serve_build(root, first=False)
    rebuilt = (root / "site" / "alpha" / "index.html").read_text()
    assert os.path.getmtime(beta) == 1e9, "a page that was not saved was rebuilt"
    assert rebuilt == full.replace("One word", "A word")
    assert len(list((root / "nbcache").glob("*.json"))) == 1, "the notebook's rendering was dropped from its cache"
