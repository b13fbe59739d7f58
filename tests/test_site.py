"""The site builds strictly, fast, offline, with every placeholder filled, and fails loudly when one cannot be."""

import json
import re
import shutil
import subprocess
import sys

import markdown
import plotly.offline
import pytest
from conftest import ROOT

from coursekit.mdext import PlaceholderError

PLOTLY_JS = ROOT / "docs" / "assets" / "javascripts" / f"plotly-basic-{plotly.offline.get_plotlyjs_version()}.min.js"


def test_strict_build_passes_within_a_minute(built_site):
    site, seconds = built_site
    assert (site / "part-j" / "02-eager-per-op" / "index.html").exists()
    assert seconds < 60, f"mkdocs build took {seconds:.0f} s; the budget is 60 s"


def test_no_placeholder_survives(built_site):
    site, _ = built_site
    for page in site.rglob("*.html"):
        text = page.read_text()
        left = re.findall(r"\{\{[^}]*\}\}", re.sub(r"<(code|pre)[^>]*>.*?</\1>", "", text, flags=re.S))
        assert not left, f"{page.relative_to(site)} still has {left[:3]}"


def test_plotly_bundle_matches_the_python_package():
    assert PLOTLY_JS.exists(), f"expected {PLOTLY_JS.name}: the plotly.js bundle of plotly.py's version"
    header = PLOTLY_JS.read_text()[:200]
    assert f"v{plotly.offline.get_plotlyjs_version()}" in header
    assert PLOTLY_JS.name in (ROOT / "docs" / "assets" / "javascripts" / "figures.js").read_text()


def test_site_is_offline(built_site):
    site, _ = built_site
    for page in site.rglob("*.html"):
        text = page.read_text()
        external = [
            u
            for u in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?://[^"]+)"', text)
            if not u.startswith(("http://127.0.0.1", "http://localhost"))
        ]
        assert not external, f"{page.relative_to(site)} loads {external} from the network"
        assert "fonts.googleapis" not in text


def test_pages_without_figures_do_not_embed_plotly(built_site):
    site, _ = built_site
    for page in site.rglob("*.html"):
        assert "plotly-basic" not in page.read_text(), f"{page} loads plotly.js directly; figures.js should"


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
        ("{{ cited 3 TB/s }}", "source"),
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
        "{{ reading-time part-k/04-dynamo.md }}\n\n{{ hardware-sets }}"
    )
    assert 'class="cited"' in html and "NVIDIA H200 product brief" in html
    assert '<details class="provenance">' in html and "data:application/json;base64," in html
    assert "data:text/x-python;base64," in html  # the snippet itself, downloadable
    assert "<pre><code>" in html and "aten::add" in html
    assert re.search(r"\d+ min, in preparation", html)
    assert "nvidia-h200" in html and "<table" in html


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
