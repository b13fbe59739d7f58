"""A real browser reads the module 02 page: figures render, instant navigation works, dark mode
re-themes the figures, plotly.js loads only where needed, and the console stays clean.

Needs Chromium (Debian's `chromium` package: .ci/run installs it). Without it the tests skip,
saying so, unless CI is set, where a missing browser is a failure."""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Chromium for the browser tests: apt-get install chromium")
    pytest.skip("Chromium is not installed (apt-get install chromium); browser tests skipped", allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402

pytestmark = pytest.mark.browser
MODULE_02 = "part-j/02-eager-per-op/"


@pytest.fixture(scope="module")
def server(built_site, site_server):
    return site_server


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
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
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    pg.console_errors = []
    pg.bytes_loaded = {}
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


def figures_rendered(pg):
    return pg.evaluate("""() => {
        const plots = [...document.querySelectorAll('.course-plot')];
        return [plots.length, plots.filter(p => p.querySelector('.main-svg')).length];
    }""")


def wait_for_figures(pg):
    pg.wait_for_function(
        """() => {
        const plots = [...document.querySelectorAll('.course-plot')];
        return plots.length > 0 && plots.every(p => p.querySelector('.main-svg'));
    }""",
        timeout=20000,
    )


def test_module_02_figures_render_without_errors(page, server):
    page.goto(server + MODULE_02)
    wait_for_figures(page)
    total, drawn = figures_rendered(page)
    assert total >= 2 and drawn == total
    assert any("plotly-basic" in url for url in page.bytes_loaded)
    assert page.console_errors == []


def test_transferred_size_under_two_megabytes(page, server):
    page.goto(server + MODULE_02)
    wait_for_figures(page)
    page.wait_for_load_state("networkidle")
    total = sum(page.bytes_loaded.values())
    assert total < 2_000_000, f"module 02 transferred {total} bytes"


def test_plotly_is_not_loaded_on_pages_without_figures(page, server):
    page.goto(server)
    page.wait_for_load_state("networkidle")
    assert not any("plotly" in url for url in page.bytes_loaded), list(page.bytes_loaded)
    assert page.console_errors == []


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


def test_every_page_loads_without_console_errors(page, server, built_site):
    site, _ = built_site
    urls = sorted(
        str(p.parent.relative_to(site)) + "/"
        for p in site.rglob("index.html")
        if "404" not in str(p) and p.parent != site
    )
    assert len(urls) >= 20
    for url in [""] + urls:
        page.goto(server + url)
        page.wait_for_load_state("networkidle")
        assert page.console_errors == [], f"{url}: {page.console_errors}"
        assert not [u for u in page.bytes_loaded if not u.startswith(server)], f"{url} fetched from elsewhere"
