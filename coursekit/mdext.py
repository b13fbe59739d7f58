"""Markdown extension: measured numbers, figures and provenance from build_results/.

Placeholders (one syntax family, ``{{ ... }}``; the kinds are the registry ``KINDS`` below):

    {{ m02/host_overhead:host_us.no_grad | .1f }}   a value: data.<path> of result m02/host_overhead
    {{ m03/modes:points[tokens=4096].modes.eager.time_us | .0f }}
                                                    a list item is chosen by its fields, never by position
    {{ m02/crossover:bytes | /1e6 .0f }}            scaled first: bytes printed as MB
    {{ m02/host_overhead:host_us.no_grad | .1f range }}
                                                    the range of the medians over the result's processes
                                                    (shown anyway where another process's median lies
                                                    outside process 1's 10th-90th percentile band)
    {{ m02/crossover:@provenance.torch }}           a field of the result document itself
    {{ output m02/profile_breakdown:table }}        a stored text (a printed table) as a block
    {{ figure m02/crossover | What it shows }}      function crossover() of snippets/m02/figures.py,
                                                    drawn as "Figure N." (numbered per page) with
                                                    its caption, which every figure must have
    {{ m03/derived:by_tokens.1.predicted_us | .0f }} a value computed from stored results: where no
                                                    result m03/derived exists, function derived() of
                                                    snippets/m03/figures.py, called like a figure
    {{ provenance m02/host_overhead }}              an expander: hardware, versions, date, downloads
    {{ cited 4.8 TB/s | NVIDIA H200 datasheet }}    a number from a named source, not measured here
    {{ hardware-sets }}                             a table of every hardware folder in build_results/
    {{ assert m02/a:x.y < m02/b:z }}                a claim the prose makes about two measurements;
                                                    renders nothing (see ``claim`` for when it holds)
    {{ reading-time part-j/02-eager-per-op.md }}    minutes to read the main line (coursekit/teaching.py), pages summed

A value that ends at a timing summary prints its median; hovering shows the spread, the other
processes' medians and where it was measured. A numeric format demands a number. A placeholder
that cannot be filled stops the build with an error that names the page, the line and the key;
so does any ``{{`` or ``}}`` left over outside code (write ``\\{{`` for literal braces).

The extension is a Python-Markdown preprocessor that runs after pymdownx.snippets (priority
32), so placeholders inside included files are filled too. Result files are read and validated
once per build (coursekit/results.py caches them) and each figures.py is imported once.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from coursekit import figdata, prose, scoreboard, stats, teaching
from coursekit import results as store

PLACEHOLDER = re.compile(r"(?<!\\)\{\{\s*(?P<body>[^{}]+?)\s*\}\}")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
VALUE = re.compile(
    r"^(?P<key>[a-z0-9_]+/[a-z0-9_]+)\s*:\s*(?P<field>@?[\w.\-]+(?:\[[^\]]*\][\w.\-]*)*)\s*(?:\|\s*(?P<fmt>[^|]*))?$"
)
START_TAG = re.compile(r"""<[\w-]+(?:\s+[\w:-]+(?:=(?:"[^"]*"|'[^']*'|[^\s"'>]+))?)*""")  # up to its ">"
STUB_MARK = '!!! note "In preparation"'
UNIT_TEXT = {"us": " µs", "x": "×", "": ""}  # a stored unit as the prose writes it
TAPPABLE = 'tabindex="0" role="button"'  # a measured number's provenance opens from the keyboard too
DOWNLOADS = "downloads"  # site folder of the generated snippet downloads and raw data (coursekit/plugin.py)


try:  # under MkDocs, a BuildError stops the build with the message and no traceback
    from mkdocs.exceptions import BuildError as _BuildFailure
except ImportError:  # plain Python-Markdown, or another site generator
    _BuildFailure = Exception


class PlaceholderError(_BuildFailure):
    """A placeholder that cannot be filled: the build must stop."""


def prose_words(markdown_text: str) -> int:
    """Words of prose: outside code fences, HTML tags, placeholders and snippet includes, and before
    the chapter's ``## Exercises`` section (the exercises and their answers are not chapter prose)."""
    text = re.sub(r"^(```|~~~).*?^\1", " ", markdown_text, flags=re.S | re.M)
    text = re.split(r"^## Exercises[ \t]*$", text, maxsplit=1, flags=re.M)[0]
    text = re.sub(r"<[^>]+>|\{\{.*?\}\}|--8<--.*", " ", text)
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", text))


def _short_versions(prov: dict) -> str:
    parts = [prov.get("gpu", "?")]
    parts += [f"{k} {prov[k]}" for k in ("torch", "triton", "jax") if prov.get(k)]
    parts.append(f"CUDA {prov.get('cuda')}")
    parts.append(str(prov.get("date", "?"))[:10])
    return ", ".join(str(p) for p in parts)


# ---------------------------------------------------------------- caches shared by every page

_COMPUTED: dict[tuple, tuple[object, dict, list]] = {}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = Path(path).stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


class Interval:
    """What a claim compares: the range a measurement can be said to take."""

    def __init__(self, lo: float, hi: float, text: str):
        self.lo, self.hi, self.text = lo, hi, text


class ResultsPreprocessor(Preprocessor):
    def __init__(self, md, config):
        super().__init__(md)
        self.hardware = os.environ.get("COURSE_HARDWARE") or config["hardware"]
        self.results_dir = Path(config["results_dir"])
        self.snippets_dir = Path(config["snippets_dir"])
        self.docs_dir = Path(config["docs_dir"])
        self.kinds = {  # the registry: name -> handler(rest of the placeholder, placeholder)
            "figure": self.figure,
            "provenance": self.provenance,
            "output": self.output,
            "cited": self.cited,
            "assert": self.claim,
            "hardware-sets": self.hardware_sets,
            "scoreboard": self.scoreboard,
            "reading-time": self.reading_time,
            "chapter-box": self.chapter_box,
        }
        self.line = 0  # the line being filled, in the text after snippet expansion
        self.other_sets: list[str] = []  # the hardware sets beside the page's (run() finds them)
        self.quiet = False  # filling for another set (per_set): a failure is a gap there, not an error
        self.borrowed = False  # a look-up fell back to the reference set since on_set began
        self.switchable = 0  # elements of the page that show per-set data (values, claim marks, figures)

    # ------------------------------------------------------------------ where and errors
    def page(self) -> Path | None:
        """The page being built, when MkDocs builds it (its relpath treeprocessor knows the file)."""
        tp = self.md.treeprocessors["relpath"] if "relpath" in self.md.treeprocessors else None
        src = getattr(getattr(tp, "file", None), "src_uri", None)
        return self.docs_dir / src if src else None

    def url_prefix(self) -> str:
        """From the page being built to the site's root: '../' per folder of its URL."""
        tp = self.md.treeprocessors["relpath"] if "relpath" in self.md.treeprocessors else None
        url = getattr(getattr(tp, "file", None), "url", None)
        return "../" * url.count("/") if url else ""

    def where(self, placeholder: str) -> str:
        """``page:line`` for every line that holds the placeholder: on the page being built, in the
        snippet files it includes, or (outside MkDocs) anywhere under docs/ and snippets/."""
        page = self.page()
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

    def fail(self, placeholder: str, why: str):
        if self.quiet:  # another set lacks it (per_set): no page and line to name, and no build to stop
            raise PlaceholderError(why)
        raise PlaceholderError(f"{self.where(placeholder)}: {placeholder} — {why} (hardware {self.hardware!r})")

    def check_hardware(self):
        sets = store.hardware_sets(self.results_dir)
        if self.hardware not in sets:
            raise PlaceholderError(
                f"COURSE_HARDWARE / mkdocs.yml names the hardware folder {self.hardware!r}, but "
                f"{self.results_dir} holds only: {', '.join(sets) or 'nothing'}"
            )

    # ------------------------------------------------------------------ stored results
    def doc(self, key: str, placeholder: str) -> dict:
        try:
            return self.lookup(key, "").doc
        except (KeyError, store.ResultError) as exc:
            self.fail(placeholder, str(exc).strip("'\""))

    def lookup(self, key: str, field: str) -> store.Lookup:
        """The selected hardware's result; where it has none, the reference hardware's, marked.

        A machine that measured only some modules can still build the whole site: the numbers it
        lacks come from the reference set, and each such number says so (class "fallback"). So can
        a CPU set (``cpu-*``), whose small sizes may not reach a sweep point a page reads: there a
        missing field is a gap too. In a GPU set's result a missing field is an error.
        """
        try:
            return store.lookup(key, field, self.hardware, self.results_dir)
        except KeyError:
            if (
                self.hardware == store.REFERENCE_HARDWARE
                or not store.result_path(key, store.REFERENCE_HARDWARE, self.results_dir).exists()
            ):
                raise
            if store.result_path(key, self.hardware, self.results_dir).exists() and not store.is_cpu_set(self.hardware):
                raise  # the result exists here but lacks the field: that is an error, not a gap
            self.borrowed = True
            return store.lookup(key, field, store.REFERENCE_HARDWARE, self.results_dir)

    # ------------------------------------------------------------------ hardware sets side by side
    @contextlib.contextmanager
    def on_set(self, hardware: str, quiet: bool = True):
        """Fill placeholders as if the page showed ``hardware`` (quietly: a failure is a gap)."""
        saved = self.hardware, self.quiet, self.borrowed
        self.hardware, self.quiet, self.borrowed = hardware, quiet, False
        try:
            yield
        finally:
            self.hardware, self.quiet, self.borrowed = saved

    def own_or_reference(self, compute):
        """``compute()`` on the page's set; where that is a CPU set whose small sizes lack what it
        needs (a sweep point, a value a CPU cannot measure), on the reference set instead: what it
        returns then names the reference's result, and the page marks it as borrowed."""
        if not store.is_cpu_set(self.hardware) or self.quiet:
            return compute()
        try:
            with self.on_set(self.hardware):
                return compute()
        except (PlaceholderError, KeyError, store.ResultError):
            with self.on_set(store.REFERENCE_HARDWARE, quiet=False):
                return compute()

    def per_set(self, compute) -> dict:
        """``compute()`` on each set beside the page's, {set: what it returned}; a set on which it
        fails (a result or a field the set lacks) is left out."""
        out = {}
        for hw in self.other_sets:
            with self.on_set(hw):
                try:
                    out[hw] = compute()
                except (PlaceholderError, KeyError, store.ResultError):
                    continue
        return out

    @staticmethod
    def json_attr(name: str, value) -> str:
        """`` name='<compact JSON>'``: single quotes, so that the JSON's own quotes need no escaping."""
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return f" {name}='{html.escape(text, quote=False).replace(chr(39), '&#39;')}'"

    def with_sets(self, element: str, values: dict[str, str]) -> str:
        """A measured value's element with ``data-hw``: its text on each other set that measured it
        itself (hardware.js swaps it in; a set not named shows the reference value, marked)."""
        if not self.other_sets:
            return element
        self.switchable += 1
        tag = START_TAG.match(element)  # the attribute goes last in the element's start tag
        return element[: tag.end()] + self.json_attr("data-hw", values) + element[tag.end() :]

    def ordered_sets(self, sets: list[str]) -> list[str]:
        """The reference first, then the other GPU sets, then the CPU sets."""
        return sorted(sets, key=lambda hw: (hw != store.REFERENCE_HARDWARE, store.is_cpu_set(hw), hw))

    def set_marker(self) -> str:
        """What hardware.js builds the page's set selector from: every set, labelled, in order."""
        sets = self.ordered_sets([self.hardware, *self.other_sets])
        marker = {
            "sets": [[hw, store.set_label(hw, self.results_dir)] for hw in sets],
            "page": self.hardware,
            "reference": store.REFERENCE_HARDWARE,
        }
        return self.stash(f'<div class="hw-sets" hidden{self.json_attr("data-hw-sets", marker)}></div>')

    def figure_sets(self, name: str, placeholder: str, used: dict, spec_json: str) -> str:
        """The attributes ``figure()`` adds where a figure can be drawn on other sets too: the same
        function called on each other set whose own results it reads, ``data-plotly-sets`` =
        {set: {"data": traces}} (plus "layout" where it differs from the page's), and
        ``data-plotly-reference``; figures.js draws the selected set solid, the reference dashed.
        Nothing for a figure that names its sets itself (two runs compared) or borrows its data."""
        if not self.other_sets or any(" (" in k or d["hardware"] != self.hardware for k, d in used.items()):
            return ""
        layout = json.loads(spec_json).get("layout", {})
        sets = {}
        for hw, (fig, used_here, _) in self.per_set(lambda: self.call_figures(name, placeholder)).items():
            if not used_here or any(d["hardware"] != hw for d in used_here.values()):
                continue  # drawn from the reference's data: nothing of its own to overlay
            if not callable(getattr(fig, "to_json", None)):
                continue
            spec = json.loads(self.figure_json(fig))  # as the page's own spec is written
            sets[hw] = {"data": spec.get("data", [])}
            if spec.get("layout", {}) != layout:
                sets[hw]["layout"] = spec.get("layout", {})
        if not sets:
            return ""
        attr = self.json_attr("data-plotly-sets", sets)
        self.switchable += 1
        if len(attr) > 400_000:
            self.fail(placeholder, f"the figure's other hardware sets are {len(attr)} bytes; keep them under 400 kB")
        return f'{attr} data-plotly-reference="{html.escape(store.REFERENCE_HARDWARE)}"'

    def stash(self, html_text: str) -> str:
        return self.md.htmlStash.store(html_text)

    def across_processes(self, doc: dict, field: str, placeholder: str) -> list:
        """The value at ``field`` in each process's data (process 1 first)."""
        if "derived_from" in doc:
            return doc["per_process"]
        out = []
        for i, data in enumerate([doc["data"], *doc.get("runs", [])], 1):
            try:
                out.append(store.walk(data, field, f"{doc['key']}: ", f"process {i}'s data"))
            except KeyError as exc:
                self.fail(placeholder, str(exc).strip("'\""))
        return out

    # ------------------------------------------------------------------ formatting
    def format_number(self, value, spec: str, placeholder: str, what: str) -> str:
        """A Python format spec, optionally after a scale ("/1e6 .0f"); a numeric spec demands a number."""
        spec = (spec or "").strip()
        if isinstance(value, str):
            if spec:
                self.fail(placeholder, f"{what} is the text {value!r}; the format {spec!r} needs a number")
            return value
        if not store.is_number(value):
            self.fail(placeholder, f"{what} is {value!r} ({type(value).__name__}), not a number or text")
        scale = re.match(r"^([/*])\s*([0-9.e+-]+)\s*", spec)
        try:
            if scale:
                factor = float(scale[2])
                value = value / factor if scale[1] == "/" else value * factor
                spec = spec[scale.end() :]
            if isinstance(value, float) and spec.endswith("d"):
                value = round(value)
            return format(value, spec)
        except (ValueError, TypeError, ZeroDivisionError) as exc:
            self.fail(placeholder, f"format {spec!r} does not apply to {what}: {exc}")

    # ------------------------------------------------------------------ kinds
    def value(self, m: re.Match, placeholder: str) -> str:
        text, doc, notes = self.own_or_reference(lambda: self.value_text(m, placeholder))
        values = {}
        for hw, (text_there, doc_there, _) in self.per_set(lambda: self.value_text(m, placeholder)).items():
            if doc_there["hardware"] == hw:  # measured there, not borrowed from the reference
                values[hw] = text_there
        return self.stash(self.with_sets(self.measured_span(text, doc, notes), values))

    def value_text(self, m: re.Match, placeholder: str) -> tuple[str, dict, list[str]]:
        """A value's text on the page's set, the result it came from, and the notes for its hover."""
        key, field, fmt = m["key"], m["field"], (m["fmt"] or "").strip()
        want_range = fmt.endswith("range")
        fmt = fmt.removesuffix("range").strip()
        what = f"{key}:{field}"
        if field.startswith("@"):
            doc = self.doc(key, placeholder)
            node = doc
            for part in field[1:].split("."):
                if not isinstance(node, dict) or part not in node:
                    self.fail(placeholder, f"no field {field[1:]!r} in result {key!r}")
                node = node[part]
            values = [node]
        else:
            found = self.find(key, field, placeholder)
            node, doc = found.value, found.doc
            values = self.across_processes(doc, field, placeholder)
        notes = []
        disagree = False  # another process's median outside process 1's own band
        if store.is_summary(node) and len(values) > 1 and all(store.is_summary(v) for v in values):
            disagree = any(not node["p10"] <= v["median"] <= node["p90"] for v in values[1:])
        if store.is_summary(node):
            notes.append(
                self.spread_note(node, *(self.format_number(node[q], fmt, placeholder, what) for q in ("p10", "p90")))
            )
            node = node["median"]
            values = [v["median"] if store.is_summary(v) else v for v in values]
        elif isinstance(node, dict | list) or node is None:
            self.fail(placeholder, f"{what} is a {type(node).__name__}, not a number or text")
        text = self.format_number(node, fmt, placeholder, what)
        if len(values) > 1 and len({json.dumps(v, sort_keys=True) for v in values}) > 1:
            notes.append(f"process medians {', '.join(self.format_number(v, fmt, placeholder, what) for v in values)}")
        if want_range and len(values) < 2:
            self.fail(placeholder, f"'range' needs a result measured in several processes; {key} has one")
        if want_range or disagree:
            # Where the processes disagree beyond one process's spread, a single median would
            # overstate what is known: the page shows the range of the processes' medians.
            if disagree:
                notes.insert(0, "the processes disagree beyond process 1's spread: shown is the range of their medians")
            lo, hi = (self.format_number(v, fmt, placeholder, what) for v in (min(values), max(values)))
            if lo == hi:  # the medians differ only below the format's precision: one number says it
                text = lo
            else:
                text = f"{lo} to {hi}" if min(values) < 0 else f"{lo}–{hi}"  # "-10–21" would read as a dash
        return text, doc, notes

    @staticmethod
    def spread_words(s: dict) -> str:
        """What a summary's p10 and p90 are (coursekit/stats.py takes nearest-rank percentiles, so
        with few samples they are the extremes, or the next ones in)."""
        rank = stats.percentile(range(s["n"]), 0.10)  # how many samples lie below p10 (and above p90)
        if rank == 0:
            return "min–max"
        if rank == 1:
            return f"10th–90th percentile (the 2nd of {s['n']} from each end)"
        return "10th–90th percentile"

    def spread_note(self, s: dict, p10: str, p90: str) -> str:
        """A summary's hover note: 'median of 3 samples; min–max 7.1–7.9 µs'."""
        unit = UNIT_TEXT.get(s.get("unit", ""), f" {s.get('unit', '')}".rstrip())
        samples = "sample" if s["n"] == 1 else "samples"
        return f"median of {s['n']} {samples}; {self.spread_words(s)} {p10}–{p90}{unit}"

    def source_words(self, doc: dict) -> str:
        if "derived_from" in doc:
            return f"computed by {doc['snippet']} from {', '.join(doc['derived_from'])}, measured"
        return f"measured by {doc['snippet']}"

    def measured_span(self, text: str, doc: dict, notes: list[str]) -> str:
        title = "; ".join([*notes, f"{self.source_words(doc)} on {_short_versions(doc['provenance'])}"])
        css = "measured"
        if doc["hardware"] != self.hardware:
            title = f"not measured on {self.hardware}: the {doc['hardware']} value; " + title
            css += " fallback"
        if len(text) > 20:  # a name or a phrase, not a number: it may wrap (course.css)
            css += " words"
        # a control: tap, click or Enter shows the title in a popover (docs/assets/javascripts/provenance.js)
        return f'<span class="{css}" title="{html.escape(title)}" {TAPPABLE}>{html.escape(text)}</span>'

    def call_figures(self, name: str, placeholder: str, run: int = 0, hardware: str | None = None):
        """Call function <func> of snippets/<module>/figures.py with what coursekit/figdata.py hands
        it (the notebooks hand it the same); ``run`` picks which process's data each result gives
        (the last one a result has); ``hardware``, the set it reads as the page's (default: the
        page's own). Where a CPU set's small sizes cannot draw it, it is drawn from the reference
        set (its caption says so). Returns (what it returned, {label: document read}, figures.py)."""
        if hardware is not None and hardware != self.hardware:
            with self.on_set(hardware, quiet=self.quiet):
                return self.call_figures(name, placeholder, run)
        if not re.fullmatch(r"[a-z0-9_]+/[a-z0-9_]+", name):
            self.fail(placeholder, "a figure is named <module folder>/<function in its figures.py>")
        path = figdata.figures_path(name, self.snippets_dir)
        try:
            fn = figdata.function(name, self.snippets_dir)
        except LookupError as exc:
            self.fail(placeholder, str(exc))
        except Exception as exc:  # a bug in figures.py at import time
            self.fail(placeholder, f"{path} failed to import: {type(exc).__name__}: {exc}")
        (results,) = args = figdata.arguments(self.hardware, figdata.Store(self.results_dir), run)
        try:
            value = fn(*args)
        except Exception as exc:
            if store.is_cpu_set(self.hardware) and not self.quiet:
                # a CPU set's small sizes lack what it reads: the reference's data, marked as borrowed
                return self.call_figures(name, placeholder, run, hardware=store.REFERENCE_HARDWARE)
            if isinstance(exc, PlaceholderError):
                raise
            # a bug in the figure code, or a result it reads missing: name the figure, not just the page
            self.fail(
                placeholder, f"{path}:{name.split('/')[1]}() raised {type(exc).__name__}: {str(exc).strip(chr(39))}"
            )
        self.borrowed |= any(" (" not in k and d["hardware"] != self.hardware for k, d in results.used.items())
        return value, results.used, path

    def computed(self, name: str, placeholder: str, run: int):
        """call_figures, cached over the whole build while figures.py and the results it read are unchanged."""
        path = self.snippets_dir / name.split("/")[0] / "figures.py"
        cache_key = (str(path.resolve()), _stamp(path), name, run, self.hardware, str(self.results_dir))
        hit = _COMPUTED.get(cache_key)
        if hit and all(_stamp(p) == s for p, s in hit[2]):
            return hit[0], hit[1], path
        value, used, path = self.call_figures(name, placeholder, run)
        stamps = [
            (p, _stamp(p)) for p in (store.result_path(k, d["hardware"], self.results_dir) for k, d in used.items())
        ]
        _COMPUTED[cache_key] = (value, used, stamps)
        return value, used, path

    def find(self, key: str, field: str, placeholder: str) -> store.Lookup:
        """A stored value, or one that snippets/<module>/figures.py computes from stored values."""
        try:
            found = self.lookup(key, field)
            self.borrowed |= found.doc["hardware"] != self.hardware
            return found
        except (KeyError, store.ResultError) as exc:
            stored_error = str(exc).strip("'\"")
            module_dir, func = key.split("/")
            figures = self.snippets_dir / module_dir / "figures.py"
            if (
                any(
                    store.result_path(key, hw, self.results_dir).exists()
                    for hw in (self.hardware, store.REFERENCE_HARDWARE)
                )
                or not figures.exists()
                or not re.search(rf"^def {re.escape(func)}\(", figures.read_text(), re.M)
            ):
                self.fail(placeholder, stored_error)
        if store.is_cpu_set(self.hardware) and not self.quiet:
            found = self.own_or_reference(lambda: self.find(key, field, placeholder))
            self.borrowed |= found.doc["hardware"] != self.hardware
            return found
        computed, used, path = self.computed(key, placeholder, 0)
        if not used:
            self.fail(placeholder, f"{path}:{func}() read no stored result, so it measured nothing")
        try:
            value = store.walk(computed, field, f"{key}: ", f"what {path}:{func}() returns")
        except KeyError as exc:
            self.fail(placeholder, str(exc).strip("'\""))
        # the same computation on each process's data, for claims and the hover
        processes = max(len(d.get("runs", [])) + 1 for d in used.values())
        per_process = [value]
        for run in range(1, processes):
            again, _, _ = self.computed(key, placeholder, run)
            try:
                per_process.append(store.walk(again, field, f"{key}: ", f"what {path}:{func}() returns"))
            except KeyError as exc:
                self.fail(placeholder, str(exc).strip("'\""))
        first = next(iter(used.values()))
        # borrowed only where the page's own set lacked a result (not where figures.py asked for
        # another set by name, as the methodology page's comparison of two runs does)
        borrowed = [d["hardware"] for k, d in used.items() if " (" not in k and d["hardware"] != self.hardware]
        if all(" (" in k for k in used) and self.hardware != store.REFERENCE_HARDWARE:
            # it reads only sets it names (the reference's two runs): the same on every set, not this one's
            borrowed = [store.REFERENCE_HARDWARE]
        hardware = borrowed[0] if borrowed else self.hardware
        self.borrowed |= bool(borrowed)
        doc = {
            "snippet": f"snippets/{module_dir}/figures.py:{func}()",
            "hardware": hardware,
            "provenance": first["provenance"],
            "derived_from": sorted(used),
            "per_process": per_process,
        }
        return store.Lookup(value, doc, path)

    @staticmethod
    def figure_json(fig) -> str:
        """A figure's spec as the page carries it: no template (figures.js applies the page's palette)
        and every axis with automargin, so that its tick labels and title grow the margin instead of
        being clipped by it."""
        fig.layout.template = None
        fig.update_xaxes(automargin=True)
        fig.update_yaxes(automargin=True)
        return fig.to_json()

    def figure_caption(self, rest: str, placeholder: str) -> tuple[str, str, int]:
        """``{{ figure m03/speedup | Speed-up of each mode over eager }}``: the figure's name, its
        caption (required: what the figure shows, in prose; `code` allowed) and its number on the
        page. Figures are numbered per page in order of appearance: the count restarts with a
        page's conversion (MkDocs converts each page with a Markdown instance of its own; a reused
        instance starts its lines again)."""
        name, _, caption = rest.partition("|")
        name, caption = name.strip(), " ".join(caption.split())
        if not caption:
            self.fail(
                placeholder,
                f"a figure needs a caption that says what it shows: {{{{ figure {name} | <what it shows> }}}}",
            )
        typed = prose.find_typed(caption)
        if typed:
            self.fail(
                placeholder,
                f"the caption types a number that looks measured ({typed[0].text!r}): "
                "say what the figure shows, the figure gives the numbers",
            )
        page, last, n = getattr(self, "_figure_count", (None, 0, 0))
        if page != self.page() or self.line < last:
            n = 0
        self._figure_count = (self.page(), self.line, n + 1)
        return name, caption, n + 1

    def figure(self, rest: str, placeholder: str) -> str:
        name = rest.partition("|")[0].strip()
        module_dir, _, func = name.partition("/")
        fig, used, path = self.call_figures(name, placeholder)
        if not callable(getattr(fig, "to_json", None)) or not hasattr(fig, "layout"):
            self.fail(placeholder, f"{path}:{func}() returned a {type(fig).__name__}, not a plotly Figure")
        name, caption, number = self.figure_caption(rest, placeholder)
        spec_json = self.figure_json(fig)
        if len(spec_json) > 400_000:
            self.fail(placeholder, f"figure data is {len(spec_json)} bytes; keep a figure under 400 kB")
        overlay = self.figure_sets(name, placeholder, used, spec_json)  # the other hardware sets' traces
        if len(used) > 4:  # a figure over many results (e.g. two whole runs): one line, not one per result
            sets = sorted({d["hardware"] for d in used.values()})
            keys = sorted({k.split(" (")[0] for k in used})
            first = next(iter(used.values()))
            provenance = (
                f"Drawn from {len(used)} stored results ({html.escape(', '.join(keys))}) of the sets "
                f"{html.escape(', '.join(sets))}, measured on {html.escape(_short_versions(first['provenance']))}; "
                f"raw data under <code>downloads/data/</code>"
            )
        else:
            provenance = "; ".join(self.provenance_line(k, d, borrowed=" (" not in k) for k, d in used.items())
        if overlay:  # the set this spec was drawn from, beside the others' (figures.js)
            overlay += f' data-plotly-hardware="{html.escape(self.hardware)}"'
        label = f"Figure {number}. {caption.replace('`', '')}"
        shown = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(caption, quote=False))
        return self.stash(
            f'<figure class="course-figure" id="fig-{html.escape(module_dir)}-{html.escape(func)}">'
            f'<div class="course-plot" role="img" aria-label="{html.escape(label)}" '
            f'data-plotly="{html.escape(spec_json)}"{overlay}></div>'
            f'<figcaption><p class="figure-caption"><span class="figure-number">Figure {number}.</span> {shown}</p>'
            f'<p class="provenance-line">{provenance}</p></figcaption></figure>'
        )

    def output(self, body: str, placeholder: str) -> str:
        m = VALUE.match(body)
        if not m or m["fmt"]:
            self.fail(placeholder, "an output is written {{ output module/snippet:field }}")
        found = self.find(m["key"], m["field"], placeholder)
        if not isinstance(found.value, str):
            self.fail(placeholder, f"{m['key']}:{m['field']} is not text")
        return self.stash(
            f'<div class="measured-output"><pre><code>{html.escape(found.value)}</code></pre>'
            f'<p class="provenance-line">{self.provenance_line(m["key"], found.doc)}</p></div>'
        )

    def snippet_path(self, doc: dict, placeholder: str) -> Path:
        """The result's snippet, which must lie inside snippets/ (results are data, not trusted paths)."""
        path = (self.snippets_dir.parent / doc["snippet"]).resolve()
        if not path.is_relative_to(self.snippets_dir.resolve()):
            self.fail(placeholder, f"result {doc.get('key')!r} names the snippet {doc['snippet']!r}, outside snippets/")
        return path

    def data_link(self, doc: dict) -> str:
        return f"{self.url_prefix()}{DOWNLOADS}/data/{doc['hardware']}/{doc['key']}.json"

    def snippet_link(self, key: str) -> str:
        return f"{self.url_prefix()}{DOWNLOADS}/{key}.py"

    def provenance_line(self, key: str, doc: dict, borrowed: bool = True) -> str:
        """One line of provenance; ``borrowed=False`` for a set a figure asked for by name."""
        prov = doc["provenance"]
        note = (
            f"<strong>Not measured on {html.escape(self.hardware)}; reference data:</strong> "
            if borrowed and doc["hardware"] != self.hardware
            else ""
        )
        if "derived_from" in doc:
            return (
                f"{note}Computed by <code>{html.escape(doc['snippet'])}</code> from "
                f"{html.escape(', '.join(doc['derived_from']))}, measured on {html.escape(_short_versions(prov))}"
            )
        return (
            f"{note}Measured by <code>{html.escape(doc['snippet'])}</code> on {html.escape(_short_versions(prov))} "
            f'(<a download href="{html.escape(self.data_link(doc))}">raw data</a>)'
        )

    def provenance(self, key: str, placeholder: str) -> str:
        doc = self.doc(key, placeholder)
        prov = doc["provenance"]
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in sorted(prov.items())
        )
        rows += f"<tr><td>snippet hash</td><td><code>{html.escape(doc['snippet_hash'][:16])}</code></td></tr>"
        snippet = self.snippet_path(doc, placeholder)
        links = f'<a download href="{html.escape(self.data_link(doc))}">raw data (JSON)</a>'
        if snippet.exists():
            links += (
                f' · <a download href="{html.escape(self.snippet_link(key))}">the snippet as one file that runs '
                f"alone ({html.escape(snippet.name)})</a>"
            )
        return self.stash(
            f'<details class="provenance"><summary>Provenance of <code>{html.escape(key)}</code>: '
            f"{html.escape(_short_versions(prov))}</summary><table>{rows}</table><p>{links}</p></details>"
        )

    def interval(self, ref: str, placeholder: str) -> Interval:
        """The range an operand of a claim can take: a literal is exact; a summary spans its 10th
        to 90th percentiles over every process; a plain number, its values over the processes."""
        ref = ref.strip()
        m = VALUE.match(ref)
        if not m:
            try:
                x = float(ref)
            except ValueError:
                self.fail(placeholder, f"{ref!r} is neither module/snippet:field nor a number")
            return Interval(x, x, ref)
        if m["fmt"]:
            self.fail(placeholder, f"{ref!r}: an operand of a claim takes no format")
        if m["field"].endswith(".median"):
            self.fail(placeholder, f"{ref}: a claim compares spreads, not medians; name the summary itself")
        found = self.find(m["key"], m["field"], placeholder)
        values = self.across_processes(found.doc, m["field"], placeholder)
        if any(store.is_summary(v) and v["n"] < 3 for v in values):
            self.fail(placeholder, f"{ref} has fewer than 3 samples: too few for a claim to rest on its spread")
        if all(store.is_summary(v) for v in values):
            lo, hi = min(v["p10"] for v in values), max(v["p90"] for v in values)
        elif all(store.is_number(v) for v in values):
            lo, hi = min(values), max(values)
        else:
            self.fail(placeholder, f"{ref} is not a number or a timing summary")
        shown = f"{lo:.4g}" if lo == hi else f"[{lo:.4g}, {hi:.4g}]"
        return Interval(lo, hi, f"{ref.split(':')[-1]} = {shown}")

    def paired(self, a_ref: str, b_ref: str, placeholder: str) -> list[list[float]] | None:
        """Per-round differences A - B, one list per process, where A and B were timed in the same
        interleaved rounds; else None. ``host_us_each`` returns ``{variant: summary}``, each
        summary keeping its ``rounds``, so two summaries count as one interleaved run only if both
        keep rounds of one length and their paths differ in exactly one dict key (the variant):
        ``step_us.eager`` and ``step_us.model_only``, or ``variants.eager.step_us`` and
        ``variants.jax_jit.step_us``; never two items of a list (two sizes of a sweep, each timed
        by its own call)."""
        ma, mb = VALUE.match(a_ref.strip()), VALUE.match(b_ref.strip())
        if not (ma and mb) or ma["key"] != mb["key"]:
            return None
        try:
            pa, pb = store.split_path(ma["field"]), store.split_path(mb["field"])
        except KeyError:
            return None
        differ = [(x, y) for x, y in zip(pa, pb) if x != y]
        if len(pa) != len(pb) or len(differ) != 1 or differ[0][0][1] is not None or differ[0][1][1] is not None:
            return None
        fa, fb = self.find(ma["key"], ma["field"], placeholder), self.find(mb["key"], mb["field"], placeholder)
        if "derived_from" in fa.doc or fa.doc is not fb.doc:
            return None
        xs = self.across_processes(fa.doc, ma["field"], placeholder)
        ys = self.across_processes(fb.doc, mb["field"], placeholder)
        diffs = []
        for x, y in zip(xs, ys):
            rx, ry = (v.get("rounds") if isinstance(v, dict) else None for v in (x, y))
            if not rx or not ry or len(rx) != len(ry):
                return None
            diffs.append([p - q for p, q in zip(rx, ry)])
        return diffs

    def claim(self, body: str, placeholder: str) -> str:
        """``{{ assert A < B }}`` holds only if the spreads are separated, not the medians:

        - where A and B were timed in the same interleaved rounds (both summaries of one result keep
          their per-round ``rounds``), the per-round difference A - B must be below 0 up to its 90th
          percentile (nearest rank) in every process;
        - otherwise the whole range of A must lie below the whole range of B: A's 90th percentile
          (the largest over its processes) under B's 10th (the smallest). A literal is exact.

        On the reference hardware a claim that does not hold stops the build; on any other hardware
        the page marks it. Every other set's verdict goes on the mark too (``data-hw-fails``), for
        hardware.js to show when the reader selects that set. A set decides a claim only on its own
        measurements: where it lacks an operand (borrowed from the reference, or too few samples),
        the claim is not marked there."""
        if self.hardware == store.REFERENCE_HARDWARE:
            holds, shown = self.verdict(body, placeholder)
            if not holds:
                self.fail(
                    placeholder,
                    f"the prose claims this, but the measured spreads overlap or reverse: {shown}: "
                    "re-read the paragraph against the numbers, and reword or drop the claim",
                )
            fails_here = False
        else:
            fails_here = self.fails_on_own_data(body, placeholder)
        fails = [self.hardware] if fails_here else []
        fails += [hw for hw, f in self.per_set(lambda: self.fails_on_own_data(body, placeholder)).items() if f]
        if not fails:
            return ""
        self.switchable += 1
        text = (
            f"[on {html.escape(self.hardware)} the measurement does not bear out the claim next to this mark]"
            if fails_here
            else ""  # hardware.js writes it when the reader selects a set it fails on
        )
        return self.stash(
            f'<span class="claim-fails" data-hw-fails="{html.escape(" ".join(fails))}" '
            f'title="{html.escape(body)}"{"" if fails_here else " hidden"}>{text}</span>'
        )

    def fails_on_own_data(self, body: str, placeholder: str) -> bool:
        """Whether a claim fails on the page's set, decided on that set's own measurements only
        (False where it cannot be decided there: an operand borrowed from the reference, or one the
        set lacks or has too few samples of)."""
        with self.on_set(self.hardware):
            try:
                holds, _ = self.verdict(body, placeholder)
            except (PlaceholderError, KeyError, store.ResultError):
                return False
            return not holds and not self.borrowed

    def verdict(self, body: str, placeholder: str) -> tuple[bool, str]:
        """Whether a claim holds (the rule is in ``claim``), and the numbers it was decided on."""
        m = re.fullmatch(r"(.+?)\s*(<=|>=|<|>)\s*(.+)", body)
        if not m:
            self.fail(placeholder, "an assert is written {{ assert A < B }} (<, >, <=, >=)")
        op = m[2]
        diffs = self.paired(m[1], m[3], placeholder)
        if diffs is not None:
            hi = max(stats.percentile(sorted(d), 0.9) for d in diffs)
            lo = min(stats.percentile(sorted(d), 0.1) for d in diffs)
            holds = {"<": hi < 0, "<=": hi <= 0, ">": lo > 0, ">=": lo >= 0}[op]
            shown = f"per-round {m[1].split(':')[-1]} - {m[3].split(':')[-1]} in [{lo:.4g}, {hi:.4g}] (p10-p90)"
        else:
            a, b = self.interval(m[1], placeholder), self.interval(m[3], placeholder)
            holds = {"<": a.hi < b.lo, "<=": a.hi <= b.lo, ">": a.lo > b.hi, ">=": a.lo >= b.hi}[op]
            shown = f"{a.text} {op} {b.text}"
        return holds, shown

    def cited(self, body: str, placeholder: str) -> str:
        value, bar, source = (s.strip() for s in body.partition("|"))
        if not bar or not value or not source:
            self.fail(placeholder, "a cited figure needs both halves: {{ cited VALUE | SOURCE }}")
        return self.stash(
            f'<span class="cited" title="{html.escape("cited, not measured here: " + source)}" {TAPPABLE}>'
            f"{html.escape(value)}</span>"
        )

    def hardware_sets(self, rest: str, placeholder: str) -> str:
        """A table of every hardware set: its name on the site, folder, versions, dates, ceilings. A
        plain table in a div: Material styles and scroll-wraps tables that carry no class of their own."""
        rows = []
        for hw in self.ordered_sets(store.hardware_sets(self.results_dir)):
            try:
                docs = [store.load(p) for p in store.result_files(hw, self.results_dir)]
            except store.ResultError as exc:
                self.fail(placeholder, str(exc))
            if not docs:
                continue
            prov = docs[0]["provenance"]
            dates = sorted(str(d["provenance"]["date"])[:10] for d in docs)
            ceil = self.results_dir / hw / "methodology" / "ceilings.json"
            copy = gemm = "—"
            if ceil.exists():
                c = store.load(ceil)["data"]
                try:
                    copy, gemm = (
                        f"{v:,.0f}" if v >= 100 else f"{v:.3g}"  # a CPU set's ceilings are small numbers
                        for v in (c["copy"]["GBps"]["median"], c["gemm"]["TFLOPs"]["median"])
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    self.fail(placeholder, f"{ceil}: no copy.GBps / gemm.TFLOPs summary ({exc!r})")
            processes = max(d["provenance"].get("processes", 1) for d in docs)
            cells = [
                store.set_label(hw, self.results_dir),
                hw,
                prov["gpu"],
                prov["driver"],
                prov["cuda"],
                prov["torch"],
                prov["triton"],
                prov["python"],
                prov["cpu"],
                f"{dates[0]} to {dates[-1]}",
                str(len(docs)),
                str(processes),
                copy,
                gemm,
            ]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        head = [
            "set",
            "folder",
            "GPU",
            "driver",
            "CUDA",
            "torch",
            "triton",
            "Python",
            "CPU",
            "measured",
            "results",
            "processes (most)",
            "copy GB/s",
            "bf16 GEMM TFLOP/s",
        ]
        return self.stash(
            '<div class="hardware-sets"><table><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table></div>"
        )

    def scoreboard(self, rest: str, placeholder: str) -> str:
        """``{{ scoreboard }}``: every race stored for this hardware (coursekit/scoreboard.py), one
        row each: what the course wrote, its peer, both times, the ratio and its spread, the target and
        whether it is met, with links to the chapter, the snippet and the raw data. A missed target is a
        row like the others, marked."""
        if rest.strip():
            self.fail(placeholder, "the scoreboard takes no arguments: {{ scoreboard }}")
        try:
            rows = scoreboard.rows(self.hardware, self.results_dir)
        except store.ResultError as exc:
            self.fail(placeholder, str(exc))
        if not rows:
            self.fail(placeholder, f"no result of {self.hardware!r} stores a race (data.races)")
        prefix = self.url_prefix()
        body = []
        for r in rows:
            doc = self.lookup(r["key"], "").doc
            num = lambda v, fmt: self.measured_span(format(v, fmt), doc, [])  # noqa: E731
            digits = ",.1f" if r["theirs"] < 10_000 else ",.0f"
            spread = "per-round ratios, same rounds" if r["paired"] else "ratio of medians; spread from both ends"
            p10 = self.measured_span(format(r["ratio_p10"], ".2f"), doc, [f"10th percentile of the ratio: {spread}"])
            ratio = f"{num(r['ratio'], '.2f')} <small>(p10 {p10})</small>"
            unit = UNIT_TEXT.get(r["unit"], f" {html.escape(r['unit'])}")
            verdict = "meets" if r["meets"] else "<strong>misses</strong>"
            chapter = r["chapter"].removesuffix(".md")
            cells = [
                html.escape(r["name"]),
                html.escape(r["peer"]),
                f"{num(r['ours'], digits)}{unit}",
                f"{num(r['theirs'], digits)}{unit}",
                ratio,
                f'<span class="constant">{r["bar"]:.2f}</span>',
                verdict,
                f'<a href="{prefix}{html.escape(chapter)}/">{html.escape(chapter.split("/")[-1])}</a>',
                f'<a href="{self.snippet_link(r["key"])}">{html.escape(r["key"])}.py</a>',
                f'<a href="{self.data_link(doc)}">json</a>',
            ]
            body.append(
                f'<tr class="{"meets" if r["meets"] else "misses"}">'
                + "".join(f"<td>{c}</td>" for c in cells)
                + "</tr>"
            )
        met = sum(r["meets"] for r in rows)
        head = [
            "Program",
            "Peer",
            "Ours",
            "Theirs",
            "Ratio (theirs / ours)",
            "Target",
            "Verdict",
            "Chapter",
            "Snippet",
            "Data",
        ]
        return self.stash(
            f'<p class="scoreboard-summary">{len(rows)} races on {html.escape(self.hardware)}: '
            f"{met} meet their target, {len(rows) - met} miss it.</p>"
            '<div class="md-typeset__scrollwrap"><div class="md-typeset__table"><table class="scoreboard"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>"
            + "".join(body)
            + "</tbody></table></div></div>"
        )

    def reading_time(self, pages: str, placeholder: str) -> str:
        """Minutes of prose in one page, or the sum over several; a stub reads "in preparation"."""
        minutes, written = 0, 0
        for page in pages.split():
            path = self.docs_dir / page
            if not path.exists():
                self.fail(placeholder, f"no page {path}")
            text = path.read_text()
            if STUB_MARK in text:
                continue
            minutes += teaching.measure(text).reading_minutes
            written += 1
        text = f"{minutes} min" if written else "in preparation"
        return self.stash(f'<span class="reading-time">{text}</span>')

    def chapter_box(self, rest: str, placeholder: str) -> str:
        """``{{ chapter-box }}`` under a chapter's title: what it builds on (includes/chapters.yml), its
        reading time, the snippets it runs (their downloads), the GPU seconds their stored results
        took on the reference set, and its notebook; ``{{ chapter-box m02 }}`` names the module.
        ``{{ chapter-box all }}`` is a table of every module (what its downloads import, the GPUs
        and GPU seconds its results took) and ``{{ chapter-box total }}`` the GPU time of every
        stored result: the "Run it yourself" page. The data: coursekit/chapters.py."""
        from coursekit import chapters

        arg, prefix, reference = rest.strip(), self.url_prefix(), store.REFERENCE_HARDWARE

        def gpu_time(spent, text: str) -> str:
            doc = {
                "snippet": "coursekit/chapters.py:spent()",
                "hardware": reference,
                "provenance": spent.provenance,
                "derived_from": list(spent.results),
            }
            how = (
                f"GPU seconds the stored results took on the reference set, {reference}: each result's run time "
                f"(every process it was measured in) times the GPUs it held, summed; measured {spent.dates[0]} "
                f"to {spent.dates[1]}"
            )
            return self.measured_span(text, doc, [how])

        def link(chapter) -> str:
            url = prefix + chapter.page.removesuffix(".md") + "/"
            return f'<a href="{html.escape(url)}">{html.escape(chapter.title)}</a>'

        try:
            known = chapters.chapters(self.docs_dir)
            every = [store.snippet_key(p) for p in store.snippet_files(self.snippets_dir)]
            if arg == "total":
                spent = chapters.spent(every, reference, self.results_dir)
                return self.stash(gpu_time(spent, f"{spent.seconds:,.0f} GPU seconds"))
            if arg == "all":
                rows = []
                for module, chapter in known.items():
                    keys = chapters.snippet_keys(module, self.snippets_dir)
                    spent = chapters.spent(keys, reference, self.results_dir)
                    required, optional = chapters.requirements(module, self.snippets_dir)
                    imports = [f"<code>{html.escape(n)}</code>" for n in required]
                    imports += [f"<code>{html.escape(n)}</code> (optional)" for n in optional]
                    before = ", ".join(p.removeprefix("m") for p in chapter.prerequisites) or "—"
                    cells = [link(chapter), before, ", ".join(imports), str(spent.gpus), str(len(keys))]
                    rows.append(cells + [gpu_time(spent, f"{spent.seconds:,.0f}")])
                spent = chapters.spent(every, reference, self.results_dir)
                others = sorted({k.split("/")[0] for k in every} - set(known))
                rows.append(
                    [f"All, with {', '.join(others)}" if others else "All", "", "", str(spent.gpus), str(len(every))]
                    + [gpu_time(spent, f"{spent.seconds:,.0f}")]
                )
                head = ["Module", "Builds on", "Imports", "GPUs", "Snippets", "GPU seconds (reference)"]
                return self.stash(  # no class: Material styles it, and wraps it to scroll, as a Markdown table
                    "<table><thead><tr>"
                    + "".join(f"<th>{h}</th>" for h in head)
                    + "</tr></thead><tbody>"
                    + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
                    + "</tbody></table>"
                )
            page = self.page()
            module = arg or (chapters.module_of(page.relative_to(self.docs_dir).as_posix()) if page else None)
            if module not in known:
                self.fail(
                    placeholder,
                    f"{module or 'this page'} is no module of includes/chapters.yml: a chapter box goes on a "
                    "chapter page (docs/part-*/NN-*.md) or names its module, {{ chapter-box m02 }}",
                )
            chapter = known[module]
            keys = chapters.snippet_keys(module, self.snippets_dir)
            spent = chapters.spent(keys, reference, self.results_dir)
        except chapters.ChapterError as exc:
            self.fail(placeholder, str(exc))
        if not (self.docs_dir / chapter.notebook).exists():
            self.fail(placeholder, f"no {self.docs_dir / chapter.notebook}: run `python scripts/notebooks.py`")
        runs = ", ".join(
            f'<a download href="{html.escape(self.snippet_link(k))}"><code>{html.escape(k.split("/")[1])}.py</code></a>'
            for k in keys
        )
        gpus = f" on {spent.gpus} GPUs" if spent.gpus > 1 else ""
        before = ", ".join(link(known[p]) for p in chapter.prerequisites) or "nothing: start here"
        items = [
            f"<strong>Builds on</strong>: {before}",
            f"<strong>Reading time</strong>: {self.reading_time(chapter.page, placeholder)}",
            f"<strong>Runs</strong> (each snippet a file that runs alone): {runs}",
            f"<strong>GPU time</strong>: {gpu_time(spent, f'{spent.seconds:,.0f} s')} for "
            f"its {len(spent.results)} stored results, {spent.processes} processes{gpus}, on the reference set",
            f'<strong>Notebook</strong>: <a href="{prefix}{html.escape(chapter.notebook.removesuffix(".ipynb"))}/">'
            "this chapter's code run on a CPU, and its figures redrawn from the stored results</a>",
        ]
        return self.stash(
            '<div class="admonition info chapter-box"><p class="admonition-title">This chapter</p><ul>'
            + "".join(f"<li>{item}</li>" for item in items)
            + "</ul></div>"
        )

    # ------------------------------------------------------------------ dispatch
    def fill(self, m: re.Match) -> str:
        placeholder, body = m.group(0), m["body"]
        head, _, rest = body.partition(" ")
        handler = self.kinds.get(head)
        if handler is not None:
            return handler(rest.strip(), placeholder)
        v = VALUE.match(body)
        if v:
            return self.value(v, placeholder)
        # Nothing else uses {{ }} on this site, so anything else is a typo ({{ figures ... }},
        # {{ M02/... }}) and must not slip through as literal text. Write \{{ for a literal.
        self.fail(
            placeholder,
            "not a placeholder this site knows: a value is {{ module/snippet:field | format }}; the other kinds are "
            + ", ".join(self.kinds)
            + " (write \\{{ for literal braces)",
        )

    def check_leftovers(self, line: str) -> None:
        """No stray ``{{``/``}}`` outside code: a malformed placeholder must not reach the page."""
        # inline code is filled like prose (a kernel name can sit in backticks), so it is checked too
        text = re.sub(r"\\\{\{[^{}]*?\}\}", " ", line).replace("\\{{", "  ")
        for m in PLACEHOLDER.finditer(text):
            before, after = text[: m.start()], text[m.end() :]
            if before.endswith("{") or after.startswith("}"):
                self.fail(m.group(0), "extra braces around a placeholder ({{{ ... }}})")
        rest = PLACEHOLDER.sub(" ", text)
        for stray in ("{{", "}}"):
            if stray in rest:
                i = rest.index(stray)
                self.fail(
                    line.strip()[:80],
                    f"a stray {stray!r} at {rest[max(0, i - 20) : i + 20]!r}: a placeholder is "
                    "{{ module/snippet:field | format }} (write \\{{ for literal braces)",
                )

    def run(self, lines):
        self.check_hardware()
        sets = store.hardware_sets(self.results_dir)
        self.other_sets = self.ordered_sets([hw for hw in sets if hw != self.hardware])
        self.switchable = 0
        fence = None  # the opening fence (character run) while inside a fenced block
        out = []
        for self.line, line in enumerate(lines, 1):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m["fence"]
            elif (
                fence is not None
                and m
                and m["fence"][0] == fence[0]
                and len(m["fence"]) >= len(fence)
                and not m["info"].strip()
            ):
                fence = None
            elif fence is None:
                self.check_leftovers(line)
                line = PLACEHOLDER.sub(self.fill, line)
                line = line.replace("\\{{", "{{")
            out.append(line)
        if self.switchable:  # a page that shows something measured: hardware.js builds its set selector
            out += ["", self.set_marker()]  # a block of its own (a trailing "" would put it in a <p>)
        return out


class CourseResultsExtension(Extension):
    def __init__(self, **kwargs):
        self.config = {
            "hardware": [store.REFERENCE_HARDWARE, "hardware folder under build_results/ (env COURSE_HARDWARE wins)"],
            "results_dir": ["build_results", "results store, relative to the working directory"],
            "snippets_dir": ["snippets", "snippets folder, relative to the working directory"],
            "docs_dir": ["docs", "docs folder, for naming the page in errors"],
        }
        super().__init__(**kwargs)

    def extendMarkdown(self, md):
        # After pymdownx.snippets (32), so included files are filled too, and after
        # normalize_whitespace (30), which would strip the stash markers of the HTML we insert;
        # before fenced code blocks (25) and raw HTML blocks (20).
        md.preprocessors.register(ResultsPreprocessor(md, self.getConfigs()), "course_results", 28)


def makeExtension(**kwargs):
    return CourseResultsExtension(**kwargs)
