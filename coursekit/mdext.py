"""Markdown extension: measured numbers, figures and provenance from build_results/.

Placeholders (one syntax family, ``{{ ... }}``):

    {{ m02/host_overhead:host_us.no_grad | .1f }}   a value: data.<path> of result m02/host_overhead
    {{ m02/crossover:bytes | /1e6 .0f }}            scaled first: bytes printed as MB
    {{ m02/crossover:@provenance.torch }}           a field of the result document itself
    {{ output m02/profile_breakdown:table }}        a stored text (a printed table) as a block
    {{ figure m02/crossover }}                      function crossover() of snippets/m02/figures.py
    {{ m03/derived:by_tokens.1.predicted_us | .0f }} a value computed from stored results: where no
                                                    result m03/derived exists, function derived() of
                                                    snippets/m03/figures.py, called like a figure
    {{ provenance m02/host_overhead }}              an expander: hardware, versions, date, downloads
    {{ cited 4.8 TB/s | NVIDIA H200 datasheet }}    a number from a named source, not measured here
    {{ hardware-sets }}                             a table of every hardware folder in build_results/
    {{ assert m02/a:x.y < m02/b:z }}                a claim the prose makes about two measurements
                                                    (<, >, <=, >=; medians); renders nothing
    {{ reading-time part-j/02-eager-per-op.md }}    minutes of prose at 220 words a minute (pages summed)

A value that ends at a timing summary prints its median; hovering shows the spread and where it
was measured. A placeholder naming a missing result, field or figure stops the build with an
error that names the page and the key. The extension is a Python-Markdown preprocessor that runs
after pymdownx.snippets (priority 32), so placeholders inside included files are filled too.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import os
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from coursekit import results as store

PLACEHOLDER = re.compile(r"(?<!\\)\{\{\s*(?P<body>[^{}]+?)\s*\}\}")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
VALUE = re.compile(r"^(?P<key>[a-z0-9_]+/[a-z0-9_]+)\s*:\s*(?P<field>@?[\w.\-]+)\s*(?:\|\s*(?P<fmt>[^|]*))?$")
WORDS_PER_MINUTE = 220
STUB_MARK = '!!! note "In preparation"'


try:  # under MkDocs, a BuildError stops the build with the message and no traceback
    from mkdocs.exceptions import BuildError as _BuildFailure
except ImportError:  # plain Python-Markdown, or another site generator
    _BuildFailure = Exception


class PlaceholderError(_BuildFailure):
    """A placeholder that cannot be filled: the build must stop."""


def _pages_containing(text: str, docs_dir: Path, snippets_dir: Path) -> str:
    hits = [
        str(p)
        for d in (docs_dir, snippets_dir)
        if d.is_dir()
        for p in sorted(d.rglob("*"))
        if p.suffix in (".md", ".py") and text in p.read_text(errors="replace")
    ]
    return ", ".join(hits) or "an unknown page"


def prose_words(markdown_text: str) -> int:
    """Words of prose: outside code fences, HTML tags, placeholders and snippet includes."""
    text = re.sub(r"^(```|~~~).*?^\1", " ", markdown_text, flags=re.S | re.M)
    text = re.sub(r"<[^>]+>|\{\{.*?\}\}|--8<--.*", " ", text)
    return len(re.findall(r"[A-Za-z0-9][\w'’.-]*", text))


def _fmt(value, spec: str) -> str:
    """Python format spec, optionally after a scale: "/1e6 .0f" prints value / 1e6 with .0f."""
    spec = (spec or "").strip()
    if isinstance(value, str):
        return value
    scale = re.match(r"^([/*])\s*([0-9.e+-]+)\s*", spec)
    if scale:
        factor = float(scale[2])
        value = value / factor if scale[1] == "/" else value * factor
        spec = spec[scale.end() :]
    if isinstance(value, float) and spec.endswith("d"):
        value = round(value)
    return format(value, spec)


def _data_uri(text: str, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(text.encode()).decode()}"


def _short_versions(prov: dict) -> str:
    parts = [prov.get("gpu", "?")]
    parts += [f"{k} {prov[k]}" for k in ("torch", "triton", "jax") if prov.get(k)]
    parts.append(f"CUDA {prov.get('cuda')}")
    parts.append(str(prov.get("date", "?"))[:10])
    return ", ".join(parts)


class ResultsPreprocessor(Preprocessor):
    def __init__(self, md, config):
        super().__init__(md)
        self.hardware = os.environ.get("COURSE_HARDWARE") or config["hardware"]
        self.results_dir = Path(config["results_dir"])
        self.snippets_dir = Path(config["snippets_dir"])
        self.docs_dir = Path(config["docs_dir"])
        self.fallbacks: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def fail(self, placeholder: str, why: str):
        where = _pages_containing(placeholder, self.docs_dir, self.snippets_dir)
        raise PlaceholderError(f"{where}: {placeholder} — {why} (hardware {self.hardware!r})")

    def doc(self, key: str, placeholder: str) -> dict:
        try:
            return self.lookup(key, "").doc
        except (KeyError, store.ResultError) as exc:
            self.fail(placeholder, str(exc).strip("'\""))

    def lookup(self, key: str, field: str) -> store.Lookup:
        """The selected hardware's result; where it has none, the reference hardware's, marked.

        A machine that measured only some modules can still build the whole site: the numbers it
        lacks come from the reference set, and each such number says so (class "fallback").
        """
        try:
            return store.lookup(key, field, self.hardware, self.results_dir)
        except KeyError:
            if (
                self.hardware == store.REFERENCE_HARDWARE
                or not store.result_path(key, store.REFERENCE_HARDWARE, self.results_dir).exists()
            ):
                raise
            if store.result_path(key, self.hardware, self.results_dir).exists():
                raise  # the result exists here but lacks the field: that is an error, not a gap
            found = store.lookup(key, field, store.REFERENCE_HARDWARE, self.results_dir)
            self.fallbacks.add(key)
            return found

    def stash(self, html_text: str) -> str:
        return self.md.htmlStash.store(html_text)

    # ------------------------------------------------------------------ kinds
    def value(self, m: re.Match, placeholder: str) -> str:
        key, field, fmt = m["key"], m["field"], m["fmt"]
        if field.startswith("@"):
            doc = self.doc(key, placeholder)
            node = doc
            for part in field[1:].split("."):
                if not isinstance(node, dict) or part not in node:
                    self.fail(placeholder, f"no field {field[1:]!r} in result {key!r}")
                node = node[part]
        else:
            found = self.find(key, field, placeholder)
            node, doc = found.value, found.doc
        spread = ""
        try:
            if isinstance(node, dict) and "median" in node:
                spread = (
                    f"median of {node['n']}; 10th–90th percentile "
                    f"{_fmt(node['p10'], fmt)}–{_fmt(node['p90'], fmt)} {node.get('unit', '')}; "
                )
                node = node["median"]
            if isinstance(node, (dict, list)) or node is None:
                self.fail(placeholder, f"{key}:{field} is a {type(node).__name__}, not a number or text")
            text = _fmt(node, fmt)
        except (ValueError, TypeError, ZeroDivisionError) as exc:
            self.fail(placeholder, f"format {fmt!r} does not apply to {key}:{field}: {exc}")
        source = (
            f"computed by {doc['snippet']} from {', '.join(doc['derived_from'])}, measured"
            if "derived_from" in doc
            else f"measured by {doc['snippet']}"
        )
        title = f"{spread}{source} on {_short_versions(doc['provenance'])}"
        css = "measured"
        if doc["hardware"] != self.hardware:
            title = f"not measured on {self.hardware}: the {doc['hardware']} value; " + title
            css += " fallback"
        return self.stash(f'<span class="{css}" title="{html.escape(title)}">{html.escape(text)}</span>')

    def call_figures(self, name: str, placeholder: str):
        """Call function <func> of snippets/<module>/figures.py with the results it asks for."""
        if not re.fullmatch(r"[a-z0-9_]+/[a-z0-9_]+", name):
            self.fail(placeholder, "a figure is named <module folder>/<function in its figures.py>")
        module_dir, func = name.split("/")
        path = self.snippets_dir / module_dir / "figures.py"
        if not path.exists():
            self.fail(placeholder, f"no {path}")
        spec = importlib.util.spec_from_file_location(f"figures_{module_dir}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fn = getattr(mod, func, None)
        if not callable(fn):
            self.fail(placeholder, f"{path} has no function {func}()")
        used: dict[str, dict] = {}

        def results(key: str) -> dict:
            used[key] = self.doc(key, placeholder)
            return used[key]["data"]

        try:
            return fn(results), used, path
        except PlaceholderError:
            raise
        except Exception as exc:  # a bug in the figure code: name the figure, not just the page
            self.fail(placeholder, f"{path}:{func}() raised {type(exc).__name__}: {exc}")

    def find(self, key: str, field: str, placeholder: str) -> store.Lookup:
        """A stored value, or one that snippets/<module>/figures.py computes from stored values."""
        try:
            return self.lookup(key, field)
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
        computed, used, path = self.call_figures(key, placeholder)
        try:
            value = store.walk(computed, field, f"{key}: ", f"what {path}:{func}() returns")
        except KeyError as exc:
            self.fail(placeholder, str(exc).strip("'\""))
        if not used:
            self.fail(placeholder, f"{path}:{func}() read no stored result, so it measured nothing")
        first = next(iter(used.values()))
        hardware = next((d["hardware"] for d in used.values() if d["hardware"] != self.hardware), self.hardware)
        doc = {
            "snippet": f"snippets/{module_dir}/figures.py:{func}()",
            "hardware": hardware,
            "provenance": first["provenance"],
            "derived_from": sorted(used),
        }
        return store.Lookup(value, doc, path)

    def figure(self, name: str, placeholder: str) -> str:
        module_dir, _, func = name.partition("/")
        fig, used, path = self.call_figures(name, placeholder)
        fig.layout.template = None  # the page's palette is applied in the browser (figures.js)
        spec_json = fig.to_json()
        if len(spec_json) > 400_000:
            self.fail(placeholder, f"figure data is {len(spec_json)} bytes; keep a figure under 400 kB")
        caption = "; ".join(self.provenance_line(k, d) for k, d in used.items())
        return self.stash(
            f'<figure class="course-figure" id="fig-{module_dir}-{func}">'
            f'<div class="course-plot" data-plotly="{html.escape(spec_json)}"></div>'
            f'<figcaption class="provenance-line">{caption}</figcaption></figure>'
        )

    def output(self, body: str, placeholder: str) -> str:
        m = VALUE.match(body)
        if not m:
            self.fail(placeholder, "an output is written {{ output module/snippet:field }}")
        found = self.find(m["key"], m["field"], placeholder)
        if not isinstance(found.value, str):
            self.fail(placeholder, f"{m['key']}:{m['field']} is not text")
        return self.stash(
            f'<div class="measured-output"><pre><code>{html.escape(found.value)}</code></pre>'
            f'<p class="provenance-line">{self.provenance_line(m["key"], found.doc)}</p></div>'
        )

    def provenance_line(self, key: str, doc: dict) -> str:
        prov = doc["provenance"]
        raw = _data_uri(json.dumps(doc, indent=1), "application/json")
        name = key.replace("/", "_")
        note = (
            f"<strong>Not measured on {html.escape(self.hardware)}; reference data:</strong> "
            if doc["hardware"] != self.hardware
            else ""
        )
        if "derived_from" in doc:
            return (
                f"{note}Computed by <code>{html.escape(doc['snippet'])}</code> from "
                f"{html.escape(', '.join(doc['derived_from']))}, measured on {html.escape(_short_versions(prov))}"
            )
        return (
            f"{note}Measured by <code>{html.escape(doc['snippet'])}</code> on {html.escape(_short_versions(prov))} "
            f'(<a download="{name}.json" href="{raw}">raw data</a>)'
        )

    def provenance(self, key: str, placeholder: str) -> str:
        doc = self.doc(key, placeholder)
        prov = doc["provenance"]
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in sorted(prov.items())
        )
        rows += f"<tr><td>snippet hash</td><td><code>{doc['snippet_hash'][:16]}</code></td></tr>"
        snippet = self.snippets_dir.parent / doc["snippet"]
        links = f'<a download="{key.replace("/", "_")}.json" href="{_data_uri(json.dumps(doc, indent=1), "application/json")}">raw data (JSON)</a>'
        if snippet.exists():
            links += f' · <a download="{snippet.name}" href="{_data_uri(snippet.read_text(), "text/x-python")}">the snippet ({snippet.name})</a>'
        return self.stash(
            f'<details class="provenance"><summary>Provenance of <code>{html.escape(key)}</code>: '
            f"{html.escape(_short_versions(prov))}</summary><table>{rows}</table><p>{links}</p></details>"
        )

    def _number(self, ref: str, placeholder: str) -> float:
        m = VALUE.match(ref.strip())
        if not m:
            try:
                return float(ref)
            except ValueError:
                self.fail(placeholder, f"{ref!r} is neither module/snippet:field nor a number")
        node = self.find(m["key"], m["field"], placeholder).value
        node = node["median"] if isinstance(node, dict) and "median" in node else node
        if not isinstance(node, (int, float)):
            self.fail(placeholder, f"{ref} is not a number")
        return node

    def claim(self, body: str, placeholder: str) -> str:
        m = re.fullmatch(r"(.+?)\s*(<=|>=|<|>)\s*(.+)", body)
        if not m:
            self.fail(placeholder, "an assert is written {{ assert A < B }} (<, >, <=, >=)")
        left, op, right = self._number(m[1], placeholder), m[2], self._number(m[3], placeholder)
        holds = {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]
        if holds:
            return ""
        if self.hardware == store.REFERENCE_HARDWARE:
            self.fail(
                placeholder,
                f"the prose claims this, but the measurement gives {left:.4g} {op} {right:.4g}: "
                f"re-read the paragraph against the new numbers",
            )
        return self.stash(
            f'<span class="claim-fails" title="{html.escape(body)}">[on {html.escape(self.hardware)} '
            f"the measurement does not bear out the claim next to this mark]</span>"
        )

    def cited(self, body: str, placeholder: str) -> str:
        if "|" not in body:
            self.fail(placeholder, "a cited figure needs its source: {{ cited VALUE | SOURCE }}")
        value, source = (s.strip() for s in body.split("|", 1))
        return self.stash(
            f'<span class="cited" title="{html.escape("cited, not measured here: " + source)}">'
            f"{html.escape(value)}</span>"
        )

    def hardware_sets(self) -> str:
        rows = []
        for hw in store.hardware_sets(self.results_dir):
            docs = [store.load(p) for p in sorted((self.results_dir / hw).rglob("*.json"))]
            if not docs:
                continue
            prov = docs[0]["provenance"]
            dates = sorted(str(d["provenance"]["date"])[:10] for d in docs)
            ceil = self.results_dir / hw / "methodology" / "ceilings.json"
            copy = gemm = "—"
            if ceil.exists():
                c = store.load(ceil)["data"]
                copy, gemm = f"{c['copy']['GBps']['median']:.0f}", f"{c['gemm']['TFLOPs']['median']:.0f}"
            cells = [
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
                copy,
                gemm,
            ]
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        head = [
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
            "copy GB/s",
            "bf16 GEMM TFLOP/s",
        ]
        return self.stash(
            '<table class="hardware-sets"><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )

    def reading_time(self, pages: str, placeholder: str) -> str:
        """Minutes of prose in one page, or the sum over several; a stub reads "in preparation"."""
        words, written = 0, 0
        for page in pages.split():
            path = self.docs_dir / page
            if not path.exists():
                self.fail(placeholder, f"no page {path}")
            text = path.read_text()
            if STUB_MARK in text:
                continue
            words += prose_words(text)
            written += 1
        if not written:
            return "in preparation"
        return f"{max(1, round(words / WORDS_PER_MINUTE))} min"

    # ------------------------------------------------------------------ dispatch
    def fill(self, m: re.Match) -> str:
        placeholder, body = m.group(0), m["body"]
        head, _, rest = body.partition(" ")
        rest = rest.strip()
        if head == "figure":
            return self.figure(rest, placeholder)
        if head == "provenance":
            return self.provenance(rest, placeholder)
        if head == "output":
            return self.output(rest, placeholder)
        if head == "cited":
            return self.cited(rest, placeholder)
        if head == "assert":
            return self.claim(rest, placeholder)
        if head == "hardware-sets":
            return self.hardware_sets()
        if head == "reading-time":
            return self.reading_time(rest, placeholder)
        v = VALUE.match(body)
        if v:
            return self.value(v, placeholder)
        # Nothing else uses {{ }} on this site, so anything else is a typo ({{ figures ... }},
        # {{ M02/... }}) and must not slip through as literal text. Write \{{ for a literal.
        self.fail(
            placeholder,
            "not a placeholder this site knows: a value is {{ module/snippet:field | format }}; "
            "the other kinds are figure, provenance, output, cited, assert, hardware-sets, "
            "reading-time (write \\{{ for literal braces)",
        )

    def run(self, lines):
        fence = None  # the opening fence (character run) while inside a fenced block
        out = []
        for line in lines:
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
                line = PLACEHOLDER.sub(self.fill, line)
                line = line.replace("\\{{", "{{")
            out.append(line)
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
