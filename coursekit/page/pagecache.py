"""A filled page, kept: the preprocessor's output lines and the HTML it stashed, keyed by content.

A page's placeholders depend on its own text (after snippet expansion), where it sits (its file and
URL), the hardware set, and the world it reads: every stored result, every ``figures.py`` and shared
module beside the snippets, the course's code, includes/ (chapters.yml) and the notebooks a chapter
box links; plus the other pages a ``{{ reading-time }}`` or a chapter box reads, recorded while the
page is filled and checked again on a hit. All are hashed by content (coursekit/cache.py), so a
one-word edit of one page refills that page only, and a build in a fresh process reuses the rest
from ``.cache/course/pages/``. A page whose conversion had stashed HTML before the preprocessor ran is
not cached (its stash numbers would not replay).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from coursekit import cache

_MEMORY: dict[str, dict] = {}
_TITLES: dict[str, tuple[tuple[int, int], str]] = {}


def _title(path: Path) -> str:
    """A chapter page's title (what a chapter box shows of the other chapters), read once while unchanged."""
    from coursekit import chapters

    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _TITLES.get(str(path))
    if not hit or hit[0] != stamp:
        hit = _TITLES[str(path)] = (stamp, chapters.title_of(path))
    return hit[1]


def world(results_dir: Path, snippets_dir: Path, docs_dir: Path) -> str:
    """One hash over everything a page's placeholders can read besides pages."""
    h = hashlib.sha256()
    root = Path(cache.__file__).parent
    folders = [
        (Path(results_dir), "**/*.json"),
        (Path(snippets_dir), "*/figures.py"),
        (Path(snippets_dir), "*.py"),
        (Path(snippets_dir), "*/*.py"),  # the snippets themselves: the chapter box lists and links them
        (root, "*.py"),
        (root / "page", "*.py"),
        (root.parent / "includes", "*"),
        (Path(docs_dir), "**/*.ipynb"),
    ]
    for folder, pattern in folders:
        for p in sorted(folder.glob(pattern)):
            h.update(f"{p.relative_to(folder)}\0{cache.file_hash(p)}\0".encode())
    for p in sorted(Path(docs_dir).glob("part-*/*.md")):  # the chapters: their names and titles
        h.update(f"{p.relative_to(docs_dir)}\0{_title(p)}\0".encode())
    return h.hexdigest()


def key(lines: list[str], where: tuple, world_hash: str) -> str:
    return cache.key("page", hashlib.sha256("\n".join(lines).encode()).hexdigest(), where, world_hash)


def replay(k: str, md) -> list[str] | None:
    """The page's output, its stashed HTML stored again, if kept and every page it read is unchanged."""
    entry = _MEMORY.get(k) or cache.get("pages", k)
    if not entry or md.htmlStash.html_counter != 0:
        return None
    if any(cache.file_hash(p) != digest for p, digest in entry["reads"]):
        return None
    _MEMORY[k] = entry
    for html_text in entry["stash"]:
        md.htmlStash.store(html_text)
    return list(entry["lines"])


def keep(k: str, md, lines: list[str], reads: set, start: int) -> None:
    """Keep a page's output (``reads``: the pages it read; ``start``: the stash's count before it)."""
    if start != 0 or len(md.htmlStash.rawHtmlBlocks) != md.htmlStash.html_counter:
        return  # something else stashed first: its numbers would not replay
    entry = {
        "lines": list(lines),
        "stash": list(md.htmlStash.rawHtmlBlocks),
        "reads": sorted((str(p), cache.file_hash(p)) for p in reads),
    }
    _MEMORY[k] = entry
    cache.put("pages", k, entry)
