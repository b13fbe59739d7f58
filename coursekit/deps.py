"""What a snippet depends on, definition by definition: for its hash and for its download.

A snippet uses a few helpers from ``coursekit`` (``from coursekit.bench import host_us``) and
sometimes from a sibling snippet. Hashing whole files would make one new function in
``bench.py`` stale every stored result; so the hash covers the snippet's own syntax tree plus,
transitively, the syntax tree of each *definition* it uses (a function, a class, a module-level
constant, an import), and the module-level statements that run when such a module is imported.

The same walk gives the download a reader gets from the site: the snippet with each project
import replaced by the source of the definitions it uses, so that one file runs alone.

Nothing here imports torch: the site build uses it too.
"""

from __future__ import annotations

import ast
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGE = "coursekit"
# What decides how a snippet is run is part of what its result depends on (coursekit/runner.py).
RUNNER_DEFINITIONS = (
    ("coursekit.runner", "call_measure"),
    ("coursekit.runner", "snippet_env"),
    ("coursekit.runner", "main"),
)


@dataclass
class Module:
    """A parsed project module: its top-level definitions by name, and everything else."""

    name: str
    path: Path
    source: str
    tree: ast.Module
    defs: dict[str, list[ast.stmt]] = field(default_factory=dict)  # name -> the statements binding it
    always: list[ast.stmt] = field(default_factory=list)  # module-level code that runs on import
    # Memos: a module is parsed once per modification time (_parse), so what is derived from it is too.
    memo: dict = field(default_factory=dict, repr=False, compare=False)


def canonical(node) -> str:
    """A serialisation of an AST that is the same on every Python version the project meets.

    ``ast.dump`` is not: Python 3.12 added fields (``type_params``) that change its text for the
    same code. Fields that are empty or None are left out, so additions like that vanish.
    """
    if isinstance(node, ast.AST):
        parts = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            parts.append(f"{name}={canonical(value)}")
        return f"{type(node).__name__}({','.join(parts)})"
    if isinstance(node, list):
        return "[" + ",".join(canonical(v) for v in node) + "]"
    return repr(node)


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """Docstrings do not change what code measures: drop them (in place) before hashing."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    targets = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    names = []
    for t in targets:
        if not all(
            isinstance(n, ast.Name | ast.Tuple | ast.List | ast.Starred | ast.expr_context) for n in ast.walk(t)
        ):
            return []  # os.environ["X"] = ..., torch.backends.x = ...: code that runs on import, not a name
        names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def _is_main_guard(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Compare)
        and isinstance(stmt.test.left, ast.Name)
        and stmt.test.left.id == "__name__"
    )


@lru_cache(maxsize=256)
def _parse(path: Path, mtime_ns: int) -> Module:
    source = path.read_text()
    tree = strip_docstrings(ast.parse(source))
    mod = Module(name=path.stem, path=path, source=source, tree=tree)
    for stmt in tree.body:
        names = _bound_names(stmt)
        if names:
            for n in names:
                mod.defs.setdefault(n, []).append(stmt)
        elif not _is_main_guard(stmt):
            mod.always.append(stmt)  # e.g. a top-level torch setting: runs whenever the module is imported
    return mod


@lru_cache(maxsize=4096)
def _resolved(path: str, cwd: str) -> Path:
    return (Path(cwd) / path).resolve()


def parse(path: Path) -> Module:
    path = _resolved(str(path), str(Path.cwd()))
    return _parse(path, path.stat().st_mtime_ns)


def _memo(mod: Module, key: tuple, compute):
    """What compute() derives from mod, computed once per parse of it."""
    if key not in mod.memo:
        mod.memo[key] = compute()
    return mod.memo[key]


def resolve(module: str, importer: Path) -> Path | None:
    """The file of a project module: ``coursekit.x`` or a sibling of the importing snippet."""
    if module == PROJECT_PACKAGE or module.startswith(PROJECT_PACKAGE + "."):
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        return path if path.exists() else None
    sibling = Path(importer).parent / f"{module.split('.')[0]}.py"
    return sibling if "." not in module and sibling.exists() else None


def _used_names(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _attribute_uses(nodes, alias: str) -> set[str] | None:
    """Attributes read from a module alias (``b.host_us``); None if the alias is used bare."""
    attrs, bare = set(), False
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == alias:
                attrs.add(n.attr)
        names = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == alias]
        parents = [n.value for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
        bare |= any(all(p is not name for p in parents) for name in names)
    return None if bare else attrs


@dataclass(frozen=True)
class Definition:
    path: Path
    name: str  # "*" for a whole module (used bare, e.g. passed around as an object)


def _project_imports(stmts, importer: Path) -> dict[str, tuple[Path, str | None]]:
    """Local names bound by project imports in ``stmts``: name -> (module file, attribute or None)."""
    found = {}
    for stmt in stmts:
        if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            path = resolve(stmt.module, importer)
            for a in stmt.names:
                sub = resolve(f"{stmt.module}.{a.name}", importer) if stmt.module == PROJECT_PACKAGE else None
                if sub is not None:  # from coursekit import bench
                    found[a.asname or a.name] = (sub, None)
                elif path is not None:
                    found[a.asname or a.name] = (path, a.name)
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                path = resolve(a.name, importer)
                if path is not None:
                    found[a.asname or a.name.split(".")[0]] = (path, None)
    return found


def dependencies(snippet: Path, extra: tuple[tuple[str, str], ...] = RUNNER_DEFINITIONS) -> list[Definition]:
    """Every project definition the snippet uses, transitively, in a stable order."""
    snippet = Path(snippet).resolve()
    root = parse(snippet)
    seen: set[Definition] = set()
    todo: list[Definition] = []

    def uses_from(stmts, module: Module, key: str):
        """Queue what ``stmts`` (of ``module``; key: which of its definitions they are) use from the project."""
        todo.extend(_memo(module, ("uses", key, module.path == snippet), lambda: _uses(stmts, module, snippet)))

    uses_from(root.tree.body, root, "*")
    for mod_name, name in extra:
        path = resolve(mod_name, snippet)
        if path is not None:
            todo.append(Definition(path, name))
    package_init = ROOT / PROJECT_PACKAGE / "__init__.py"
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        if d.path.parent == package_init.parent and package_init.exists():
            todo.append(Definition(package_init, "*"))  # importing coursekit.x runs coursekit/__init__.py
        mod = parse(d.path)
        stmts = mod.tree.body if d.name == "*" else mod.defs.get(d.name)
        if stmts is None:
            raise ImportError(f"{d.path} defines no {d.name!r}, which a snippet imports")
        # module-level code of a module runs on import: it is part of anything taken from it
        uses_from(list(stmts) + mod.always, mod, d.name + "+always")
    return sorted(seen, key=lambda d: (str(d.path), d.name))


def _uses(stmts, module: Module, snippet: Path) -> list[Definition]:
    """The project definitions ``stmts`` (of ``module``) use directly."""
    imports = _memo(module, ("imports",), lambda: _project_imports(module.tree.body, module.path))
    found = []
    for name in _used_names(stmts) | {n for s in stmts for n in _bound_names(s)}:
        if name in imports:
            path, attr = imports[name]
            if attr is not None:
                found.append(Definition(path, attr))
            else:
                attrs = _attribute_uses(stmts, name)
                found.extend(Definition(path, a) for a in (attrs if attrs is not None else ["*"]))
        elif module.path != snippet and name in module.defs:
            found.append(Definition(module.path, name))
    return found


def module_text(path: Path) -> str:
    """The canonical AST of a whole module (docstrings left out)."""
    mod = parse(path)
    return _memo(mod, ("text", None), lambda: canonical(mod.tree))


def definition_text(d: Definition) -> str:
    """The canonical AST of one definition (and of its module's import-time code)."""
    mod = parse(d.path)
    stmts = mod.tree.body if d.name == "*" else mod.defs[d.name]
    return _memo(mod, ("text", d.name), lambda: canonical(list(stmts)) + "|" + canonical(mod.always))


@lru_cache(maxsize=4096)
def relative(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


# ---------------------------------------------------------------- the download


def _lines(mod: Module, stmt: ast.stmt) -> list[str]:
    start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return mod.source.splitlines()[start - 1 : stmt.end_lineno]


def _original_statements(path: Path) -> list[ast.stmt]:
    """Top-level statements with docstrings kept (the download shows the code as written)."""
    return ast.parse(Path(path).read_text()).body


def _is_import(s: ast.stmt) -> bool:
    return isinstance(s, ast.Import | ast.ImportFrom)


def _rewritten(s: ast.stmt, names: list) -> ast.stmt:
    """A copy of import statement ``s`` with only ``names``, written out from the tree."""
    kept = ast.copy_location(type(s)(**{**s.__dict__, "names": names}), s)
    kept.rewritten = True  # written out from the tree, not copied from the source lines
    return kept


@dataclass
class _Snippet:
    """The snippet's own file, as the download splices the inlined helpers into it."""

    path: Path
    body: list[ast.stmt]  # top-level statements, docstrings kept
    first_project: int | None  # the line of its first project import (where the helpers go)
    own_imports: set[str]  # its imports above that line, as text: the helpers need not repeat them
    own_names: set[tuple]  # (module, name, asname) those bind

    @classmethod
    def read(cls, path: Path) -> _Snippet:
        body = _original_statements(path)
        first = min((s.lineno for s in body if _is_import(s) and _project_imports([s], path)), default=None)
        above = [s for s in body if _is_import(s) and s.lineno < (first or 0)]
        names = {(getattr(s, "module", None), a.name, a.asname) for s in above for a in s.names}
        return cls(path, body, first, {ast.unparse(s) for s in above}, names)

    def import_needed(self, s: ast.stmt, used: set[str], path: Path) -> ast.stmt | None:
        """An import of a helper module as the download needs it: the names the kept code uses
        (a download passes pyflakes) that the snippet does not import already; None if nothing is left.
        A statement that imports several names keeps those the snippet lacks."""
        if _project_imports([s], path) or not set(_bound_names(s)) & used or ast.unparse(s) in self.own_imports:
            return None
        names = [a for a in s.names if (a.asname or a.name).split(".")[0] in used]
        if len(names) != len(s.names):
            s = _rewritten(s, names)
        names = [a for a in s.names if (getattr(s, "module", None), a.name, a.asname) not in self.own_names]
        if not names:
            return None
        return s if len(names) == len(s.names) else _rewritten(s, names)


def _kept(snippet: _Snippet, path: Path, names: set[str], modules: set[Path]) -> tuple[list[ast.stmt], set[Path]]:
    """What the download keeps of helper module ``path`` when the snippet uses ``names`` of it ("*":
    all): its code that binds them or runs on import, and the imports that code uses, in the file's
    own order (code between imports, such as a TRITON_INTERPRET switch before `import triton`, still
    runs before them); and which of ``modules`` that code uses (they go above it)."""
    stmts = [
        s
        for s in _original_statements(path)
        if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")
        and not _is_main_guard(s)
        and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # the docstring
    ]
    code = [
        s for s in stmts if not _is_import(s) and ("*" in names or not _bound_names(s) or set(_bound_names(s)) & names)
    ]
    used = _used_names(code)
    kept = []
    for s in stmts:
        if _is_import(s):
            s = snippet.import_needed(s, used, path)
        elif not any(s is c for c in code):
            continue
        if s is not None:
            kept.append(s)
    project = _project_imports(stmts, path)
    return kept, {project[n][0] for n in used if n in project and project[n][0] in modules}


def _dependency_order(needs: dict[Path, set[Path]]) -> list[Path]:
    """Modules in dependency order (what a module's code uses is defined above it), then by name."""
    order: list[Path] = []

    def visit(path: Path, trail: tuple = ()):
        if path in order or path in trail:
            return
        for dep in sorted(needs[path]):
            visit(dep, (*trail, path))
        order.append(path)

    for path in sorted(needs):
        visit(path)
    return order


def _inlined_lines(order: list[Path], kept: dict[Path, list[ast.stmt]]) -> list[str]:
    """The helper modules' kept code as lines, each module under a comment naming it; an import
    already written above is not written again."""
    inlined: list[str] = []
    emitted: set[str] = set()
    for path in order:
        mod = parse(path)
        text = []
        for s in kept[path]:
            if _is_import(s):
                if ast.unparse(s) in emitted:
                    continue
                emitted.add(ast.unparse(s))
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                text += ["", ""]  # two blank lines around a definition, as PEP 8 has it
            text += [ast.unparse(s)] if getattr(s, "rewritten", False) else _lines(mod, s)
        if any(line.strip() for line in text):
            inlined.append(
                f"# ---- {relative(path)}, inlined: the course's helpers this file uses, so that it runs alone"
            )
            inlined += text + ["", ""]
    return inlined


def standalone(snippet: Path) -> str:
    """The snippet as one file that runs alone: project imports replaced by what they import.

    Each module's definitions come in their own order, after the modules they use and after the
    imports they need (only those, and none the snippet already has); section markers for the
    site (``# --8<--``) are dropped.
    """
    snippet = Path(snippet).resolve()
    by_module: dict[Path, set[str]] = {}
    for d in dependencies(snippet, extra=()):
        if d.path != snippet:
            by_module.setdefault(d.path, set()).add(d.name)
    own = _Snippet.read(snippet)
    kept: dict[Path, list[ast.stmt]] = {}
    needs: dict[Path, set[Path]] = {}
    for path, names in by_module.items():
        kept[path], needs[path] = _kept(own, path, names, set(by_module))
    order = _dependency_order(needs)
    inlined = _renamed(_inlined_lines(order, kept), _clashes(own.body, [s for p in order for s in kept[p]]))
    project_lines = {
        i
        for s in own.body
        if _is_import(s) and _project_imports([s], snippet)
        for i in range(s.lineno, s.end_lineno + 1)
    }
    out = []
    for i, line in enumerate(snippet.read_text().splitlines(), 1):
        if i == own.first_project:
            out += inlined + ["# ---- the snippet", ""]
        if i not in project_lines:
            out.append(line)
    return "\n".join(ln for ln in out if not ln.lstrip().startswith("# --8<--")) + "\n"


def _clashes(snippet_body: list[ast.stmt], inlined: list[ast.stmt]) -> set[str]:
    """Names the snippet defines that inlined helper code defines too: inlined above the snippet, the
    helpers would otherwise call the snippet's definition, not their own."""

    def defined(stmts):
        return {n for s in stmts if not isinstance(s, ast.Import | ast.ImportFrom) for n in _bound_names(s)}

    return defined(snippet_body) & defined(inlined)


def _renamed(lines: list[str], names: set[str]) -> list[str]:
    """``lines`` with every NAME token in ``names`` renamed ``_course_<name>`` (strings and comments
    untouched)."""
    if not names:
        return lines
    import io
    import tokenize

    text = "\n".join(lines) + "\n"
    spots = [
        (t.start, t.string)
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.NAME and t.string in names
    ]
    out = list(lines)
    for (row, col), name in sorted(spots, reverse=True):
        line = out[row - 1]
        out[row - 1] = line[:col] + "_course_" + name + line[col + len(name) :]
    return out


def cut(path: Path, names: list[str]) -> str:
    """The definitions ``names`` of the module at ``path`` and everything of that module they use,
    in the file's order, as one file that runs alone (the course's helpers they import inlined, as
    in a download): what a notebook carries of a figures.py or of coursekit/figdata.py. The
    module's docstring and ``from __future__`` imports are left out. KeyError names what the
    module does not define."""
    path = Path(path)
    source = path.read_text()
    body = [
        s
        for s in ast.parse(source).body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # the docstring
        and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")
    ]
    defs: dict[str, list[ast.stmt]] = {}
    for s in body:
        for name in _bound_names(s):
            defs.setdefault(name, []).append(s)
    missing = [n for n in names if n not in defs]
    if missing:
        raise KeyError(f"{path} defines no {', '.join(missing)}")
    keep: list[ast.stmt] = []
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for s in defs.get(name, []):
            if s not in keep:
                keep.append(s)
                todo += [n for n in _used_names([s]) if n in defs]
    lines = source.splitlines()
    text: list[str] = []
    for s in sorted(keep, key=lambda s: s.lineno):
        if isinstance(s, ast.Import | ast.ImportFrom):
            s = ast.copy_location(
                type(s)(**{**s.__dict__, "names": [a for a in s.names if (a.asname or a.name).split(".")[0] in seen]}),
                s,
            )
            text.append(ast.unparse(s))
            continue
        if text and text[-1].startswith(("import ", "from ")):
            text.append("")
        start = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
        if isinstance(s, ast.FunctionDef | ast.ClassDef):
            text += ["", ""]
        text += lines[start - 1 : s.end_lineno]
    with tempfile.TemporaryDirectory() as tmp:  # standalone() inlines the helpers a file imports
        pruned = Path(tmp) / path.name
        pruned.write_text("\n".join(text).strip("\n") + "\n")
        return standalone(pruned).strip("\n")
