"""No measured number is typed into prose: numbers with units of time, rate or ratio must come
from build_results/ through a placeholder, or be marked as cited ({{ cited VALUE | SOURCE }}) or
quoted (<q>...</q>)."""

import re

import pytest
from conftest import ROOT

UNITS = r"(?:ns|µs|us|ms|GB/s|TB/s|MB/s|TFLOP/s|GFLOP/s|TFLOPS|tokens/s|%|×)"
MEASURED_LOOKING = re.compile(rf"(?<![\w.])\d[\d,.]*\s?{UNITS}(?![\w/])")
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def prose_of(text: str) -> str:
    text = re.sub(r"^(\s*)(```|~~~).*?^\1\2", " ", text, flags=re.S | re.M)  # fenced code
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)  # comments and test markers
    text = re.sub(r"\{\{.*?\}\}", " ", text, flags=re.S)  # placeholders, cited figures
    text = re.sub(r"<q\b.*?</q>", " ", text, flags=re.S)  # quotations
    text = re.sub(r"`[^`\n]*`", " ", text)  # inline code, one line
    return text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_no_typed_measurements(page):
    found = MEASURED_LOOKING.findall(prose_of(page.read_text()))
    assert not found, (
        f"{page.relative_to(ROOT)} types measured-looking numbers {found}: use a placeholder, "
        "{{ cited VALUE | SOURCE }} or a <q> quotation"
    )


def test_the_lint_catches_what_it_should():
    assert MEASURED_LOOKING.findall(prose_of("eager costs 7.3 µs per op and reaches 4,273 GB/s, 11% busy"))
    assert MEASURED_LOOKING.findall(prose_of("a `b\n\nthen 7 µs per op` c"))  # code spans stay on one line
    assert not MEASURED_LOOKING.findall(
        prose_of("costs {{ m02/x:y | .1f }} µs, `2 ms` in code, {{ cited 4.8 TB/s | datasheet }}")
    )
