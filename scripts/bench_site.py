"""How long a strict build of the site takes, and where the time goes.

    python scripts/bench_site.py            # cold cache, warm cache, one-word-edit rebuilds
    python scripts/bench_site.py --only warm --only dirty

Each scenario runs ``mkdocs build --strict`` in a fresh process (a one-word edit: a warm build, then
the rebuild ``mkdocs serve`` does after one word of one page changed, in the same process, the
page's text edited in memory only; "dirty": the same under ``mkdocs serve --dirty``, whose
rebuild writes the edited page alone and leaves every page whose HTML is newer than its source
as it is). BENCH_KEEP=<folder> keeps the edited page as each rebuild wrote it (edit.html,
dirty.html), to compare the two. The cold scenario uses empty caches in a temporary folder
(COURSE_CACHE_DIR, mkdocs-jupyter's cache_dir), so nothing under .cache/ is touched; the warm one
first fills them. Printed per phase: wall seconds and CPU seconds of this process (on a loaded
machine the wall time is the CPU time plus waiting for a core: the load average is printed too).
Phases nest: "placeholders" is part of "Markdown pages", "figures.py calls" part of
"placeholders".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EDIT_PAGE = "part-j/02-eager-per-op.md"


class Clock:
    """Inclusive wall and CPU seconds per phase, for wrapped functions (a re-entered phase counts once)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.depth: dict[str, int] = {}

    def wrap(self, owner, attr: str, phase: str):
        fn = getattr(owner, attr)

        def timed(*args, **kwargs):
            if self.depth.get(phase):
                return fn(*args, **kwargs)
            self.depth[phase] = 1
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth[phase] = 0
                self.wall[phase] = self.wall.get(phase, 0.0) + time.perf_counter() - w
                self.cpu[phase] = self.cpu.get(phase, 0.0) + time.process_time() - c

        setattr(owner, attr, timed)


def instrument(clock: Clock) -> None:
    import markdown
    from material.plugins.search import plugin as search
    from mkdocs.commands import build
    from mkdocs.structure.pages import Page
    from mkdocs_jupyter import convert

    from coursekit import mdext, plugin
    from coursekit.page import figures

    clock.wrap(plugin.CoursePlugin, "on_files", "downloads (plugin on_files)")
    clock.wrap(markdown.Markdown, "convert", "Markdown pages")
    clock.wrap(mdext.ResultsPreprocessor, "run", "placeholders")
    clock.wrap(figures, "call", "figures.py calls (uncached)")
    clock.wrap(convert, "nb2html", "notebooks rendered (uncached)")
    clock.wrap(Page, "render", "pages rendered (Markdown and notebooks)")
    clock.wrap(plugin.CoursePlugin, "on_page_content", "notebook pages restyled")
    clock.wrap(search.SearchPlugin, "on_page_context", "search index")
    clock.wrap(search.SearchPlugin, "on_post_build", "search index")
    clock.wrap(build, "_build_page", "templates and writing")
    clock.wrap(build, "_build_theme_template", "templates and writing")


def one_build(site: str, edit: str | None = None, dirty: bool = False) -> dict:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(strict=True, site_dir=site)
    if dirty:  # what `mkdocs serve --dirty` tells the plugins before its first build
        config.plugins.on_startup(command="serve", dirty=True)
    if os.environ.get("BENCH_JUPYTER_CACHE"):
        config.plugins["mkdocs-jupyter"].config["cache_dir"] = os.environ["BENCH_JUPYTER_CACHE"]
    if edit:
        from mkdocs.structure.pages import Page

        read = Page.read_source

        def read_edited(self, config):
            read(self, config)
            if self.file.src_uri == edit:
                self.markdown = self.markdown.replace(" the ", " a ", 1)  # one word

        Page.read_source = read_edited
    w, c = time.perf_counter(), time.process_time()
    build(config, dirty=dirty)
    return {"total": (time.perf_counter() - w, time.process_time() - c)}


def child(scenario: str) -> None:
    """Run one scenario in this process and print its phases as JSON."""
    clock = Clock()
    instrument(clock)
    dirty = scenario == "dirty"
    with tempfile.TemporaryDirectory() as site:
        total = one_build(site, dirty=dirty)["total"]
        if scenario in ("edit", "dirty"):  # what `mkdocs serve` does after a save: the same process builds again
            clock.wall.clear(), clock.cpu.clear()
            page = Path(site, Path(EDIT_PAGE).with_suffix(""), "index.html")
            if dirty:  # the saved page is newer than its HTML: `--dirty` rebuilds it alone
                os.utime(page, (0, 0))
            total = one_build(site, edit=EDIT_PAGE, dirty=dirty)["total"]
            if os.environ.get("BENCH_KEEP"):  # the edited page as rebuilt, to compare the two rebuilds
                Path(os.environ["BENCH_KEEP"], f"{scenario}.html").write_bytes(page.read_bytes())
    phases = {p: (clock.wall[p], clock.cpu[p]) for p in clock.wall}
    print(json.dumps({"total": total, "phases": phases}))


def run(scenario: str, cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1", COURSE_CACHE_DIR=f"{cache_dir}/course")
    env["BENCH_JUPYTER_CACHE"] = f"{cache_dir}/mkdocs-jupyter"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", scenario], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode:
        sys.exit(f"the {scenario} build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["cold", "warm", "edit", "dirty"], action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    names = {
        "cold": "cold cache",
        "warm": "warm cache",
        "edit": f"one-word edit of {EDIT_PAGE}, rebuilt",
        "dirty": "one-word edit, --dirty",
    }
    with tempfile.TemporaryDirectory() as cache_dir:
        results = {}
        for scenario in args.only or ["cold", "warm", "edit", "dirty"]:
            if scenario != "cold" and not results:
                run("warm", cache_dir)  # fill the caches first
            results[scenario] = run(scenario, cache_dir)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"{'phase':44} " + " ".join(f"{names[s][:24]:>26}" for s in results))
    print(f"{'':44} " + " ".join(f"{'wall s':>13}{'CPU s':>13}" for _ in results))
    phases = ["total"] + sorted({p for r in results.values() for p in r["phases"]})
    for phase in phases:
        cells = []
        for r in results.values():
            w, c = r["total"] if phase == "total" else r["phases"].get(phase, (0.0, 0.0))
            cells.append(f"{w:13.1f}{c:13.1f}")
        print(f"{phase:44} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
