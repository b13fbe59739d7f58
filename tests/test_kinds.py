"""The placeholder kinds are one table (coursekit/page/kinds.py's KINDS), and the list at the top of
coursekit/mdext.py, where a writer looks a kind up, names every one of them and no other."""

from __future__ import annotations

import re

from coursekit import mdext
from coursekit.page import kinds

LISTED = re.compile(r"^\s{4}\{\{ (?P<head>[a-z][a-z-]*)(?=[ }])", re.M)


def listed_kinds(doc: str) -> set[str]:
    """The first words of the placeholders listed in ``doc`` that are not values (a value is ``module/...``)."""
    return {m["head"] for m in LISTED.finditer(doc)}


def test_the_listing_check_sees_a_kind_and_skips_a_value():
    doc = "    {{ m02/a:x | .1f }}   a value\n    {{ figure m02/a | c }}   a figure\n    {{ hardware-sets }}  t\n"
    assert listed_kinds(doc) == {"figure", "hardware-sets"}


def test_every_kind_is_in_the_table_and_listed_in_mdexts_docstring():
    assert mdext.KINDS is kinds.KINDS
    assert all(callable(handler) for handler in kinds.KINDS.values())
    listed = listed_kinds(mdext.__doc__)
    assert listed - set(kinds.KINDS) == set(), "listed in coursekit/mdext.py but no kind in KINDS"
    assert set(kinds.KINDS) - listed == set(), "in KINDS but not listed at the top of coursekit/mdext.py"
