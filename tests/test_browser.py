"""A real browser reads the site: figures render, instant navigation works, dark mode re-themes
the figures, plotly.js loads once and only where there is a figure, no page asks anything of
another origin, and the console stays clean.

Every page is opened with every request routed: a request for anything off the test server's
origin is aborted and recorded, so a fetch that would never get a response (a CDN the test
machine cannot reach) is seen as well as one that would.

Needs Chromium (Debian's `chromium` package: .ci/run installs it). Without it the tests skip,
saying so, unless CI is set, where a missing browser is a failure."""

import os
import re
import shutil

import pytest
from conftest import child_env

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Chromium for the browser tests: apt-get install chromium")
    pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

pytestmark = pytest.mark.browser
MODULE_01 = "part-j/01-why-eager-won/"
MODULE_02 = "part-j/02-eager-per-op/"
PLOTLY_JS = re.compile(r"/plotly[^/?#]*\.js(?:[?#]|$)")


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


@pytest.fixture
def page(browser, server):
    """A page whose requests are all recorded (pg.requests); those off the server's origin are
    aborted and recorded apart (pg.offsite), and so are WebSockets, which no page should open."""
    origin = server.rstrip("/")
    context = browser.new_context()
    pg = context.new_page()
    pg.console_errors = []
    pg.bytes_loaded = {}
    pg.requests = []
    pg.offsite = []
    pg.offsite_named = False

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
    yield pg
    context.close()
    if not pg.offsite_named:  # every test, checking or not, fails on an off-site request
        assert not pg.offsite, f"requests off the site's origin: {pg.offsite}"


def assert_on_site(pg, where):
    pg.offsite_named = bool(pg.offsite)
    assert not pg.offsite, f"{where} requested off the site's origin: {pg.offsite}"


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
    figures are still there for a moment)."""
    pg.wait_for_function(
        """([ids, notIds]) => {
        const plots = [...document.querySelectorAll('.course-plot')];
        const now = JSON.stringify(plots.map(p => p.parentNode.id));
        return plots.length > 0 && plots.every(p => p.querySelector('.main-svg'))
            && (ids === null || now === JSON.stringify(ids)) && (notIds === null || now !== JSON.stringify(notIds));
    }""",
        arg=[ids, not_ids],
        timeout=20000,
    )


def plotly_requests(pg):
    return [u for u in pg.requests if PLOTLY_JS.search(u)]


def test_module_02_figures_render_without_errors(page, server):
    page.goto(server + MODULE_02)
    wait_for_figures(page)
    total, drawn = figures_rendered(page)
    assert total >= 2 and drawn == total
    assert any("plotly-basic" in url for url in page.bytes_loaded)
    assert page.console_errors == []


def test_transferred_size_under_two_megabytes(page, server):
    """The page's own weight (HTML, CSS, JS, its figures' data) under 2 MB; the site's search index,
    which the search worker fetches once for every page and which grows with every chapter, has
    its own budget of 1 MB (Part K's four chapters brought it to about 0.4 MB)."""
    page.goto(server + MODULE_02)
    wait_for_figures(page)
    page.wait_for_load_state("networkidle")
    index = {url: n for url, n in page.bytes_loaded.items() if url.endswith("search/search_index.json")}
    total = sum(page.bytes_loaded.values()) - sum(index.values())
    assert total < 2_000_000, f"module 02 transferred {total} bytes besides the search index"
    assert sum(index.values()) < 1_000_000, f"the search index is {sum(index.values())} bytes"


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


def test_every_page_loads_without_console_errors(page, server, built_site):
    """Every page: nothing requested off the site (named if so), no console error, and plotly.js
    requested once where the page has a figure, never where it has none."""
    site, _ = built_site
    urls = sorted(str(p.parent.relative_to(site)) + "/" for p in site.rglob("index.html") if p.parent != site)
    assert len(urls) >= 20
    with_figures = 0
    for url in ["", *urls, "404.html"]:
        page.requests.clear()
        page.goto(server + url)
        page.wait_for_load_state("networkidle")
        # what the page would load lazily it loads now, so that it is routed too
        if page.evaluate("""() => { const lazy = document.querySelectorAll('[loading=lazy]');
            lazy.forEach(e => { e.loading = 'eager'; }); return lazy.length; }"""):
            page.wait_for_load_state("networkidle")
        assert_on_site(page, url or "/")
        assert page.console_errors == [], f"{url or '/'}: {page.console_errors}"
        figures = figures_rendered(page)[0]
        plotly = plotly_requests(page)
        defined = page.evaluate("() => typeof window.Plotly !== 'undefined'")
        if figures:
            with_figures += 1
            wait_for_figures(page)
            assert len(plotly) == 1 and defined, f"{url or '/'}: {figures} figures, plotly.js requests {plotly}"
        else:
            assert not plotly and not defined, f"{url or '/'} has no figure but loads plotly.js: {plotly}"
    assert with_figures >= 2
