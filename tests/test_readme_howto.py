"""README's "Adding a module, a hardware set, a race" names real things: every repository path it
writes in backticks exists, and every ``results.name``, ``KINDS`` or ``SKIP_CLASSES`` it names is
defined where it says."""

from __future__ import annotations

import re

from conftest import ROOT

from coursekit import prose
from coursekit import results as store
from coursekit.page import kinds

SECTION = "## Adding a module, a hardware set, a race"
PATH = re.compile(r"`((?:coursekit|scripts|tests|includes|build_results|snippets|docs)/[\w./-]+?)`")
NAMED = re.compile(r"`results\.(\w+)\(\)`")
TEMPLATED = re.compile(r"NN|mNN|<set>|part-x")


def stale(text: str) -> list[str]:
    """What the section names that does not exist (paths written with NN, mNN, part-x or <set> are patterns)."""
    section = text[text.index(SECTION) :]
    section = section[: section.find("\n## ", len(SECTION))] if "\n## " in section[len(SECTION) :] else section
    missing = [p for p in PATH.findall(section) if not TEMPLATED.search(p) and not (ROOT / p).exists()]
    missing += [f"results.{n}()" for n in NAMED.findall(section) if not callable(getattr(store, n, None))]
    return missing


def test_the_check_names_a_path_and_a_function_that_are_gone():
    text = f"{SECTION}\n\nsee `coursekit/page/gone.py`, `snippets/mNN/` and `results.nothing_here()`\n"
    assert stale(text) == ["coursekit/page/gone.py", "results.nothing_here()"]


def test_the_how_to_add_steps_name_what_exists():
    text = (ROOT / "README.md").read_text()
    assert stale(text) == []
    section = text[text.index(SECTION) :]
    assert len(PATH.findall(section)) >= 10 and len(NAMED.findall(section)) >= 3, "the check reads nothing"
    steps = ("`KINDS` (`coursekit/page/kinds.py`)", "`SKIP_CLASSES` in `coursekit/prose.py`", "`results.check_race`")
    for step in steps:
        assert step in section, f"README's how-to no longer says {step}"
    assert isinstance(kinds.KINDS, dict) and prose.SKIP_CLASSES and callable(store.check_race)
