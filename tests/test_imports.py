"""coursekit's modules import one another without a circle (results.py and scoreboard.py once did).

Every import counts, a function's own included: an import moved into a function hides a circle from
Python at import time, not from the reader who has to understand the two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (under ``root``) → the modules of ``package`` it imports anywhere."""
    paths = {module_name(root, p): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in paths}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{base}.{alias.name}" in paths:
                        found.add(f"{base}.{alias.name}")
                    elif base in paths:
                        found.add(base)
        found.discard(name)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk meets, each as the modules along it, first one repeated at the end."""
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    found: list[list[str]] = []

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt) :] + [nxt])
            elif not state.get(nxt):
                walk(nxt, path)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if not state.get(module):
            walk(module, [])
    return found


def test_the_check_finds_a_circle_through_a_function_level_and_a_relative_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "results.py").write_text("from pkg.sub import scoreboard\n")
    (pkg / "sub" / "scoreboard.py").write_text("def f():\n    from .. import results\n    return results\n")
    (pkg / "alone.py").write_text("import pkg.results\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.alone"] == {"pkg.results"}
    assert cycles(graph) == [["pkg.results", "pkg.sub.scoreboard", "pkg.results"]]


def test_coursekit_imports_without_a_circle():
    graph = import_graph(ROOT, "coursekit")
    assert {"coursekit.results", "coursekit.scoreboard", "coursekit.page.grammar"} <= graph.keys()
    assert "coursekit.results" in graph["coursekit.scoreboard"] or "coursekit.scoreboard" in graph["coursekit.results"]
    assert cycles(graph) == [], " ; ".join(" → ".join(c) for c in cycles(graph))
