"""The results store: build_results/<hardware>/<module>/<snippet>.json.

One JSON file per snippet and hardware. Its layout (``SCHEMA_VERSION`` 1):

    {
      "schema_version": 1,
      "key": "m02/host_overhead",               # <module folder>/<snippet stem>
      "snippet": "snippets/m02/host_overhead.py",
      "snippet_hash": "sha256 of the snippet's AST and its local imports",
      "hardware": "nvidia-h200",
      "provenance": {gpu, driver, cuda, torch, triton, python, cpu, date, commit,
                     repetitions, duration_s, ...},
      "data": {... whatever the snippet's measure() returned; timings are bench.summarize dicts}
    }

Nothing here imports torch: the site build reads results on machines without it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS_DIR = ROOT / "snippets"
RESULTS_DIR = ROOT / "build_results"
REFERENCE_HARDWARE = "nvidia-h200"
SCHEMA_VERSION = 1

PROVENANCE_FIELDS = (
    "gpu",
    "driver",
    "cuda",
    "torch",
    "triton",
    "python",
    "cpu",
    "date",
    "commit",
    "repetitions",
    "duration_s",
)
# Project modules whose code changes what a snippet measures, so they are part of its hash.
HASHED_PROJECT_MODULES = {"coursekit.bench": ROOT / "coursekit" / "bench.py"}


class ResultError(ValueError):
    """A results file or a snippet's data that does not satisfy the schema."""


# ---------------------------------------------------------------- snippets and hashes


def snippet_files(snippets_dir: Path = SNIPPETS_DIR) -> list[Path]:
    """Every measured snippet: snippets/<module>/<name>.py, except figures.py and _private.py."""
    return sorted(p for p in Path(snippets_dir).glob("*/*.py") if p.name != "figures.py" and not p.name.startswith("_"))


def snippet_key(path: Path) -> str:
    path = Path(path)
    return f"{path.parent.name}/{path.stem}"


def _canonical(node) -> str:
    """A serialisation of an AST that is the same on every Python version the project meets.

    ``ast.dump`` is not: Python 3.12 added fields (``type_params``) that change its text for
    the same code. Fields that are empty or None are left out, so additions like that vanish.
    """
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or value == []:
                continue
            fields.append(f"{name}={_canonical(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(v) for v in node) + "]"
    return repr(node)


def _normalized_ast(source: str) -> str:
    """The AST without docstrings: comments, formatting and docstrings do not change the hash."""
    tree = ast.parse(source)
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
    return _canonical(tree)


def _direct_imports(path: Path, source: str) -> set[Path]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from coursekit.bench import x` and `from coursekit import bench` both count
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name in HASHED_PROJECT_MODULES:
                found.add(HASHED_PROJECT_MODULES[name])
            sibling = path.parent / f"{name.split('.')[0]}.py"
            if sibling.exists():
                found.add(sibling)
    return found


def _local_imports(path: Path, source: str) -> list[Path]:
    """Sibling modules and hashed project modules the snippet imports, followed transitively."""
    seen: set[Path] = set()
    todo = _direct_imports(path, source)
    while todo:
        dep = todo.pop()
        if dep in seen or dep == path:
            continue
        seen.add(dep)
        todo |= _direct_imports(dep, dep.read_text())
    return sorted(seen)


def snippet_hash(path: Path) -> str:
    path = Path(path)
    source = path.read_text()
    digest = hashlib.sha256(_normalized_ast(source).encode())
    for dep in _local_imports(path, source):
        digest.update(dep.name.encode())
        digest.update(_normalized_ast(dep.read_text()).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- validation


def check_finite(value, where: str = "data") -> None:
    """Every number is finite and every key a string: what JSON and the site can use."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ResultError(f"{where} is {value!r}, not a finite number")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ResultError(f"{where} has a non-string key {k!r}")
            check_finite(v, f"{where}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]")
        return
    raise ResultError(f"{where} is a {type(value).__name__}, which JSON cannot store")


def _summaries(value):
    if isinstance(value, dict):
        if {"median", "p10", "p90", "n"} <= value.keys():
            yield value
        for v in value.values():
            yield from _summaries(v)
    elif isinstance(value, list):
        for v in value:
            yield from _summaries(v)


def check_data(data) -> None:
    """What a snippet's measure() must return: plain data, repetitions, at least one spread."""
    if not isinstance(data, dict):
        raise ResultError(f"measure() returned a {type(data).__name__}, not a dict")
    check_finite(data)
    reps = data.get("repetitions")
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise ResultError("data.repetitions must be a positive integer (how many timed repetitions)")
    summaries = list(_summaries(data))
    if not summaries:
        raise ResultError("data holds no timing summary (median/p10/p90/n): record the spread")
    for s in summaries:
        if not s["p10"] <= s["median"] <= s["p90"]:
            raise ResultError(f"a summary's percentiles are out of order: {s}")


def validate(doc, where: str = "result") -> None:
    """Raise ResultError, naming ``where``, if ``doc`` is not a complete result."""
    if not isinstance(doc, dict):
        raise ResultError(f"{where}: not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultError(f"{where}: schema_version is {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    for field in ("key", "snippet", "snippet_hash", "hardware", "provenance", "data"):
        if field not in doc:
            raise ResultError(f"{where}: missing field {field!r}")
    prov = doc["provenance"]
    if not isinstance(prov, dict):
        raise ResultError(f"{where}: provenance is not an object")
    missing = [f for f in PROVENANCE_FIELDS if prov.get(f) in (None, "")]
    if missing:
        raise ResultError(f"{where}: provenance lacks {', '.join(missing)}")
    try:
        check_data(doc["data"])
    except ResultError as exc:
        raise ResultError(f"{where}: {exc}") from None


# ---------------------------------------------------------------- reading and writing


def result_path(key: str, hardware: str, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / hardware / f"{key}.json"


def load(path: Path) -> dict:
    """Read and validate one results file; errors name the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON ({exc})") from None
    validate(doc, str(path))
    return doc


def write_atomic(path: Path, doc: dict) -> None:
    """Validate, then write through a temporary file and a rename: a reader never sees half a file."""
    validate(doc, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by anyone
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def hardware_sets(results_dir: Path = RESULTS_DIR) -> list[str]:
    return sorted(p.name for p in Path(results_dir).iterdir() if p.is_dir()) if Path(results_dir).is_dir() else []


@dataclass
class Lookup:
    """A value found in a result, with the document it came from."""

    value: object
    doc: dict
    path: Path


def lookup(key: str, field: str, hardware: str, results_dir: Path = RESULTS_DIR) -> Lookup:
    """``data.<field>`` of result ``key``; a dotted path, list indices as numbers."""
    path = result_path(key, hardware, results_dir)
    if not path.exists():
        raise KeyError(f"no result {key!r} for hardware {hardware!r} (expected {path})")
    doc = load(path)
    return Lookup(walk(doc["data"], field, f"{key}: ", str(path)), doc, path)


def walk(node, field: str, prefix: str = "", where: str = "the data"):
    """Follow a dotted path (list indices as numbers) into nested dicts and lists."""
    for part in field.split(".") if field else []:
        if isinstance(node, list) and part.lstrip("-").isdigit():
            idx = int(part)
            if not -len(node) <= idx < len(node):
                raise KeyError(f"{prefix}index {part} out of range in {field!r}")
            node = node[idx]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"{prefix}no field {field!r} in {where}")
    return node
