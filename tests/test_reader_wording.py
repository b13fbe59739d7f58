"""The site speaks to its reader only: nothing a reader can see says how the course was made.

The built site is read as a reader meets it: the text of every page (outside code, which shows the
course's own files as they are), the attributes a browser shows or reads out (hover titles,
aria-labels, alt texts) and the strings a figure draws (legend names, hover templates, titles,
tick and annotation texts, from each figure's JSON). None may speak of an issue or a review, the
seed or the outline a course was written from, a helper, a "bar" for what the course calls a target,
or the build's own machinery in a hover (a ``coursekit/….py:function()`` or a provenance field
name such as ``duration_s``).

Legitimate uses stay allowed, each by a pattern of its own: "issue" as a verb (a host issues
kernels; only the noun with an article is internal), a random seed, "barrier", and bars of a
chart (error bars, bar charts, "the two bars", a mode bar).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from conftest import ROOT  # noqa: F401  (the repository root on sys.path)

# (what it is, pattern, where it applies: "all" or "hover" for attributes and figures only)
INTERNAL = [
    ("an issue", re.compile(r"\b(?:the|this|an?|our|its) issue(?:'s|s)?\b(?!-)|\bissue #?\d+\b", re.I), "all"),
    ("a review", re.compile(r"\breview(?:s|ers?|ed|ing)?\b", re.I), "all"),
    ("the seed or syllabus", re.compile(r"\bthe seed(?:'s)?\b(?! (?:and|of|for|value))|\bsyllabus\b", re.I), "all"),
    ("the outline", re.compile(r"\boutline(?:'s|s)?\b", re.I), "all"),
    ("a helper", re.compile(r"\bhelpers? H\d\b", re.I), "all"),
    ("the build's code", re.compile(r"\bcoursekit/[\w/]+\.py:\w+"), "hover"),
    ("a provenance field", re.compile(r"\bduration_s\b|\(provenance \w+\)"), "hover"),
]
# "bar" for a target: the word near what a target does (met, missed, set, asked for) or written as
# a label ("the bar:", "Bar", "bar (µs)"); a bar of a chart is none of these
BAR = re.compile(r"\bbars?\b", re.I)
BAR_AS_TARGET = re.compile(r"\b(?:meets?|met|miss(?:es|ed)?|set|asks?|parity|verdict|scoreboard's)\b", re.I)
BAR_AS_LABEL = re.compile(r"bars?\s*(?::|\((?:µs|us)\)|$)", re.I)
BAR_OF_A_CHART = re.compile(
    r"\b(?:error|mode|progress|scroll|stacked|colou?red) bars?\b|\bbar (?:chart|graph|plot)s?\b", re.I
)
ALLOWED = re.compile(r"\bGitHub issues?\b", re.I)

HOVER_ATTRS = ("title", "aria-label", "alt", "placeholder", "aria-description")
FIGURE_ATTRS = ("data-plotly", "data-plotly-sets")
DRAWN_KEYS = ("text", "name", "hovertemplate", "hovertext", "ticktext", "texttemplate", "title")
NOT_PROSE = {"code", "pre", "script", "style", "kbd", "samp", "template"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Reader(HTMLParser):
    """A page's prose (outside code), hover and label attributes, and figure JSON."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.prose: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.figures: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.open.append(tag)
        for name, value in attrs:
            if value is None:
                continue
            if name in HOVER_ATTRS:
                self.attrs.append((name, value))
            elif name in FIGURE_ATTRS:
                self.figures.append(value)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open and self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if not NOT_PROSE.intersection(self.open):
            self.prose.append(data)


def drawn_strings(node, key=""):
    """Every string a figure's JSON puts on screen."""
    if isinstance(node, str):
        if key in DRAWN_KEYS:
            yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            if k not in ("bdata", "dtype", "shape", "customdata"):
                yield from drawn_strings(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from drawn_strings(v, key)


def internal_wording(text: str, where: str) -> list[str]:
    """Each internal phrase in ``text`` (one string the reader sees), with its context."""
    text = " ".join(text.split())
    found = []

    def say(what, m):
        window = text[max(0, m.start() - 50) : m.end() + 50]
        if not ALLOWED.search(window):
            found.append(f"{what} ({m.group(0)!r}) in {where}: …{window}…")

    for what, pattern, scope in INTERNAL:
        if scope == "all" or where != "text":
            for m in pattern.finditer(text):
                say(what, m)
    for m in BAR.finditer(text):
        window = text[max(0, m.start() - 60) : m.end() + 60]
        if BAR_OF_A_CHART.search(text[max(0, m.start() - 12) : m.end() + 8]):
            continue
        if BAR_AS_TARGET.search(window) or BAR_AS_LABEL.match(text, m.start()):
            say('"bar" for a target', m)
    return found


def page_problems(html_text: str) -> list[str]:
    reader = _Reader()
    reader.feed(html_text)
    problems = internal_wording(" ".join(reader.prose), "text")
    for name, value in reader.attrs:
        problems += internal_wording(value, f"{name}=")
    for spec in reader.figures:
        for s in drawn_strings(json.loads(spec)):
            problems += internal_wording(s, "a figure")
    return list(dict.fromkeys(problems))


def test_the_built_site_speaks_to_its_reader(built_site):
    site, _ = built_site
    pages = sorted(p for p in site.rglob("*.html") if "downloads" not in p.relative_to(site).parts)
    assert len(pages) >= 20
    problems = []
    for page in pages:
        problems += [f"{page.relative_to(site)}: {p}" for p in page_problems(page.read_text())]
    assert not problems, f"{len(problems)} internal phrases a reader sees:\n  " + "\n  ".join(problems)


def test_the_wording_check_catches_each_kind_and_spares_legitimate_uses():
    figure = json.dumps({"data": [{"name": "the bar: parity", "hovertemplate": "%{y} (issue 12)"}], "layout": {}})
    page = f"""<p>That is the issue's bar, set in review, of the outline's planned total. The seed's claim
    holds. It meets its bar. The host issues kernels and a barrier waits; see the GitHub issue for the bug.
    A random seed fixes the inputs. Read the two bars of each pair; error bars show the spread.</p>
    <span title="computed by coursekit/chapters.py:spent() (provenance duration_s)">1 s</span>
    <pre><code>seed = 0  # the bar: code is shown as it is</code></pre>
    <div class="course-plot" data-plotly='{figure}'></div>
    <table><thead><tr><th>Bar</th></tr></thead></table>"""
    found = page_problems(page)
    kinds = [p.split(" (")[0] for p in found]
    for kind in (
        "an issue",
        "a review",
        "the outline",
        "the seed or syllabus",
        "the build's code",
        "a provenance field",
    ):
        assert kind in kinds, (kind, found)
    bars = [p for p in found if p.startswith('"bar" for a target')]
    # "the bar", "its bar", the figure's "the bar:", the header "Bar"; not the chart's bars
    assert len(bars) == 4 and any("a figure" in p for p in bars), bars
    assert any("title=" in p for p in found) and any("issue 12" in p and "a figure" in p for p in found), found
    matched = " ".join(p.split(") in ")[0] for p in found)
    for fine in ("issues", "barrier", "GitHub", "random", "two bars", "error bars"):
        assert fine not in matched, (fine, found)
    assert not any("code is shown" in p for p in found), "code was read as prose"
