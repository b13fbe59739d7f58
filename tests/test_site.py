"""The site builds strictly, offline, with every placeholder filled, and fails loudly when one cannot be."""

import fnmatch
import html.parser
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import markdown
import plotly.offline
import pytest
from conftest import ROOT

from coursekit.mdext import PlaceholderError

PLOTLY_JS = ROOT / "docs" / "assets" / "javascripts" / f"plotly-basic-{plotly.offline.get_plotlyjs_version()}.min.js"


def test_strict_build_passes(built_site):
    """Untimed: scripts/bench_site.py measures how long it takes (no test asserts a wall-clock time)."""
    site, _ = built_site
    assert (site / "part-j" / "02-eager-per-op" / "index.html").exists()


def leftover_braces(html_text: str) -> list[str]:
    """Placeholder debris in a page's text outside code: any "{{" or "}}", and braces hugging a
    filled value ("{{{ x }}}" leaves "{7.3}")."""
    text = re.sub(r"<(pre|script|style)\b[^>]*>.*?</\1>", " ", html_text, flags=re.S)  # inline code is checked
    hugging = re.findall(r"\{\s*<span class=\"(?:measured|cited)[^>]*>[^<]*</span>\s*\}", text)
    # what a reader is shown from an attribute: a hover, a text alternative, a label (figure JSON lives
    # in data- attributes, where braces are JSON's)
    shown = re.findall(r"""\s(?:title|alt|aria-label|placeholder)=(?:"([^"]*)"|'([^']*)')""", text)
    text = re.sub(r"<[^>]*>", "", text)  # tags and their attributes
    text += " ".join(a or b for a, b in shown)
    return re.findall(r".{0,20}(?:\{\{|\}\}).{0,20}", text) + hugging


def test_no_placeholder_survives(built_site):
    site, _ = built_site
    for page in site.rglob("*.html"):
        left = leftover_braces(page.read_text())
        assert not left, f"{page.relative_to(site)} still has {left[:3]}"


@pytest.mark.parametrize(
    "debris",
    [
        "<p>{{ m02/x:y | .1f }</p>",
        "<p>{ m02/x:y }}</p>",
        "<p>{{ m02/x:y | {.1f} }}</p>",
        '<p>{<span class="measured" title="t">7.3</span>}</p>',
        "<p>a }} b</p>",
        '<p><abbr title="High-bandwidth memory, {{ m02/x:y | .0f }} GB">HBM</abbr></p>',  # a hover
        "<p><img alt='{{ figure m02/x }}' src='x.png'></p>",
    ],
)
def test_the_survival_check_sees_malformed_placeholders(debris):
    """Test gap 3: the forms of defect 6 are caught in built HTML too, not only at build time."""
    assert leftover_braces(debris)
    assert not leftover_braces('<p>fine</p><pre><code>{{ x }}</code></pre><div data-plotly="{&quot;a&quot;:{}}"></div>')
    assert leftover_braces("<p>see <code>{{ m02/x:y }</code></p>")  # inline code is filled, so checked too


def test_plotly_bundle_matches_the_python_package():
    assert PLOTLY_JS.exists(), f"expected {PLOTLY_JS.name}: the plotly.js bundle of plotly.py's version"
    header = PLOTLY_JS.read_text()[:200]
    assert f"v{plotly.offline.get_plotlyjs_version()}" in header
    assert PLOTLY_JS.name in (ROOT / "docs" / "assets" / "javascripts" / "figures.js").read_text()


# What the built site makes a browser fetch, read from the files themselves (the browser test
# routes every request, but sees only what the pages it opens actually ask for).
# Attributes through which an element fetches something; <a>/<area> href is a link to follow,
# not a fetch (their ping is one), and so is a <link> href whose rels are all of LINK_RELS_NO_FETCH.
FETCH_ATTRS = {"src", "href", "xlink:href", "data", "poster", "background", "manifest", "codebase", "archive"}
LINK_RELS_NO_FETCH = {"canonical", "alternate", "author", "license", "help", "next", "prev", "bookmark", "me"}
XML_NAMESPACES = re.compile(r"http://www\.w3\.org/(?:2000/svg|1999/xhtml|1999/xlink|2000/xmlns/?|XML/1998/namespace)$")
# Off-site URLs that third-party scripts the site ships carry, with why they are never fetched
# here; any other absolute URL in a shipped script or in a page's inline script fails the test.
NEVER_FETCHED = {
    "assets/javascripts/bundle.*.min.js": (
        "Material for MkDocs: a ResizeObserver polyfill (for browsers without one: none since 2020), mermaid.js (for "
        "pages with a Mermaid diagram: none, checked), repository facts (with repo_url set: it is not, checked), a "
        "licence comment",
        {
            "https://unpkg.com/resize-observer-polyfill",
            "https://unpkg.com/mermaid@11/dist/mermaid.min.js",
            "https://api.github.com/repos/${e}/${t}",
            "https://api.github.com/users/${e}",
            "https://${e}/api/v4/projects/${encodeURIComponent",
            "https://clipboardjs.com/",
        },
    ),
    "assets/javascripts/workers/search.*.min.js": (
        "lunr's credits in comments, a link in a console warning",
        {"http://lunrjs.com", "http://tartarus.org/~martin/PorterStemmer/js.txt", "https://bit.ly/2s3ChXG"},
    ),
    "assets/javascripts/plotly-basic-*.min.js": (
        "licence comments; documentation links in attribute descriptions and error messages; the logo's link "
        "(displaylogo is off); the Chart Studio endpoint (only for its modebar buttons, off unless a figure's config "
        "asks: figures.js does not, checked); the topojson CDN (for geo traces: not in the basic bundle)",
        {
            "http://getify.mit-license.org",
            "http://syntheti.cc",
            "https://github.com/voidqk/polybooljs",
            "https://github.com/d3/d3-format/tree/v1.4.5#d3-format",
            "https://github.com/d3/d3-time-format/tree/v2.2.3#locale_format",
            "https://plotly.com/javascript/animations/",
            "https://plotly.com/",
            "https://cloud.plotly.com/newchart",
            "https://cdn.plot.ly/un/",
        },
    ),
}
# Search-language support that the search worker imports only for a `lang` other than English
# (the site's search is English: checked), so not a file the site ever loads.
LUNR_LANGUAGES = "assets/javascripts/lunr/*"


def css_urls(css):
    """URLs a stylesheet fetches: url(), src(), image-set() and @import, comments left out."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    found = re.findall(r"""(?:url|src)\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))""", css, flags=re.I)
    found += re.findall(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", css, flags=re.I)
    for args in re.findall(r"image-set\(([^)]*)\)", css, flags=re.I):
        found += re.findall(r"""(?:"([^"]*)"|'([^']*)')""", args)
    return ["".join(groups) for groups in found]


def script_urls(js):
    """Every absolute URL a script names, except XML namespace names (identifiers, never fetched)."""
    return [u for u in re.findall(r"(?:https?|wss?)://[^\s\"'`<>()\\]+", js) if not XML_NAMESPACES.match(u)]


class PageFetches(html.parser.HTMLParser):
    """(where, url) for every URL an HTML or SVG document fetches through an attribute, CSS
    (style attributes, <style>), an event handler, a meta refresh, plotly data or an inline script."""

    def __init__(self):
        super().__init__()
        self.found, self.inside = [], None

    def handle_starttag(self, tag, attrs):
        attrs = [(k, v or "") for k, v in attrs]
        named = dict(attrs)
        rels = set(named.get("rel", "").lower().split())
        for k, v in attrs:
            where = f"<{tag} {k}>"
            if k == "style":
                self.found += [(where, u) for u in css_urls(v)]
            elif k in ("srcset", "imagesrcset"):
                self.found += [(where, c.split()[0]) for c in v.split(",") if c.strip()]
            elif k == "ping":
                self.found += [(where, u) for u in v.split()]
            elif k.startswith("on") or k == "data-plotly":
                self.found += [(where, u) for u in script_urls(v)]
            elif k == "content" and named.get("http-equiv", "").lower() == "refresh":
                self.found += [(where, u) for u in re.findall(r"url\s*=\s*['\"]?([^'\";]+)", v, flags=re.I)]
            elif k in FETCH_ATTRS:
                if k == "href" and (tag in ("a", "area") or (tag == "link" and rels and rels <= LINK_RELS_NO_FETCH)):
                    continue
                self.found.append((where, v))
        if tag in ("script", "style"):
            self.inside = tag

    def handle_endtag(self, tag):
        if tag == self.inside:
            self.inside = None

    def handle_data(self, data):
        if self.inside == "style":
            self.found += [("<style>", u) for u in css_urls(data)]
        elif self.inside == "script":
            self.found += [("<script>", u) for u in script_urls(data)]


def off_site(url, origin):
    url = url.strip()
    return bool(re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", url, flags=re.I)) and not (url + "/").startswith(origin + "/")


def test_site_is_offline(built_site, site_server):
    """No file of the built site makes a browser fetch anything from another origin: every HTML
    and SVG file's fetching attributes, CSS and inline scripts, every stylesheet, every script."""
    site, _ = built_site
    origin = site_server.rstrip("/")
    pages = [p for p in site.rglob("*") if p.suffix in (".html", ".svg")]
    assert len(pages) >= 20
    problems = []
    for page in pages:
        text = page.read_text()
        parser = PageFetches()
        parser.feed(text)
        parser.close()
        problems += [f"{page.relative_to(site)} {where}: {u}" for where, u in parser.found if off_site(u, origin)]
        assert "fonts.googleapis" not in text
        # the conditions under which Material's bundle would fetch (see NEVER_FETCHED)
        assert not re.search(r'class="[^"]*\bmermaid\b', text), f"{page.relative_to(site)} has a Mermaid diagram"
        assert 'data-md-component="source"' not in text, "repo_url is set: Material fetches repository facts"
    for sheet in site.rglob("*.css"):
        problems += [f"{sheet.relative_to(site)}: {u}" for u in css_urls(sheet.read_text()) if off_site(u, origin)]
    search_config = json.loads((site / "search" / "search_index.json").read_text())["config"]
    assert search_config["lang"] == ["en"], f"search lang {search_config['lang']}: {LUNR_LANGUAGES} is loaded now"
    figures_js = (site / "assets" / "javascripts" / "figures.js").read_text()
    assert not re.search(r"showSendToCloud|showEditInChartStudio|plotlyServerURL", figures_js)
    for script in [*site.rglob("*.js"), *site.rglob("*.mjs")]:
        name = str(script.relative_to(site))
        if fnmatch.fnmatch(name, LUNR_LANGUAGES):
            continue
        allowed = set().union(*(urls for pattern, (_, urls) in NEVER_FETCHED.items() if fnmatch.fnmatch(name, pattern)))
        problems += [
            f"{name}: {u}" for u in script_urls(script.read_text()) if off_site(u, origin) and u not in allowed
        ]
    assert not problems, "the site fetches from other origins:\n" + "\n".join(problems)


def test_site_server_is_quiet(site_server, capfd):
    """The test server prints nothing per request (a line each would bury the test output)."""
    for path in ("", "no-such-page/"):
        try:
            urllib.request.urlopen(site_server + path, timeout=10).read()
        except urllib.error.HTTPError as err:
            assert err.code == 404
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), f"the test server printed:\n{out}{err}"


def test_no_page_loads_plotly_itself(built_site):
    """plotly.js is loaded by figures.js alone, and only on a page with a figure (which the browser
    test checks): no page names the bundle in a fetching attribute of its own."""
    site, _ = built_site
    for page in site.rglob("*.html"):
        parser = PageFetches()
        parser.feed(page.read_text())
        named = [(where, u) for where, u in parser.found if re.search(r"plotly[^/]*\.js", u)]
        assert not named, f"{page.relative_to(site)} loads plotly.js itself: {named}; figures.js should"


def test_figure_pages_are_small(built_site):
    site, _ = built_site
    for page in site.rglob("*.html"):
        if 'class="course-plot"' in page.read_text():
            size = page.stat().st_size + PLOTLY_JS.stat().st_size
            assert size < 1_800_000, f"{page.relative_to(site)}: HTML + plotly.js = {size} bytes"


def convert(text, hardware="nvidia-h200"):
    md = markdown.Markdown(
        extensions=["coursekit.mdext"], extension_configs={"coursekit.mdext": {"hardware": hardware}}
    )
    return md.convert(text)


def test_value_placeholder_renders_median_with_provenance():
    html = convert("Copy: {{ methodology/ceilings:copy.GBps | ,.0f }} GB/s")
    doc = json.loads((ROOT / "build_results/nvidia-h200/methodology/ceilings.json").read_text())
    assert f"{doc['data']['copy']['GBps']['median']:,.0f}" in html
    assert 'class="measured"' in html and "NVIDIA H200" in html and "10th–90th" in html


@pytest.mark.parametrize(
    "text, named",
    [
        ("{{ methodology/ceilings:copy.nope | .1f }}", "copy.nope"),
        ("{{ m99/nothing:x }}", "m99/nothing"),
        ("{{ figure m02/no_such_figure }}", "no_such_figure"),
        ("{{ cited 3 TB/s }}", "both halves"),
    ],
)
def test_missing_values_fail_naming_the_key(text, named):
    with pytest.raises(PlaceholderError, match=re.escape(named)):
        convert(text)


def test_computed_values_come_from_figures_functions_and_say_so():
    """{{ m03/derived:... }}: no stored result of that name, so figures.py's derived() computes it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("m03_figures", ROOT / "snippets" / "m03" / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)

    def results(key):
        return json.loads((ROOT / "build_results" / "nvidia-h200" / f"{key}.json").read_text())["data"]

    expected = figures.derived(results)["by_tokens"]["1"]["predicted_graphs_speedup"]
    html = convert("{{ m03/derived:by_tokens.1.predicted_graphs_speedup | .2f }}")
    assert f">{expected:.2f}<" in html
    assert "computed by snippets/m03/figures.py:derived() from m03/modes, methodology/ceilings" in html
    with pytest.raises(PlaceholderError, match=re.escape("by_tokens.3.predicted_graphs_speedup")):
        convert("{{ m03/derived:by_tokens.3.predicted_graphs_speedup }}")
    with pytest.raises(PlaceholderError, match="prose claims"):
        convert(f"{{{{ assert m03/derived:by_tokens.1.predicted_graphs_speedup > {expected + 1} }}}}")


def test_a_false_claim_fails_the_reference_build():
    with pytest.raises(PlaceholderError, match="prose claims"):
        convert("{{ assert methodology/ceilings:copy.GBps < 1 }}")
    assert convert("{{ assert methodology/ceilings:copy.GBps > 1 }}").strip() in ("", "<p></p>")


def test_missing_key_fails_mkdocs_build_naming_page_and_key(tmp_path):
    work = tmp_path / "proj"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".git", "site", "*.egg-info", "__pycache__", ".venv"))
    page = work / "docs" / "part-j" / "02-eager-per-op.md"
    page.write_text(page.read_text() + "\n\nBroken: {{ m02/crossover:no_such_field | .1f }}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=300,
    )
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "docs/part-j/02-eager-per-op.md" in err and "no_such_field" in err, err[-2000:]


def test_another_hardware_falls_back_to_reference_numbers_visibly(tmp_path):
    """A machine that measured only some snippets still builds the site; borrowed numbers say so."""
    results = tmp_path / "build_results"
    shutil.copytree(ROOT / "build_results" / "nvidia-h200", results / "nvidia-h200")
    doc = json.loads((results / "nvidia-h200" / "methodology" / "ceilings.json").read_text())
    doc["hardware"] = "other-gpu"
    doc["provenance"]["gpu"] = "Other GPU"
    (results / "other-gpu" / "methodology").mkdir(parents=True)
    (results / "other-gpu" / "methodology" / "ceilings.json").write_text(json.dumps(doc))
    described = {"label": "Other GPU", "kind": "gpu", "gpu": "Other GPU", "reference": False}
    described["description"] = "A machine that measured only some snippets."
    (results / "other-gpu" / "set.json").write_text(json.dumps(described))
    md = markdown.Markdown(
        extensions=["coursekit.mdext"],
        extension_configs={"coursekit.mdext": {"hardware": "other-gpu", "results_dir": str(results)}},
    )
    html = md.convert("{{ methodology/ceilings:copy.GBps | .0f }} and {{ m02/crossover:floor_us | .1f }}")
    own, borrowed = re.findall(r'<span class="([^"]+)" title="([^"]+)"', html)
    assert own[0] == "measured" and "Other GPU" in own[1]
    assert borrowed[0] == "measured fallback" and "not measured on other-gpu" in borrowed[1]


def test_other_placeholders_render():
    html = convert(
        "{{ cited 4.8 TB/s | NVIDIA H200 product brief }}\n\n{{ provenance methodology/ceilings }}\n\n"
        "{{ output m02/profile_breakdown:table }}\n\n{{ reading-time part-j/02-eager-per-op.md }}, "
        "{{ reading-time part-n/14-inference-server.md }}\n\n{{ hardware-sets }}"
    )
    assert 'class="cited"' in html and "NVIDIA H200 product brief" in html
    assert (
        '<details class="provenance">' in html and 'href="downloads/data/nvidia-h200/methodology/ceilings.json"' in html
    )
    assert 'href="downloads/methodology/ceilings.py"' in html  # the snippet as one file, served by the plugin
    assert "<pre><code>" in html and "aten::add" in html
    assert re.search(r'<span class="reading-time">\d+ min</span>, <span class="reading-time">\d+ min</span>', html)
    assert "nvidia-h200" in html and "<table" in html


def test_reading_time_of_a_stub_says_in_preparation(tmp_path):
    """Every module is written now; a stub (a page with the "In preparation" note) still reads so."""
    (tmp_path / "stub.md").write_text('# 99 · A module to come\n\n!!! note "In preparation"\n    Not written yet.\n')
    (tmp_path / "page.md").write_text("# A page\n\n" + "Words of prose here. " * 400)
    md = markdown.Markdown(
        extensions=["coursekit.mdext"],
        extension_configs={"coursekit.mdext": {"hardware": "nvidia-h200", "docs_dir": str(tmp_path)}},
    )
    html = md.convert("{{ reading-time stub.md }}, {{ reading-time page.md stub.md }}")
    stub, written = re.findall(r'<span class="reading-time">([^<]+)</span>', html)
    assert stub == "in preparation" and re.fullmatch(r"\d+ min", written)


def test_landing_page_lists_five_parts_and_fourteen_modules(built_site):
    site, _ = built_site
    index = (site / "index.html").read_text()
    for letter in "JKLMN":
        assert f"Part {letter} ·" in index
    modules = set(re.findall(r'href="(part-[jklmn]/\d\d-[^"]+/)"', index))
    assert len(modules) == 14, sorted(modules)


def test_placeholders_respect_fences_escapes_and_typos():
    text = (
        '\\{{ m02/x:y }} shown literally\n\n```python\nprint(f"{{ m02/nothing }}")\n~~~\n{{ still code }}\n```\n\n'
        "{{ methodology/ceilings:copy.GBps | .0f }}"
    )
    html = convert(text)
    assert "{{ m02/x:y }} shown literally" in html and 'class="measured"' in html
    for typo in ("{{ figures m02/crossover }}", "{{ M02/crossover:floor_us }}", "{{ provenence m02/crossover }}"):
        with pytest.raises(PlaceholderError, match="not a placeholder this site knows"):
            convert(typo)
    with pytest.raises(PlaceholderError, match="division by zero"):
        convert("{{ methodology/ceilings:copy.GBps | /0 .1f }}")


def test_the_clone_command_names_the_configured_repository(built_site):
    """Run it yourself's clone command is the site's repo_url, not a typed address a fork would keep."""
    site, _ = built_site
    page = (site / "run-it-yourself" / "index.html").read_text()
    config = (ROOT / "mkdocs.yml").read_text()
    default = re.search(r'repo_url: !ENV \[REPO_URL, "([^"]+)"\]', config)[1]
    assert f"git clone {default}" in re.sub(r"<[^>]+>", "", page), "the clone command does not name repo_url"
    assert "{{ repo-url }}" not in page


def test_provenance_fields_speak_to_the_reader():
    from coursekit.page.tables import _for_reader

    assert "not yet committed" in _for_reader("commit", "abc123+dirty") and "+dirty" not in _for_reader(
        "commit", "a+dirty"
    )
    said = _for_reader("rehashed", "2026-11-30: snippet_hash recomputed by scripts/rehash_results.py; identical to c73")
    assert "scripts/" not in said and "identical to c73" in said
    assert _for_reader("gpu", "NVIDIA H200") == "NVIDIA H200"
