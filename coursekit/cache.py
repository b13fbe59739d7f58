"""A disk cache for site-build work that does not change between builds, keyed by content.

Entries live under ``.cache/course/<kind>/`` (git-ignored; ``COURSE_CACHE_DIR`` moves them,
``COURSE_CACHE=0`` turns the cache off). A key is a SHA-256 over what the work reads: file
contents (never modification times, so a checkout or a copy keeps its hits), the code that does
the work, and the arguments. What an entry depends on but could not know beforehand (the results
a ``figures.py`` function read, the keys it listed) is stored with the entry and checked again on
a hit; anything that differs is a miss, and the work runs again. Errors are never cached.

Used for: a filled page (coursekit/page/pagecache.py), a ``figures.py`` call (a figure's JSON or a
computed value, per hardware set and process: coursekit/page/figures.py) and a snippet's download
(coursekit/deps.py's ``standalone``, which the plugin writes and the chapter box reads).
mkdocs-jupyter keeps its own cache of the rendered notebooks, keyed by each notebook's content, in
``.cache/mkdocs-jupyter/``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = "1"  # bump when an entry's shape changes

_HASHES: dict[str, tuple[tuple[int, int], str]] = {}


def enabled() -> bool:
    return os.environ.get("COURSE_CACHE", "1") != "0"


def directory() -> Path:
    return Path(os.environ.get("COURSE_CACHE_DIR") or ROOT / ".cache" / "course")


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes ("" where there is no file), computed once while it is unchanged."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except OSError:
        return ""
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _HASHES.get(name)
    if hit and hit[0] == stamp:
        return hit[1]
    digest = hashlib.sha256(Path(name).read_bytes()).hexdigest()
    _HASHES[name] = (stamp, digest)
    return digest


def tree_hash(*folders: Path, pattern: str = "*.py") -> str:
    """One hash over every file matching ``pattern`` directly in each folder (name and content)."""
    h = hashlib.sha256()
    for folder in folders:
        for p in sorted(Path(folder).glob(pattern)):
            h.update(p.name.encode() + b"\0" + file_hash(p).encode() + b"\0")
    return h.hexdigest()


def key(*parts) -> str:
    """A cache key over plain values (strings, numbers, tuples of them)."""
    return hashlib.sha256(repr((VERSION, parts)).encode()).hexdigest()


def get(kind: str, k: str):
    """The entry stored under ``k``, or None (no entry, cache off, or an unreadable entry)."""
    if not enabled():
        return None
    path = directory() / kind / f"{k}.pickle"
    try:
        value = pickle.loads(path.read_bytes())
        os.utime(path)  # used: prune() keeps it
        return value
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        return None


def put(kind: str, k: str, value) -> None:
    """Store ``value`` under ``k`` (a temporary file, then a rename: a reader never sees half)."""
    if not enabled():
        return
    folder = directory() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"{k}.pickle")
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # a read-only checkout builds uncached; a value pickle cannot store is not kept


def standalone(snippet: Path) -> str:
    """coursekit/deps.py's ``standalone(snippet)`` (the snippet's download), cached: it depends on the
    snippet, its sibling files and the course's helpers (coursekit/*.py), and only on those."""
    from coursekit import deps

    snippet = Path(snippet).resolve()
    k = key("standalone", snippet.name, file_hash(snippet), tree_hash(snippet.parent, ROOT / "coursekit"))
    text = get("standalone", k)
    if not isinstance(text, str):
        text = deps.standalone(snippet)
        put("standalone", k, text)
    return text


KEEP_DAYS = 14


def prune(days: float = KEEP_DAYS) -> int:
    """Remove entries no build has used for ``days`` (every hit and write renews an entry): the
    cache holds what recent builds used, not every version of every page. Returns how many went."""
    import time

    cutoff, gone = time.time() - days * 86400, 0
    for path in directory().glob("*/*.pickle") if enabled() else []:
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                gone += 1
        except OSError:
            continue
    return gone
