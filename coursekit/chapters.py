"""The modules as a whole: which page is which module, what each builds on, what it runs, what
that needs, and the GPU time its stored results took.

Read by the chapter box at the top of every chapter (``{{ chapter-box }}`` in coursekit/mdext.py),
by the table and the total on the "Run it yourself" page, and by scripts/notebooks.py. Every
number comes from stored results: a result's GPU seconds are its provenance's ``duration_s`` (the
sum of its processes' wall times) times the GPUs its worker held (``gpu_count``), as the build
job's summary counts them. Torch-free, like the rest of the site build.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from coursekit import cache
from coursekit import results as store

ROOT = store.ROOT
PAGE = re.compile(r"part-[a-z]/(?P<num>\d\d)-[a-z0-9-]+\.md")


class ChapterError(ValueError):
    """Bad or missing data about a chapter: the build stops with this message."""


@dataclass(frozen=True)
class Chapter:
    module: str  # "m02"
    page: str  # "part-j/02-eager-per-op.md", relative to docs/
    title: str  # the page's H1: "02 · What eager mode actually does per op"
    prerequisites: tuple[str, ...]
    notebook: str  # "notebooks/m02.ipynb", relative to docs/


def module_of(page: str) -> str | None:
    """``part-j/02-eager-per-op.md`` -> ``m02``; None for a page that is no chapter."""
    m = PAGE.fullmatch(str(page))
    return f"m{m['num']}" if m else None


def title_of(path: Path) -> str:
    for line in Path(path).read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise ChapterError(f"{path} has no '# ' title on a line of its own")


def chapters(docs_dir: Path = ROOT / "docs", chapters_file: Path | None = None) -> dict[str, Chapter]:
    """Every chapter page under docs/, each with its line of ``chapters_file`` (by default
    includes/chapters.yml beside docs/), checked: every chapter has a line, every line a chapter,
    and prerequisites are earlier modules, once each."""
    docs_dir = Path(docs_dir)
    chapters_file = Path(chapters_file) if chapters_file else docs_dir.parent / "includes" / "chapters.yml"
    pages = {}
    for path in sorted(docs_dir.glob("part-*/*.md")):
        rel = path.relative_to(docs_dir).as_posix()
        module = module_of(rel)
        if module is None:
            continue
        if module in pages:
            raise ChapterError(f"{docs_dir}: two chapter pages for module {module}: {pages[module]} and {rel}")
        pages[module] = rel
    if not chapters_file.exists():
        raise ChapterError(f"no {chapters_file}: it lists what each module builds on, one line per module")
    text = chapters_file.read_text()
    lines = {m[1]: i for i, line in enumerate(text.splitlines(), 1) if (m := re.match(r"(\w+)\s*:", line))}

    def where(module: str) -> str:
        return f"{chapters_file}:{lines.get(module, '?')}"

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ChapterError(f"{chapters_file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ChapterError(f"{chapters_file}: expected one line per module, `m02: [m01]`")
    out = {}
    for module, prereqs in data.items():
        if module not in pages:
            raise ChapterError(f"{where(module)}: {module!r} has no chapter page docs/part-*/{module[1:]}-*.md")
        if not isinstance(prereqs, list) or not all(isinstance(p, str) for p in prereqs):
            raise ChapterError(f"{where(module)}: {module}'s prerequisites must be a list of modules, `[m01, m03]`")
        for p in prereqs:
            if p not in pages:
                raise ChapterError(f"{where(module)}: {module} builds on {p!r}, which is no module")
            if p >= module:
                raise ChapterError(f"{where(module)}: {module} builds on {p}, which is not an earlier module")
        if len(set(prereqs)) != len(prereqs):
            raise ChapterError(f"{where(module)}: {module} names a prerequisite twice")
        out[module] = Chapter(
            module=module,
            page=pages[module],
            title=title_of(docs_dir / pages[module]),
            prerequisites=tuple(prereqs),
            notebook=f"notebooks/{module}.ipynb",
        )
    missing = sorted(set(pages) - set(out))
    if missing:
        raise ChapterError(
            f"{chapters_file} has no line for {', '.join(missing)} ({', '.join(pages[m] for m in missing)}): "
            "add `mNN: [earlier modules it builds on]`"
        )
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- what a module runs


def snippet_keys(module: str, snippets_dir: Path = store.SNIPPETS_DIR) -> list[str]:
    """The module's measured snippets (``m02/crossover``, ...), as the build job runs them."""
    return [store.snippet_key(p) for p in store.snippet_files(snippets_dir) if p.parent.name == module]


def pending(results_dir: Path = store.RESULTS_DIR) -> set[str]:
    """Snippets written but not yet measured (build_results/pending.txt)."""
    path = Path(results_dir) / "pending.txt"
    if not path.exists():
        return set()
    return {ln.split()[0] for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")}


def gpu_seconds(doc: dict) -> float:
    """A stored result's GPU seconds: its processes' wall time times the GPUs its worker held."""
    prov = doc["provenance"]
    return float(prov["duration_s"]) * int(prov.get("gpu_count") or 1)


@dataclass(frozen=True)
class Spent:
    seconds: float  # GPU seconds, summed
    results: tuple[str, ...]  # the keys summed
    processes: int  # the processes they ran in, summed
    gpus: int  # the most GPUs one of them held
    dates: tuple[str, str]  # first and last measurement date
    provenance: dict  # one of them, for the hardware and versions


def spent(keys: list[str], hardware: str = store.REFERENCE_HARDWARE, results_dir: Path = store.RESULTS_DIR) -> Spent:
    """The GPU time the stored results of ``keys`` took on ``hardware``. A snippet without a result
    is an error unless build_results/pending.txt names it (then it is left out)."""
    waiting = pending(results_dir)
    docs = []
    for key in keys:
        path = store.result_path(key, hardware, results_dir)
        if not path.exists():
            if key in waiting:
                continue
            raise ChapterError(
                f"{key} has no stored result in {path.parent.parent}: run "
                f"`python scripts/build_results.py --only {key}` on a GPU, or list it in build_results/pending.txt"
            )
        try:
            docs.append(store.load(path))
        except store.ResultError as exc:
            raise ChapterError(str(exc)) from None
    if not docs:
        raise ChapterError(f"no stored result of {', '.join(keys) or 'any snippet'} on {hardware}")
    dates = sorted(str(d["provenance"]["date"])[:10] for d in docs)
    return Spent(
        seconds=sum(gpu_seconds(d) for d in docs),
        results=tuple(d["key"] for d in docs),
        processes=sum(int(d["provenance"].get("processes", 1)) for d in docs),
        gpus=max(int(d["provenance"].get("gpu_count") or 1) for d in docs),
        dates=(dates[0], dates[-1]),
        provenance=docs[0]["provenance"],
    )


# ---------------------------------------------------------------- what a module needs


def _imports(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Top-level package names imported, split into (required, optional): an import inside a
    ``try`` is optional (the snippet runs without it, as module 12 does without FlashInfer)."""
    required, optional = set(), set()

    def visit(node, in_try: bool):
        for child in ast.iter_child_nodes(node):
            names = []
            if isinstance(child, ast.Import):
                names = [a.name.split(".")[0] for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module.split(".")[0]]
            (optional if in_try else required).update(names)
            visit(child, in_try or isinstance(child, ast.Try))

    visit(tree, False)
    return required, optional - required


@lru_cache(maxsize=64)
def _download_imports(path: Path, mtime_ns: int) -> tuple[frozenset, frozenset]:
    required, optional = _imports(ast.parse(cache.standalone(path)))
    return frozenset(required), frozenset(optional)


def third_party(names) -> list[str]:
    return sorted(n for n in names if n not in sys.stdlib_module_names and n != "__future__")


def requirements(module: str, snippets_dir: Path = store.SNIPPETS_DIR) -> tuple[list[str], list[str]]:
    """The packages the module's snippet downloads import (the course's helpers and sibling files
    inlined, as a reader gets them): (required, optional)."""
    required, optional = set(), set()
    for path in store.snippet_files(snippets_dir):
        if path.parent.name != module:
            continue
        path = path.resolve()
        r, o = _download_imports(path, path.stat().st_mtime_ns)
        required |= r
        optional |= o
    return third_party(required), third_party(optional - required)
