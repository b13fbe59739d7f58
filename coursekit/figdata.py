"""What a figure function receives: one interface for the page and the notebook (torch-free).

A function of ``snippets/<module>/figures.py`` (a figure, or a value computed for the prose) takes
one argument, ``results``, an instance of :class:`Results`:

    results(key)                         the data of result ``key`` on the set being drawn
    results(key, hardware="nvidia-h200-rerun", process=2)
                                         another set's result, another process's data (1-based)
    results.processes(key, hardware=None)  how many processes the result was measured in
    results.keys(hardware=None)          every result key the set holds
    results.hardware_sets()              every set
    results.forget(key)                  a result read only to look at: not carried, not listed

Where the results come from is a *source*: :class:`Store` reads ``build_results/`` (the site, the
tests, the notebook generator); :class:`Embedded` holds the documents a notebook carries in a cell,
so a downloaded notebook needs neither the repository nor the network. The page
(``coursekit/mdext.py``) and the notebooks (``coursekit/notebooks.py``, which inlines ``Results``
and ``Embedded`` into each notebook) both call :func:`arguments`, so a figure that draws on the page
draws in the notebook from the same data.

A result the drawn set lacks is read from the reference set instead (a set that measured only
some snippets); ``Results.used`` records every document read, keyed ``key`` (the drawn set, or the
reference standing in for it) or ``key (hardware)`` (a set the function named).
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

from coursekit import results as store

REFERENCE = store.REFERENCE_HARDWARE


class Embedded:
    """Stored results carried with a notebook: ``{hardware: {key: document}}`` plus, for a set whose
    keys a figure listed, ``{"keys": {hardware: [key, ...]}}``."""

    def __init__(self, docs: dict, keys: dict | None = None):
        self.docs, self.listed = docs, keys or {}

    def doc(self, key: str, hardware: str) -> dict:
        try:
            return self.docs[hardware][key]
        except KeyError:
            raise KeyError(f"no result {key!r} for hardware {hardware!r} in the data this notebook carries") from None

    def has(self, key: str, hardware: str) -> bool:
        return key in self.docs.get(hardware, {})

    def keys(self, hardware: str) -> list[str]:
        return sorted(self.listed.get(hardware, self.docs.get(hardware, {})))

    def sets(self) -> list[str]:
        return sorted(self.docs)


class Results:
    """The argument of every figures.py function: see the module's docstring.

    ``source`` has ``doc(key, hardware)`` (raising KeyError where there is none), ``has``, ``keys``
    and ``sets``; ``run`` is the process (0-based) whose data a result gives unless one is named."""

    def __init__(self, source, hardware: str, run: int = 0, reference: str = "nvidia-h200"):
        self.source, self.hardware, self.run, self.reference = source, hardware, run, reference
        self.used: dict[str, dict] = {}
        self.listed: dict[str, list[str]] = {}

    def document(self, key: str, hardware: str | None = None) -> dict:
        """The stored document (data, runs, provenance) behind ``results(key, hardware)``."""
        if hardware is not None:
            doc = self.source.doc(key, hardware)
            self.used[f"{key} ({hardware})"] = doc
            return doc
        if self.hardware != self.reference and not self.source.has(key, self.hardware):
            doc = self.source.doc(key, self.reference)  # a set that did not measure it: the reference's
        else:
            doc = self.source.doc(key, self.hardware)
        self.used[key] = doc
        return doc

    def __call__(self, key: str, hardware: str | None = None, process: int | None = None):
        doc = self.document(key, hardware)
        runs = [doc["data"], *doc.get("runs", [])]
        i = self.run if process is None else process - 1
        # each call gets its own copy (the source's is shared); a pickle round trip copies JSON data
        # several times faster than copy.deepcopy
        return pickle.loads(pickle.dumps(runs[min(i, len(runs) - 1)], pickle.HIGHEST_PROTOCOL))

    def processes(self, key: str, hardware: str | None = None) -> int:
        return 1 + len(self.document(key, hardware).get("runs", []))

    def keys(self, hardware: str | None = None) -> list[str]:
        hardware = hardware or self.hardware
        self.listed[hardware] = self.source.keys(hardware)
        return list(self.listed[hardware])

    def hardware_sets(self) -> list[str]:
        return self.source.sets()

    def forget(self, key: str) -> None:
        """Un-read ``key`` (of the drawn set): a figure that looked at a result and draws nothing of it
        leaves it out of what a notebook carries and out of the keys the notebook lists."""
        self.used.pop(key, None)
        if self.hardware in self.listed:
            self.listed[self.hardware] = [k for k in self.listed[self.hardware] if k != key]


class Store:
    """Stored results in a ``build_results/`` folder (read and validated once by coursekit.results)."""

    def __init__(self, results_dir: Path = store.RESULTS_DIR):
        self.results_dir = Path(results_dir)

    def doc(self, key: str, hardware: str) -> dict:
        path = store.result_path(key, hardware, self.results_dir)
        if not path.exists():
            raise KeyError(f"no result {key!r} for hardware {hardware!r} (expected {path})")
        return store.load(path)

    def has(self, key: str, hardware: str) -> bool:
        return store.result_path(key, hardware, self.results_dir).exists()

    def keys(self, hardware: str) -> list[str]:
        folder = self.results_dir / hardware
        return [
            p.relative_to(folder).with_suffix("").as_posix() for p in store.result_files(hardware, self.results_dir)
        ]

    def sets(self) -> list[str]:
        return store.hardware_sets(self.results_dir)


# ---------------------------------------------------------------- figure functions

_MODULES: dict[Path, tuple[int, object]] = {}


def figures_path(name: str, snippets_dir: Path = store.SNIPPETS_DIR) -> Path:
    """``m02/crossover`` -> snippets/m02/figures.py (ValueError for a malformed name)."""
    module_dir, sep, func = name.partition("/")
    if not sep or not module_dir or not func or "/" in func:
        raise ValueError(f"{name!r}: a figure is named <module folder>/<function in its figures.py>")
    return Path(snippets_dir) / module_dir / "figures.py"


def function(name: str, snippets_dir: Path = store.SNIPPETS_DIR):
    """The function ``name`` (``module/function``) of its figures.py, the file imported once while
    unchanged. LookupError where there is no such file or function; an import error propagates."""
    path = figures_path(name, snippets_dir)
    if not path.exists():
        raise LookupError(f"no {path}")
    path = path.resolve()
    stamp = path.stat().st_mtime_ns
    cached = _MODULES.get(path)
    if not cached or cached[0] != stamp:
        spec = importlib.util.spec_from_file_location(f"figures_{path.parent.name}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cached = _MODULES[path] = (stamp, mod)
    fn = getattr(cached[1], name.split("/")[1], None)
    if not callable(fn):
        raise LookupError(f"{path} has no function {name.split('/')[1]}()")
    return fn


def arguments(hardware: str, source=None, run: int = 0) -> tuple:
    """Exactly the arguments a figures.py function receives when drawn on ``hardware``: a fresh
    :class:`Results` over ``source`` (default: build_results/), which records what it reads."""
    return (Results(source if source is not None else Store(), hardware, run, REFERENCE),)


def draw(name: str, hardware: str = REFERENCE, source=None, run: int = 0, snippets_dir: Path = store.SNIPPETS_DIR):
    """Call figure ``name`` on ``hardware``: (what it returned, the Results it was given)."""
    args = arguments(hardware, source, run)
    return function(name, snippets_dir)(*args), args[0]


def needed(names: list[str], hardware: str = REFERENCE, source=None) -> Embedded:
    """The stored documents that drawing ``names`` on ``hardware`` reads, as a notebook carries them
    (a figure that reads a result on several processes reads one document)."""
    docs: dict[str, dict] = {}
    listed: dict[str, list[str]] = {}
    for name in names:
        _, results = draw(name, hardware, source)
        for doc in results.used.values():
            docs.setdefault(doc["hardware"], {})[doc["key"]] = doc
        listed.update(results.listed)
    return Embedded(docs, listed)
