"""How long a phone takes to load each chapter, against the glossary page (a page of text alone).

    mkdocs build --strict -d /tmp/site                  # a built site
    python scripts/bench_phone.py /tmp/site             # every chapter, 3 repetitions
    python scripts/bench_phone.py /tmp/site --pages part-k/07-triton/ --reps 5

Serves the built site from a local http.server on 127.0.0.1 and opens each page in Chromium
(Playwright, `/usr/bin/chromium` unless --chromium) as a phone would: 390x844, touch, device pixel
ratio 2, the CPU throttled 4x (Chrome DevTools Protocol, Emulation.setCPUThrottlingRate), each
visit in a fresh browser context (an empty cache). A page's time is when its `load` event fires
(performance's navigation entry, loadEventStart, from the start of the navigation). Each visit
of a page follows a visit of the glossary, and the ratio of the two is that visit's ratio, so
that a machine that slows down slows both; the script prints each page's median load time and
the median of its ratios.

Times on a shared or busy machine move; the ratio is what to compare. It measures, it asserts
nothing: exit status 0 unless a page fails to load (1).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import sys
import threading
from pathlib import Path

BASELINE = "glossary/"
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def chapters(site: Path) -> list[str]:
    """Every chapter of the built site (part-x/NN-name/), in order."""
    return sorted(f"{p.parent.relative_to(site)}/" for p in site.glob("part-*/[0-9][0-9]-*/index.html"))


def load_ms(browser, url: str, throttle: float) -> dict:
    """One visit of ``url`` in a fresh context: milliseconds to DOMContentLoaded and to load."""
    context = browser.new_context(**PHONE)
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})
        page.goto(url, wait_until="load", timeout=120_000)
        return page.evaluate(
            """() => { const n = performance.getEntriesByType('navigation')[0];
            return {dcl: n.domContentLoadedEventStart, load: n.loadEventStart}; }"""
        )
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="a built site (mkdocs build -d SITE)")
    parser.add_argument(
        "--pages", nargs="*", help="pages to time, as URLs under the site root (default: every chapter)"
    )
    parser.add_argument("--reps", type=int, default=3, help="visits of each page (default 3)")
    parser.add_argument("--throttle", type=float, default=4.0, help="CPU slow-down factor (default 4)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    if not (args.site / "index.html").exists():
        parser.error(f"{args.site}: no index.html; build the site first (mkdocs build -d {args.site})")
    pages = args.pages or chapters(args.site)
    if not pages:
        parser.error(f"{args.site}: no chapter pages (part-*/NN-*/)")
    for page in [BASELINE, *pages]:
        if not (args.site / page / "index.html").exists():
            parser.error(f"{args.site}: no page {page}")

    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(args.site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{httpd.server_address[1]}/"
    times: dict[str, list[dict]] = {p: [] for p in [BASELINE, *pages]}
    ratios: dict[str, list[float]] = {p: [] for p in pages}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=args.chromium,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
            )
            load_ms(browser, origin + BASELINE, args.throttle)  # warm the server and the browser's start-up
            for rep in range(args.reps):
                for page in pages:
                    try:
                        base = load_ms(browser, origin + BASELINE, args.throttle)
                        this = load_ms(browser, origin + page, args.throttle)
                    except Exception as exc:
                        print(f"{page}: did not load ({type(exc).__name__}: {exc})", file=sys.stderr)
                        return 1
                    times[BASELINE].append(base)
                    times[page].append(this)
                    ratios[page].append(this["load"] / base["load"])
                print(f"round {rep + 1} of {args.reps} done", file=sys.stderr)
            browser.close()
    finally:
        httpd.shutdown()

    def median(page, key):
        return statistics.median(t[key] for t in times[page])

    print(
        f"390x844, DPR 2, touch, CPU throttled {args.throttle:g}x; medians of {args.reps} visits of each page, "
        "each with an empty cache, each after a visit of the glossary"
    )
    print(f"{'page':<40} {'DOMContentLoaded':>17} {'load':>9} {'load / glossary':>16}")
    for page in times:
        ratio = statistics.median(ratios[page]) if page in ratios else 1.0
        print(f"{page:<40} {median(page, 'dcl'):>14,.0f} ms {median(page, 'load'):>6,.0f} ms {ratio:>15.2f}x")
    worst = max(pages, key=lambda pg: statistics.median(ratios[pg]))
    print(f"slowest: {worst} at {statistics.median(ratios[worst]):.2f}x the glossary's load time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
