"""A real browser reads the site: every page at a phone's size (390×844, touch, dark scheme) and
a desktop's (1440×900, mouse, light scheme) is loaded once and checked on the loaded page: no
sideways scrolling, every figure drawn, at most 2 MB of its own (the search index has its own
budget), a measured number's provenance opens on a tap (phone) or from the keyboard (desktop),
nothing asked of another origin, no console error, and axe-core's WCAG 2 A/AA rules find nothing
that a stock Material page with the same palette does not (at the phone's size only the rules
that depend on the scheme or the layout run again; axe.min.js comes vendored in the Python package
axe-playwright-python: no network at test time). Besides: instant navigation works, the provenance
popover works after it, dark mode re-themes the figures, plotly.js loads once and only where there
is a figure.

Every page is opened with every request routed: a request for anything off the test server's
origin is aborted and recorded, so a fetch that would never get a response (a CDN the test
machine cannot reach) is seen as well as one that would.

Needs Chromium (Debian's `chromium` package: .ci/run installs it). Without it the tests skip,
saying so, unless CI is set, where a missing browser is a failure."""

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, QuietHandler, child_env

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Chromium for the browser tests: apt-get install chromium")
    pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped", allow_module_level=True)

import axe_playwright_python  # noqa: E402  (the test extra installs it: it ships axe-core's axe.min.js)
import yaml  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

pytestmark = pytest.mark.browser
MODULE_01 = "part-j/01-why-eager-won/"
MODULE_02 = "part-j/02-eager-per-op/"
PLOTLY_JS = re.compile(r"/plotly[^/?#]*\.js(?:[?#]|$)")
SEARCH_INDEX = "search/search_index.json"
PAGE_BUDGET = 2_000_000  # bytes a page loads, besides the search index
AXE_JS = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text()
SIZES = {  # one scheme per size, so that axe sees both palettes
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "device_scale_factor": 1,
        "color_scheme": "dark",
    },
    "desktop": {"viewport": {"width": 1440, "height": 900}, "color_scheme": "light"},
}


def site_pages() -> list[str]:
    """Every page the site builds, as a URL under the site root, from docs/ (the Markdown pages and
    the notebooks mkdocs-jupyter renders); test_every_built_page_is_checked holds it to the build."""
    docs = ROOT / "docs"
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    sources = sorted(docs.rglob("*.md"))
    for plugin in config.get("plugins", []):
        if isinstance(plugin, dict) and "mkdocs-jupyter" in plugin:
            for pattern in plugin["mkdocs-jupyter"].get("include", []):
                sources += sorted(docs.glob(pattern))
    urls = []
    for source in sources:
        rel = source.relative_to(docs).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "index" else rel.parts
        urls.append("".join(f"{part}/" for part in parts))
    return [*urls, "404.html"]


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's tags (!ENV [NAME, default]) read as their default."""


_Loader.add_constructor("!ENV", lambda loader, node: loader.construct_sequence(node)[-1])
PAGES = site_pages()


@pytest.fixture(scope="module")
def server(built_site, site_server):
    return site_server


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            env=child_env(),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


def open_page(browser, origin: str, **options):
    """A page in a fresh context (an empty cache) whose requests are all recorded (pg.requests) with
    the bytes of their responses (pg.bytes_loaded); those off ``origin`` are aborted and recorded
    apart (pg.offsite), and so are WebSockets, which no page should open. Console errors and
    uncaught exceptions go to pg.console_errors."""
    origin = origin.rstrip("/")
    context = browser.new_context(**options)
    pg = context.new_page()
    pg.console_errors = []
    pg.bytes_loaded = {}
    pg.requests = []
    pg.offsite = []

    def on_request(route):
        url = route.request.url
        pg.requests.append(url)
        if url == origin or url.startswith(origin + "/"):
            route.continue_()
        else:
            pg.offsite.append(url)
            route.abort("blockedbyclient")

    context.route("**/*", on_request)
    context.route_web_socket(re.compile(".*"), lambda ws: pg.offsite.append(ws.url))
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))

    def on_response(resp):
        try:
            pg.bytes_loaded[resp.url] = len(resp.body())
        except Exception:
            pass

    pg.on("response", on_response)
    return context, pg


@pytest.fixture
def page(browser, server):
    context, pg = open_page(browser, server)
    yield pg
    context.close()
    assert not pg.offsite, f"requests off the site's origin: {pg.offsite}"  # every test, checking or not


def figures_rendered(pg):
    return pg.evaluate("""() => {
        const plots = [...document.querySelectorAll('.course-plot')];
        return [plots.length, plots.filter(p => p.querySelector('.main-svg')).length];
    }""")


def figure_ids(pg):
    return pg.evaluate("() => [...document.querySelectorAll('.course-plot')].map(p => p.parentNode.id)")


def wait_for_figures(pg, ids=None, not_ids=None):
    """Until every figure of the page is drawn; with ids, until the page's figures are those, and
    with not_ids, until they are not those (after instant navigation the previous page's drawn
    figures are still there for a moment). A figure is drawn when it nears the viewport (figures.js),
    so the page is scrolled to each undrawn one in turn, as a reader scrolling down would; the
    scroll position is restored at the end."""
    top = pg.evaluate("() => window.scrollY")
    pg.wait_for_function(
        """([ids, notIds]) => {
        const plots = [...document.querySelectorAll('.course-plot')];
        const now = JSON.stringify(plots.map(p => p.parentNode.id));
        const undrawn = plots.find(p => !p.querySelector('.main-svg'));
        if (undrawn && document.readyState === 'complete') undrawn.scrollIntoView({block: 'center'});
        return plots.length > 0 && !undrawn
            && (ids === null || now === JSON.stringify(ids)) && (notIds === null || now !== JSON.stringify(notIds));
    }""",
        arg=[ids, not_ids],
        timeout=20000,
        polling=100,
    )
    pg.evaluate("y => window.scrollTo(0, y)", top)


def plotly_requests(pg):
    return [u for u in pg.requests if PLOTLY_JS.search(u)]


def test_search_index_under_one_megabyte(built_site):
    """The search index, which the search worker fetches once on every page and which grows with
    every chapter, has a budget of its own (the pages' budget leaves it out): 1 MB."""
    site, _ = built_site
    size = (site / SEARCH_INDEX).stat().st_size
    assert size < 1_000_000, f"the search index is {size:,} bytes"


def test_instant_navigation_then_dark_mode(page, server):
    page.goto(server)
    page.wait_for_load_state("networkidle")
    page.evaluate("() => { window.__sameDocument = true; }")
    page.click(f'a[href$="{MODULE_02}"] >> nth=0')
    wait_for_figures(page)
    assert page.evaluate("() => window.__sameDocument === true"), (
        "navigation reloaded the page: instant navigation is off"
    )
    assert page.url.endswith(MODULE_02)
    # the provenance popover works on a page reached by instant navigation
    number = page.locator("article .measured >> visible=true").first
    title = number.get_attribute("title")
    number.click()
    assert title and page.locator("#course-provenance").inner_text().replace("\n", "; ") == title
    page.keyboard.press("Escape")
    assert not page.locator("#course-provenance").is_visible()
    before = page.evaluate("() => document.querySelector('.course-plot').getAttribute('data-rendered-scheme')")
    page.click("label.md-header__button[for^='__palette'] >> visible=true")
    page.wait_for_function("""() => [...document.querySelectorAll('.course-plot')]
        .every(p => p.getAttribute('data-rendered-scheme') === document.body.getAttribute('data-md-color-scheme'))""")
    after = page.evaluate("() => document.querySelector('.course-plot').getAttribute('data-rendered-scheme')")
    assert before != after and after == "slate"
    # and back: navigate away and return; figures are drawn again
    page.go_back()
    page.wait_for_load_state("networkidle")
    page.go_forward()
    wait_for_figures(page)
    assert page.console_errors == []


def test_plotly_loads_once_across_instant_navigation(page, server):
    """Two figure pages, back and forth by instant navigation: one request for plotly.js, never
    two script elements for it, and every visit's figures drawn. (Material's instant navigation
    replaces the head's elements, so the script element itself goes; window.Plotly stays.)"""

    def plotly_scripts():
        return page.evaluate("() => [...document.scripts].map(s => s.src).filter(s => /plotly/.test(s))")

    page.goto(server + MODULE_01)
    wait_for_figures(page)
    first = figure_ids(page)
    scripts = [plotly_scripts()]
    page.evaluate("() => { window.__sameDocument = true; }")
    page.click(f'a[href$="{MODULE_02}"] >> nth=0')
    page.wait_for_url("**/" + MODULE_02)
    wait_for_figures(page, not_ids=first)
    second = figure_ids(page)
    scripts.append(plotly_scripts())
    for url, ids, move in [(MODULE_01, first, page.go_back), (MODULE_02, second, page.go_forward)] * 2:
        move()
        page.wait_for_url("**/" + url)
        wait_for_figures(page, ids)
        scripts.append(plotly_scripts())
    assert page.evaluate("() => window.__sameDocument === true"), "a navigation reloaded the page"
    assert len(plotly_requests(page)) == 1, f"plotly.js requested {plotly_requests(page)}"
    assert len(scripts[0]) == 1 and all(len(s) <= 1 for s in scripts), f"plotly.js script elements: {scripts}"
    assert page.console_errors == []


# ---------------------------------------------------------------- a phone's page load (scripts/bench_phone.py)


def test_plotly_and_figures_wait_for_the_load_event_and_the_viewport(page, server):
    """Neither plotly.js nor drawing holds up a page's load event: plotly.js is requested after it,
    and a figure far below the screen is drawn only when the reader scrolls near it."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + MODULE_02, wait_until="load")
    page.wait_for_load_state("networkidle")
    state = """() => {
        const nav = performance.getEntriesByType('navigation')[0];
        const plotly = performance.getEntriesByType('resource').filter(r => /plotly[^/]*\\.js/.test(r.name));
        const plots = [...document.querySelectorAll('.course-plot')];
        const last = plots[plots.length - 1];
        return {load: nav.loadEventStart, plotly: plotly.map(r => r.startTime), n: plots.length,
                lastBelow: last.getBoundingClientRect().top - innerHeight,
                lastDrawn: !!last.querySelector('.main-svg')};
    }"""
    before = page.evaluate(state)
    assert before["n"] > 1 and before["lastBelow"] > 2000, f"page 02's last figure is not far below: {before}"
    assert not before["lastDrawn"], f"a figure {before['lastBelow']:.0f} px below the screen was drawn at once"
    page.locator(".course-plot").first.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('.course-plot .main-svg')", timeout=20000)
    after = page.evaluate(state)
    assert after["plotly"] and all(t >= after["load"] for t in after["plotly"]), f"plotly.js before load: {after}"
    page.locator(".course-plot").last.scroll_into_view_if_needed()
    page.wait_for_function("() => [...document.querySelectorAll('.course-plot')].pop().querySelector('.main-svg')")
    assert len(plotly_requests(page)) == 1 and page.console_errors == []


def test_search_index_is_fetched_on_first_use_of_search(page, server):
    """The search index is not fetched with the page, only when the reader first uses search; then
    search finds a chapter."""
    page.goto(server + MODULE_02, wait_until="load")
    page.wait_for_load_state("networkidle")
    assert not [u for u in page.requests if u.endswith(SEARCH_INDEX)], "the search index came with the page"
    page.locator("input[data-md-component=search-query]").click()
    page.keyboard.type("Triton")
    page.wait_for_function("() => document.querySelectorAll('.md-search-result__item').length > 0", timeout=20000)
    assert len([u for u in page.requests if u.endswith(SEARCH_INDEX)]) == 1
    assert page.console_errors == []


STOCK_PAGE = """# A stock page

A paragraph with [a link](other.md) in running text, `inline code`, and a list:

- one item with [another link](other.md)
- a second item

| What | How much |
|---|---|
| one | 1 |

```python
def f(x):  # a comment
    \"\"\"A docstring.\"\"\"
    return x is not None and x in [1, 2.5]
```

!!! note "A note"
    With text.
"""


# axe's colour-contrast rule is most of its time, and its result for an element depends only on the
# element's text colour, font size and weight, text shadow, opacity, and the backgrounds behind it.
# Elements alike in all of these (a code block's thousands of highlighter spans, a page's hundreds
# of measured numbers, the theme's navigation) share one result: the rule checks one visible element
# of each such style, the other rules see every element. A style that fails counts once. ``rules``:
# null for every WCAG 2 A/AA rule, or the ids of the ones to run.
AXE_RUN = """async (rules) => {
    const behind = new Map();
    const backgrounds = (e) => {  // the backgrounds and opacities from e up to the first opaque one
        if (!e || e === document.documentElement) return '';
        if (!behind.has(e)) {
            const s = getComputedStyle(e);
            const plain = s.backgroundImage === 'none' && s.opacity === '1' && s.mixBlendMode === 'normal';
            const own = s.backgroundColor === 'rgba(0, 0, 0, 0)' && plain ? ''
                : `${s.backgroundColor} ${s.backgroundImage} ${s.opacity} ${s.mixBlendMode}`;
            const opaque = plain && s.backgroundColor.startsWith('rgb(');
            behind.set(e, opaque ? own : `${own}>${backgrounds(e.parentElement)}`);
        }
        return behind.get(e);
    };
    const styles = new Set();
    for (const e of document.body.querySelectorAll('*')) {
        if (![...e.childNodes].some(n => n.nodeType === 3 && n.nodeValue.trim())) continue;
        if (!e.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
        const s = getComputedStyle(e);
        const style = [s.color, s.fontSize, s.fontWeight, s.textShadow, backgrounds(e)].join('|');
        if (styles.has(style)) continue;
        styles.add(style);
        e.setAttribute('data-axe-contrast', '');
    }
    axe.configure({rules: [{id: 'color-contrast', selector: '[data-axe-contrast]'}]});
    const runOnly = rules ? {type: 'rule', values: rules} : {type: 'tag', values: ['wcag2a', 'wcag2aa']};
    const result = await axe.run(document, {runOnly, resultTypes: ['violations']});
    return result.violations;
}"""
# The WCAG 2 A/AA rules whose result depends on the colour scheme or the layout: at the phone's size
# (dark) only these run again; the others, about markup alone, run at the desktop's (light).
# A table that overflows the column becomes a named scrolling region (provenance.js), so the landmark
# rules depend on the layout too: at the phone's size many tables overflow.
AXE_SCHEME_AND_LAYOUT = [
    "color-contrast",
    "link-in-text-block",
    "scrollable-region-focusable",
    "landmark-unique",
    "empty-table-header",
]
AXE_RULES = {"phone": AXE_SCHEME_AND_LAYOUT, "desktop": None}


def run_axe(pg, rules: list[str] | None = None) -> list[dict]:
    """axe-core's WCAG 2 A and AA rules (or ``rules``) on the loaded page: its violations (colour
    contrast: one element of each style, see AXE_RUN)."""
    pg.add_script_tag(content=AXE_JS)
    # what the browser skips until it nears the viewport (course.css: content-visibility) is checked
    # as it will be drawn
    pg.add_style_tag(content=".md-typeset * { content-visibility: visible !important; }")
    return pg.evaluate(AXE_RUN, rules)


def axe_nodes(violations) -> list[str]:
    return [f"{v['id']}: {n['target']} {n['html'][:120]!r}" for v in violations for n in v["nodes"]]


@pytest.fixture(scope="module")
def stock_axe(browser, tmp_path_factory):
    """What axe finds on a stock Material page with the course's theme (palette, features, fonts),
    at each size: {size: violations}. A one-page MkDocs project, built and served from a tmp dir."""
    project = tmp_path_factory.mktemp("stock-material")
    theme = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["theme"]
    theme.pop("custom_dir", None)  # stock: the theme's own templates
    (project / "docs").mkdir()
    (project / "docs" / "index.md").write_text(STOCK_PAGE)
    (project / "docs" / "other.md").write_text("# Other\n")
    config = {
        "site_name": "Stock",
        "theme": theme,
        "markdown_extensions": [
            {"toc": {"permalink": True}},
            "admonition",
            "tables",
            "pymdownx.highlight",
            "pymdownx.superfences",
        ],
    }
    site = project / "site"
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    origin = f"http://127.0.0.1:{httpd.server_address[1]}/"
    config["site_url"] = origin
    (project / "mkdocs.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(site)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(NO_MKDOCS_2_WARNING="1"),
    )
    assert proc.returncode == 0, f"the stock Material page did not build:\n{proc.stdout}\n{proc.stderr}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    found = {}
    try:
        for size, options in SIZES.items():
            context, pg = open_page(browser, origin, **options)
            pg.goto(origin)
            pg.wait_for_load_state("networkidle")
            found[size] = run_axe(pg, AXE_RULES[size])
            context.close()
    finally:
        httpd.shutdown()
    return found


def test_every_built_page_is_checked(built_site):
    """The pages the per-page tests visit (from docs/) are the pages the build wrote."""
    site, _ = built_site
    built = sorted(str(p.parent.relative_to(site)) + "/" for p in site.rglob("index.html") if p.parent != site)
    assert sorted(u for u in PAGES if u not in ("", "404.html")) == built
    assert len(PAGES) >= 20


def test_stock_page_baseline_is_what_axe_finds_on_material(stock_axe):
    """The baseline is real: axe runs on the stock page and finds Material's own few faults (its
    links told apart by colour alone, its footer's contrast), and no more than a handful."""
    for size, violations in stock_axe.items():
        rules = {v["id"] for v in violations}
        assert "link-in-text-block" in rules, f"{size}: {rules}"
        assert 0 < len(axe_nodes(violations)) <= 12, f"{size}: {axe_nodes(violations)}"


def measured_chapter(url: str) -> bool:
    return re.fullmatch(r"part-[a-z]/\d\d-[^/]+/", url) is not None


@pytest.fixture(scope="module")
def sized_pages(browser, server):
    """One page per size, each in its own context, reused by every page's test: routing every
    request (open_page) turns the HTTP cache off, so each load weighs what a first visit weighs."""
    opened = {}

    def get(size):
        if size not in opened:
            opened[size] = open_page(browser, server, **SIZES[size])
        context, pg = opened[size]
        for recorded in (pg.console_errors, pg.requests, pg.offsite):
            recorded.clear()
        pg.bytes_loaded.clear()
        return pg

    yield get
    for context, _ in opened.values():
        context.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("url", PAGES)
def test_page_reads_well(url, size, sized_pages, server, stock_axe):
    """One page at one size, loaded once, every check on it; all failures at once."""
    pg = sized_pages(size)
    problems = []
    pg.goto(server + url, wait_until="load")
    figures = figures_rendered(pg)[0]
    if figures:
        try:
            wait_for_figures(pg)
        except Exception as exc:  # named below with what was drawn
            problems.append(f"figures not all drawn: {figures_rendered(pg)} ({type(exc).__name__})")
    # what the page would load lazily it loads now, so that it is routed and weighed too
    lazy = pg.evaluate("""() => { const lazy = document.querySelectorAll('[loading=lazy]');
        lazy.forEach(e => { e.loading = 'eager'; }); return lazy.length; }""")
    if lazy:
        pg.wait_for_load_state("networkidle")

    # against the screen's width: a phone's browser widens window.innerWidth to what overflows it
    width, screen = pg.evaluate("() => document.scrollingElement.scrollWidth"), SIZES[size]["viewport"]["width"]
    if width > screen:
        problems.append(f"scrolls sideways: the page is {width} px wide on a {screen} px screen")

    empty = pg.evaluate("""() => [...document.querySelectorAll('.course-plot')]
        .filter(p => !p.querySelector('.main-svg .trace, .main-svg .hm, .main-svg image'))
        .map(p => p.parentNode.id || p.id)""")
    if empty:
        problems.append(f"figures with an empty plot: {empty}")
    problems += figure_problems(pg)  # figures that read well at this size (issue 16)
    problems += provenance_problems(pg, size, url)

    # axe sees the page at rest at its top, as it sees the stock page: Material's back-to-top button,
    # which shows for a while after the checks above scroll upwards, is then hidden on both
    pg.evaluate("() => window.scrollTo(0, 0)")
    try:
        pg.wait_for_function(
            "() => { const b = document.querySelector('.md-top'); return !b || b.hidden || !b.checkVisibility(); }",
            timeout=5000,
        )
    except Exception:
        pass  # a button still shown is checked by axe like everything else
    violations = run_axe(pg, AXE_RULES[size])
    stock = stock_axe[size]
    stock_rules = {v["id"] for v in stock}
    extra_rules = sorted({v["id"] for v in violations} - stock_rules)
    nodes, stock_nodes = axe_nodes(violations), axe_nodes(stock)
    if extra_rules or len(nodes) > len(stock_nodes):
        problems.append(
            f"axe: {len(nodes)} violating elements (stock Material page: {len(stock_nodes)}); rules the stock "
            f"page does not break: {extra_rules}\n    " + "\n    ".join(nodes[:25])
        )

    # by now (axe takes a while) the network has long been idle: what the page loads, it has loaded
    pg.wait_for_load_state("networkidle")
    plotly = plotly_requests(pg)
    if figures and len(plotly) != 1:
        problems.append(f"{figures} figures but plotly.js requested {len(plotly)} times: {plotly}")
    if not figures and (plotly or pg.evaluate("() => typeof window.Plotly !== 'undefined'")):
        problems.append(f"no figure but plotly.js loaded: {plotly}")
    weight = sum(n for u, n in pg.bytes_loaded.items() if not u.endswith(SEARCH_INDEX))
    if weight > PAGE_BUDGET:
        heavy = sorted(pg.bytes_loaded.items(), key=lambda kv: -kv[1])[:4]
        problems.append(f"loads {weight:,} bytes besides the search index (budget {PAGE_BUDGET:,}): {heavy}")
    if pg.console_errors:
        problems.append(f"console errors: {pg.console_errors}")
    if pg.offsite:
        problems.append(f"requests off the site's origin: {pg.offsite}")
    assert not problems, f"{url or '/'} at {size} size:\n  " + "\n  ".join(problems)


def provenance_problems(pg, size: str, url: str) -> list[str]:
    """Every measured or cited number is a control (in the tab order, a button to a screen reader)
    with its provenance in its title; the first visible one opens it: tapped on a phone, focused
    and Enter on a desktop, and Escape closes it again. A chapter must have such numbers."""
    not_controls = pg.evaluate("""() => [...document.querySelectorAll('article .measured, article .cited')]
        .filter(e => !e.title || e.tabIndex !== 0 || e.getAttribute('role') !== 'button')
        .map(e => e.outerHTML.slice(0, 200))""")
    if not_controls:
        return [f"{len(not_controls)} numbers are not controls with a title, e.g. {not_controls[:3]}"]
    number = pg.locator("article .measured >> visible=true").first
    if number.count() == 0:
        return ["a chapter without a measured number"] if measured_chapter(url) else []
    title = number.get_attribute("title")
    number.scroll_into_view_if_needed()
    if size == "phone":
        number.tap()
    else:
        number.focus()
        pg.keyboard.press("Enter")
    pop = pg.locator("#course-provenance")
    try:
        pop.wait_for(state="visible", timeout=3000)
    except Exception:
        return [f"tapping or Enter on a measured number showed no provenance ({size})"]
    problems = []
    shown = pop.inner_text()
    if shown.replace("\n", "; ") != title:
        problems.append(f"the popover shows {shown!r}, not the number's provenance {title!r}")
    pg.keyboard.press("Escape")
    if pop.is_visible():
        problems.append("Escape did not close the provenance popover")
    if number.get_attribute("title") != title:
        problems.append("the number lost its title after the popover closed")
    return problems


# ---------------------------------------------------------------- hardware sets: the selector (issue 16)

MODULE_03 = "part-j/03-graph-mode/"
CPU_SET = "cpu-small"


def mark_a_cpu_number(pg, own: bool) -> list:
    """Tag (id __hwN) a measured number that the CPU set measured itself (own) or lacks (not own), with
    a text differing from the page's; returns [its text now, the CPU set's text or None]."""
    return pg.evaluate(
        """([own, cpu]) => {
        const els = [...document.querySelectorAll('article [data-hw]')];
        const el = els.find(e => { const v = JSON.parse(e.dataset.hw)[cpu];
            return own ? v !== undefined && v.trim() !== e.textContent.trim() : v === undefined; });
        if (!el) return null;
        el.id = own ? '__hwOwn' : '__hwBorrowed';
        return [el.textContent.trim(), own ? JSON.parse(el.dataset.hw)[cpu] : null];
    }""",
        [own, CPU_SET],
    )


def test_hardware_selector_switches_numbers_claims_and_figures_and_survives_navigation(page, server):
    """The labelled selector at the top of a page shows the CPU set's own numbers in place of the
    reference's, keeps the reference's where the CPU set lacks one (marked), shows the claims that fail
    on it, draws its traces over the reference's; the choice holds through instant navigation and a
    reload, and choosing the reference again restores the page."""
    page.goto(server + MODULE_02)
    wait_for_figures(page)
    select = page.locator("article #hw-select")
    assert select.is_visible() and page.locator("label[for=hw-select]").inner_text().strip()
    assert select.evaluate("e => e.tabIndex") >= 0, "the selector is not reachable by keyboard"
    assert CPU_SET in select.evaluate("e => [...e.options].map(o => o.value)")
    own, borrowed = mark_a_cpu_number(page, True), mark_a_cpu_number(page, False)
    assert own and borrowed, "page 02 has no number the CPU set measured, or none it lacks"
    claim = page.locator(f'[data-hw-fails~="{CPU_SET}"]').first
    assert claim.count() and claim.is_hidden(), "no claim of page 02 fails on the CPU set, or its mark shows already"

    select.focus()
    select.select_option(CPU_SET)
    assert page.locator("#__hwOwn").inner_text().strip() == own[1]
    assert page.locator("#__hwBorrowed").inner_text().strip() == borrowed[0]
    assert "fallback" in page.locator("#__hwBorrowed").get_attribute("class")
    assert "other-set" in page.locator("#__hwOwn").get_attribute("class"), "another set's number is not marked"
    assert claim.is_visible() and "CPU, small sizes" in claim.inner_text()
    # measured at other sizes: each figure the CPU set has data for is its own, alone on its axes,
    # and its provenance line says so; none is drawn over the reference's
    page.wait_for_function(
        """cpu => [...document.querySelectorAll('.course-plot')]
        .some(p => p.getAttribute('data-drawn-hardware') === cpu)""",
        arg=CPU_SET,
        timeout=20000,
    )
    drawn = page.evaluate(
        """() => [...document.querySelectorAll('.course-plot')].map(p => [p.getAttribute('data-drawn-hardware'),
        p.parentNode.querySelector('.provenance-line').textContent])"""
    )
    assert not [d for d, _ in drawn if d and " over " in d], "a CPU set's traces drawn over the reference's"
    assert all("CPU, small sizes" in line for d, line in drawn if d == CPU_SET), drawn
    assert page.locator("#hw-note").evaluate("e => e.getClientRects().length === 1 && e.title.length > 0")

    before = figure_ids(page)
    page.evaluate("() => { window.__sameDocument = true; }")
    page.click(f'a[href$="{MODULE_03}"] >> nth=0')
    page.wait_for_url("**/" + MODULE_03)
    wait_for_figures(page, not_ids=before)  # page 03's content, not page 02's still in place
    assert page.evaluate("() => window.__sameDocument === true"), "navigation reloaded the page"
    assert page.locator("article #hw-select").input_value() == CPU_SET
    shown = page.evaluate(
        """cpu => [...document.querySelectorAll('article [data-hw]')]
        .filter(e => JSON.parse(e.dataset.hw)[cpu] !== undefined)
        .every(e => e.textContent.trim() === JSON.parse(e.dataset.hw)[cpu].trim())""",
        CPU_SET,
    )
    assert shown, "after instant navigation, page 03 does not show the CPU set's numbers"

    page.reload()
    page.wait_for_function("() => document.querySelector('article #hw-select')")
    assert page.locator("article #hw-select").input_value() == CPU_SET, "the choice did not survive a reload"
    assert mark_a_cpu_number(page, True) is None, "after a reload, page 03 does not show the CPU set's numbers"
    page.locator("article #hw-select").select_option("nvidia-h200")
    back = mark_a_cpu_number(page, True)
    assert back and back[0] != back[1], "choosing the reference again did not restore its numbers"
    assert not page.locator(f'[data-hw-fails~="{CPU_SET}"]:visible').count()
    assert page.console_errors == []


# ---------------------------------------------------------------- figures that read well (issue 16)

FIGURE_CHECKS = r"""() => {
  const problems = [];
  const lum = c => {
    const m = c.match(/rgba?\(([^)]*)\)/);
    if (!m) return null;
    const v = m[1].split(',').map(parseFloat);
    if (v.length > 3 && v[3] < 0.35) return null;  // a faint shade, not a line to read
    const l = v.slice(0, 3).map(x => (x /= 255) <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4));
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const bg = lum(getComputedStyle(document.body).backgroundColor);
  const contrast = c => {
    const l = lum(c);
    return l === null ? 99 : (Math.max(l, bg) + 0.05) / (Math.min(l, bg) + 0.05);
  };
  const least = document.body.dataset.mdColorScheme === 'slate' ? 3 : 1.5;
  const column = document.querySelector('article').getBoundingClientRect().width;
  const narrow = window.innerWidth < 700;
  const axisKey = /^[xy]axis\d*$/;
  const titleOf = a => (a && a.title && (typeof a.title === 'string' ? a.title : a.title.text)) || '';
  const overlap = (a, b) => a.left < b.right && a.right > b.left && a.top < b.bottom && a.bottom > b.top;
  [...document.querySelectorAll('.course-plot')].forEach((p, i) => {
    const id = p.parentNode.id, box = p.getBoundingClientRect();
    const say = s => problems.push(id + ': ' + s);
    const inside = e => {
      const b = e.getBoundingClientRect();
      return !b.width || (b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1
        && b.bottom <= box.bottom + 1);
    };
    if (!p.querySelector('.main-svg')) { say('not drawn'); return; }
    if (box.width < column - 4) say(`${Math.round(box.width)} px wide in a ${Math.round(column)} px column`);
    [...p.querySelectorAll('.infolayer g[class$="title"] text')]
      .filter(t => /^g-[xy]\d*title$/.test(t.parentNode.getAttribute('class')) && !inside(t))
      .forEach(t => say(`axis title outside the figure: "${t.textContent}"`));
    [...p.querySelectorAll('.xtick text, .ytick text, .annotation-text')].filter(t => !inside(t)).slice(0, 2)
      .forEach(t => say(`label outside the figure: "${t.textContent}"`));
    const full = p._fullLayout, data = p._fullData || [];
    Object.keys(full).filter(k => axisKey.test(k) && full[k]._length).forEach(k => {
      const ax = full[k], title = titleOf(p.layout[k]);
      if (k[0] === 'y' && ax._length < 150) say(`${k}: a plot area ${Math.round(ax._length)} px high`);
      const used = data.some(t => t.visible !== false && (t[k[0] + 'axis'] || k[0]) === k[0] + k.slice(5));
      // an axis of a row (or column) of panels may share the title of its first panel
      const shared = Object.keys(full).some(o => o !== k && o[0] === k[0] && axisKey.test(o)
        && titleOf(p.layout[o]) && JSON.stringify(full[o].domain) === JSON.stringify(ax.domain));
      if (used && !title && !shared) say(`${k} has no title`);
      if (ax.type === 'log' && title && !/\blog\b/i.test(title)) say(`${k} is a log axis; its title does not say so`);
    });
    const bar = p.querySelector('.modebar-container');
    if (narrow && bar && getComputedStyle(bar).display !== 'none') {
      const b = bar.getBoundingClientRect();
      if (b.height && [...p.querySelectorAll('.nsewdrag')].some(d => overlap(b, d.getBoundingClientRect()))) {
        say('the mode bar covers the plot area');
      }
    }
    // told apart without colour: legend entries of lines and markers differ in dash or symbol
    const seen = {};
    data.filter(t => t.type === 'scatter' && t.showlegend !== false && t.visible !== false)
      .filter(t => /lines|markers/.test(t.mode))
      .forEach(t => {
        const sig = (/lines/.test(t.mode) ? t.line.dash : '-') + '|'
          + (/markers/.test(t.mode) ? t.marker.symbol : '-');
        const key = t.legendgroup || t.name;
        if (seen[sig] && seen[sig] !== key) say(`"${seen[sig]}" and "${key}" differ only in colour (${sig})`);
        seen[sig] = seen[sig] || key;
      });
    // what is drawn (lines, markers, whiskers, reference lines, bars) stands out from the page
    const weak = [...p.querySelectorAll(
      '.scatterlayer .js-line, .scatterlayer .point, .errorbar path, .shapelayer path, .barlayer .point path')]
      .map(e => {
        const s = getComputedStyle(e);
        const stroked = s.stroke !== 'none' && parseFloat(s.strokeWidth) > 0 && parseFloat(s.strokeOpacity) >= 0.35;
        const c = e.matches('.barlayer .point path') ? s.fill : stroked ? s.stroke : null;
        return [c, c ? contrast(c) : 99, e.getAttribute('class')];
      })
      .filter(([c, r]) => r < least);
    if (weak.length) {
      const [c, r, what] = weak[0];
      say(`${weak.length} drawn elements with low contrast, e.g. ${c} (${r.toFixed(2)}:1, ${what})`);
    }
    const number = p.parentNode.querySelector('figcaption .figure-number');
    const label = p.getAttribute('aria-label') || '';
    if (!number || number.textContent.trim() !== `Figure ${i + 1}.` || !label.startsWith(`Figure ${i + 1}. `)
      || p.getAttribute('role') !== 'img') {
      say(`not Figure ${i + 1} in its caption and text alternative: ${number && number.textContent} / ${label}`);
    }
  });
  return problems;
}"""


def figure_problems(pg) -> list[str]:
    """Every figure of the loaded page, once drawn in the page's scheme: as wide as the column; its
    axis titles and labels inside its box; a plot area at least 150 px high; a title on every axis
    with data (a row of panels may share one) that says "log" on a log axis; on a phone, no mode bar
    over the plot area; legend entries of lines and markers told apart without colour (dash or
    symbol); what it draws (lines, markers, whiskers, reference lines) standing out from the page
    (3:1 in the dark scheme); numbered in order, "Figure N." in the caption and the text
    alternative of its role="img" plot."""
    if not pg.locator(".course-plot").count():
        return []
    try:
        pg.wait_for_function(
            """() => [...document.querySelectorAll('.course-plot')].every(p =>
                p.getAttribute('data-rendered-scheme') === document.body.getAttribute('data-md-color-scheme'))""",
            timeout=20000,
        )
    except Exception as exc:
        return [f"figures not drawn in the page's colour scheme ({type(exc).__name__})"]
    return pg.evaluate(FIGURE_CHECKS)


LINE = {"type": "scatter", "mode": "lines", "name": "a", "x": [1, 2]}
OVERLAY_FIGURE = {  # a hand-made figure of two hardware sets, as mdext writes one (data-plotly-sets)
    "data-plotly": {"data": [dict(LINE, y=[1, 2])], "layout": {}},
    "data-plotly-sets": {"cpu-x": {"data": [dict(LINE, y=[5, 6])]}},
    "data-plotly-reference": "ref-x",
    "data-plotly-hardware": "ref-x",
}


def test_hardware_overlay_draws_the_selected_set_solid_over_the_reference_dashed(page, server):
    """figures.js's side of the overlay contract, on a hand-made figure: with another set selected
    (html[data-course-hardware]) its traces are drawn solid, the reference's dashed and named
    "(reference)", in one colour per trace; with the reference selected, or a set the figure lacks,
    the page's own figure alone."""
    page.goto(server + MODULE_02)
    wait_for_figures(page)

    def drawn(selected):
        return page.evaluate(
            """([attrs, selected]) => {
            document.getElementById('__overlay')?.remove();
            const el = document.createElement('div');
            el.id = '__overlay'; el.className = 'course-plot';
            for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, JSON.stringify(v).replace(/^"|"$/g, ''));
            document.querySelector('article').appendChild(el);
            document.documentElement.setAttribute('data-course-hardware', selected);
            return window.courseFigures.draw(el).then(() => ({
                drawn: el.getAttribute('data-drawn-hardware'),
                traces: el._fullData.map(t => [t.name, t.line.dash, t.line.color, [...t.y]]),
            }));
        }""",
            [OVERLAY_FIGURE, selected],
        )

    over = drawn("cpu-x")
    assert over["drawn"] == "cpu-x over ref-x"
    (mine, dash, color, ys), (theirs, ref_dash, ref_color, ref_ys) = over["traces"]
    assert (mine, dash, ys) == ("a (cpu-x)", "solid", [5, 6]), "the selected set's trace is not solid and named"
    assert (theirs, ref_dash, ref_ys) == ("a (reference)", "dash", [1, 2])
    assert color == ref_color, "a trace and its reference counterpart in different colours"
    for selected in ("ref-x", "no-such-set"):
        alone = drawn(selected)
        assert [t[0] for t in alone["traces"]] == ["a"] and alone["traces"][0][3] == [1, 2], selected
    page.evaluate("() => document.documentElement.removeAttribute('data-course-hardware')")
    assert page.console_errors == []
