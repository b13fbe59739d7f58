"""The page context: what filling one page's placeholders on one hardware set knows.

``Page`` is what a page's conversion shares (its Markdown instance, the folders, the line being
filled, the other hardware sets, what it has drawn so far); ``PageContext`` is the page seen on one
hardware set. Filling a placeholder as another set shows it is a new context over the same page
(``ctx.on(hardware)``), so nothing is swapped and put back. The placeholder kinds
(coursekit/page/kinds.py) are functions of a context.

Errors: ``PlaceholderError`` stops the build, naming page, line, placeholder and set.
``MissingValue`` is a look-up that found nothing (no result for the set, no such field): on the
page's set it becomes a PlaceholderError; on another set it is a gap (the set did not measure it).
A malformed result (``coursekit.results.ResultError``) is never a gap: it stops the build, naming
the file, whichever set it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coursekit import results as store

try:  # under MkDocs, a BuildError stops the build with the message and no traceback
    from mkdocs.exceptions import BuildError as _BuildFailure
except ImportError:  # plain Python-Markdown, or another site generator
    _BuildFailure = Exception


class PlaceholderError(_BuildFailure):
    """A placeholder that cannot be filled: the build must stop."""


class Gap(PlaceholderError):
    """Filling for another hardware set failed where that set lacks what the placeholder needs
    (``PageContext.per_set`` leaves the set out)."""


class MissingValue(LookupError):
    """A look-up that found nothing: no result ``key`` in set ``hardware``, or no ``field`` in it."""

    def __init__(self, key: str, field: str, hardware: str, file: Path, why: str):
        super().__init__(why)
        self.key, self.field, self.hardware, self.file, self.why = key, field, hardware, Path(file), why

    def __str__(self) -> str:
        return self.why


@dataclass
class Page:
    """One page's conversion: shared by every context that fills it."""

    md: object
    results_dir: Path
    snippets_dir: Path
    docs_dir: Path
    source: Path | None = None  # the page's file, where no MkDocs page names it (scripts/claims.py)
    line: int = 0  # the line being filled, in the text after snippet expansion
    other_sets: list[str] = field(default_factory=list)  # the hardware sets beside the page's
    switchable: int = 0  # elements that show per-set data (values, claim marks, figures)
    figures: int = 0  # figures drawn so far: the next one is "Figure figures + 1"
    versions_said: set = field(default_factory=set)  # provenance versions a figure's line has given
    memo: dict = field(default_factory=dict)  # what one conversion computes once (results do not change during it)
    _listing: tuple | None = None

    def _relpath(self, attr: str):
        md = self.md
        tp = md.treeprocessors["relpath"] if md is not None and "relpath" in md.treeprocessors else None
        return getattr(getattr(tp, "file", None), attr, None)

    def path(self) -> Path | None:
        """The page's source file, when MkDocs builds it (its relpath treeprocessor knows the file)."""
        src = self._relpath("src_uri")
        return self.docs_dir / src if src else self.source

    def url_prefix(self) -> str:
        """From the page to the site's root: '../' per folder of its URL."""
        url = self._relpath("url")
        return "../" * url.count("/") if url else ""

    def listing(self) -> tuple:
        """Every stored result's path (what a figures.py function can list), read once per page."""
        if self._listing is None:
            self._listing = tuple(
                sorted(p.relative_to(self.results_dir).as_posix() for p in self.results_dir.rglob("*.json"))
            )
        return self._listing

    def where(self, placeholder: str) -> str:
        """``file:line`` for every line that holds the placeholder: on the page, in the snippet
        files it includes, or (outside MkDocs) anywhere under docs/ and snippets/."""
        page = self.path()
        candidates = [page] if page else []
        if page is None:
            candidates = [p for d in (self.docs_dir, self.snippets_dir) if d.is_dir() for p in sorted(d.rglob("*.md"))]
        candidates += sorted(self.snippets_dir.rglob("*.py")) if self.snippets_dir.is_dir() else []
        hits = []
        for p in candidates:
            try:
                lines = p.read_text(errors="replace").splitlines()
            except OSError:
                continue
            hits += [f"{p}:{i}" for i, line in enumerate(lines, 1) if placeholder in line]
        if hits:
            return ", ".join(hits)
        return f"{page or 'an unknown page'} (line {self.line} after snippet expansion)"

    def load(self, path: Path) -> dict:
        """``store.load``, once per page for each file."""
        key = ("load", str(path))
        if key not in self.memo:
            self.memo[key] = store.load(path)
        return self.memo[key]

    def code_hash(self) -> str:
        """What a figures.py call's result depends on besides figures.py and the results it reads: the
        course's code (coursekit/, coursekit/page/) and any shared module beside the snippets."""
        if "code" not in self.memo:
            from coursekit import cache

            here = Path(__file__).parent
            self.memo["code"] = cache.tree_hash(here.parent, here, self.snippets_dir)
        return self.memo["code"]

    def stash(self, html_text: str) -> str:
        return self.md.htmlStash.store(html_text)


def ordered_sets(sets: list[str]) -> list[str]:
    """The reference first, then the other GPU sets, then the CPU sets."""
    return sorted(sets, key=lambda hw: (hw != store.REFERENCE_HARDWARE, store.is_cpu_set(hw), hw))


class PageContext:
    """The page on one hardware set. ``quiet``: filling for another set, where a failure is a gap."""

    def __init__(self, page: Page, hardware: str, quiet: bool = False):
        self.page, self.hardware, self.quiet = page, hardware, quiet
        self.borrowed = False  # a look-up fell back to the reference set

    # shorthands for the page's folders
    results_dir = property(lambda self: self.page.results_dir)
    snippets_dir = property(lambda self: self.page.snippets_dir)
    docs_dir = property(lambda self: self.page.docs_dir)

    def on(self, hardware: str, quiet: bool = True) -> PageContext:
        """The same page on another set (quietly: a failure there is a gap, not an error)."""
        return PageContext(self.page, hardware, quiet)

    def fail(self, placeholder: str, why: str):
        if self.quiet:  # another set lacks it (per_set): no page and line to name, and no build to stop
            raise Gap(why)
        raise PlaceholderError(f"{self.page.where(placeholder)}: {placeholder} — {why} (hardware {self.hardware!r})")

    def broken(self, placeholder: str, exc: store.ResultError):
        """A malformed result stops the build on any set: it is never a gap."""
        raise PlaceholderError(
            f"{self.page.where(placeholder)}: {placeholder} — a stored result is malformed: {exc} "
            f"(while filling it on hardware {self.hardware!r})"
        ) from None

    def check_hardware(self):
        sets = store.hardware_sets(self.results_dir)
        if self.hardware not in sets:
            raise PlaceholderError(
                f"COURSE_HARDWARE / mkdocs.yml names the hardware folder {self.hardware!r}, but "
                f"{self.results_dir} holds only: {', '.join(sets) or 'nothing'}"
            )

    # ------------------------------------------------------------------ stored results
    def lookup(self, key: str, field: str) -> store.Lookup:
        """The set's result; where it has none, the reference set's, marked (``borrowed``).

        A machine that measured only some modules can still build the whole site: the numbers it
        lacks come from the reference set, and each such number says so (class "fallback"). So can
        a CPU set (``cpu-*``), whose small sizes may not reach a sweep point a page reads: there a
        missing field is a gap too. In a GPU set's result a missing field is an error.
        MissingValue where neither has it; ResultError where a file is malformed."""
        try:
            return self._lookup(key, field, self.hardware)
        except MissingValue:
            reference = store.REFERENCE_HARDWARE
            if self.hardware == reference or not store.result_path(key, reference, self.results_dir).exists():
                raise
            if store.result_path(key, self.hardware, self.results_dir).exists() and not store.is_cpu_set(self.hardware):
                raise  # the result exists here but lacks the field: that is an error, not a gap
            found = self._lookup(key, field, reference)
            self.borrowed = True
            return found

    def _lookup(self, key: str, field: str, hardware: str) -> store.Lookup:
        path = store.result_path(key, hardware, self.results_dir)
        if not path.exists():
            raise MissingValue(key, field, hardware, path, f"no result {key!r} for hardware {hardware!r} ({path})")
        doc = self.page.load(path)  # ResultError: malformed
        try:
            return store.Lookup(store.walk(doc["data"], field, f"{key}: ", str(path)), doc, path)
        except KeyError as exc:  # store.walk: the field is not there (or is addressed wrongly)
            raise MissingValue(key, field, hardware, path, exc.args[0]) from None

    def doc(self, key: str, placeholder: str) -> dict:
        """The document of result ``key`` (the reference's where this set lacks it)."""
        try:
            return self.lookup(key, "").doc
        except MissingValue as exc:
            self.fail(placeholder, str(exc))
        except store.ResultError as exc:
            self.broken(placeholder, exc)

    # ------------------------------------------------------------------ hardware sets side by side
    def own_or_reference(self, compute):
        """``compute(ctx)`` on the page's set; where that is a CPU set whose small sizes lack what it
        needs (a sweep point, a value a CPU cannot measure), on the reference set instead: what it
        returns then names the reference's result, and the page marks it as borrowed."""
        if not store.is_cpu_set(self.hardware) or self.quiet:
            return compute(self)
        try:
            return compute(self.on(self.hardware))
        except (Gap, MissingValue):
            return compute(self.on(store.REFERENCE_HARDWARE, quiet=False))

    def per_set(self, compute) -> dict:
        """``compute(ctx)`` on each set beside the page's, {set: what it returned}; a set that lacks
        what it needs (a result, a field) is left out. A malformed result stops the build."""
        out = {}
        for hw in self.page.other_sets:
            try:
                out[hw] = compute(self.on(hw))
            except (Gap, MissingValue):
                continue
        return out

    def across_processes(self, doc: dict, field: str, placeholder: str) -> list:
        """The value at ``field`` in each process's data (process 1 first)."""
        if "derived_from" in doc:
            return doc["per_process"]
        out = []
        for i, data in enumerate([doc["data"], *doc.get("runs", [])], 1):
            try:
                out.append(store.walk(data, field, f"{doc['key']}: ", f"process {i}'s data"))
            except KeyError as exc:
                self.fail(placeholder, exc.args[0])
        return out
