"""A result's hash covers what its snippet uses, definition by definition (coursekit/deps.py)."""

import re
import textwrap

import pytest
from conftest import ROOT

from coursekit import deps
from coursekit import results as store

HELPERS = """
import time

SCALE = 1e6


def _sample(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * SCALE


def host_us(fn):
    return {"median": _sample(fn)}


def other(fn):
    return 2
"""
SNIPPET = """
from coursekit.helpers import host_us


def measure(small=False):
    return host_us(lambda: None)
"""
USES_OTHER = """
from coursekit import helpers


def measure(small=False):
    return helpers.other(None)
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A project with coursekit/helpers.py and two snippets: one uses host_us, one uses other."""
    (tmp_path / "coursekit").mkdir()
    (tmp_path / "coursekit" / "__init__.py").write_text("")
    (tmp_path / "coursekit" / "runner.py").write_text((ROOT / "coursekit" / "runner.py").read_text())
    (tmp_path / "coursekit" / "helpers.py").write_text(HELPERS)
    (tmp_path / "snippets" / "mx").mkdir(parents=True)
    (tmp_path / "snippets" / "mx" / "a.py").write_text(SNIPPET)
    (tmp_path / "snippets" / "mx" / "b.py").write_text(USES_OTHER)
    monkeypatch.setattr(deps, "ROOT", tmp_path)
    return tmp_path


def hashes(tree):
    return {name: store.snippet_hash(tree / "snippets" / "mx" / f"{name}.py") for name in ("a", "b")}


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_adding_a_function_to_a_helper_module_stales_nothing(tree):
    before = hashes(tree)
    (tree / "coursekit" / "helpers.py").write_text(HELPERS + "\n\ndef brand_new():\n    return 1\n")
    assert hashes(tree) == before


def test_changing_a_helper_stales_exactly_its_users(tree):
    before = hashes(tree)
    edit(tree / "coursekit" / "helpers.py", 'return {"median": _sample(fn)}', 'return {"median": -_sample(fn)}')
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] == before["b"]


def test_a_helper_of_a_helper_counts(tree):
    before = hashes(tree)
    edit(tree / "coursekit" / "helpers.py", "fn()\n    return (time", "fn()\n    fn()\n    return (time")
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] == before["b"]


def test_a_module_constant_that_a_used_function_reads_stales_its_users(tree):
    before = hashes(tree)
    edit(tree / "coursekit" / "helpers.py", "SCALE = 1e6", "SCALE = 1e3")
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] == before["b"]


def test_module_alias_attribute_uses_are_followed(tree):
    before = hashes(tree)
    edit(tree / "coursekit" / "helpers.py", "return 2", "return 3")
    after = hashes(tree)
    assert after["b"] != before["b"] and after["a"] == before["a"]


def test_how_the_runner_calls_measure_is_part_of_every_hash(tree):
    """Defect 14: changing how measure is called (e.g. small=True always) must stale every result."""
    before = hashes(tree)
    edit(tree / "coursekit" / "runner.py", "return module.measure(small=small)", "return module.measure(small=True)")
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] != before["b"]
    # and the environment it runs in
    edit(tree / "coursekit" / "runner.py", 'env["PYTHONUNBUFFERED"] = "1"', 'env["PYTHONUNBUFFERED"] = "0"')
    assert hashes(tree)["a"] != after["a"]


def test_comments_docstrings_and_formatting_do_not_count(tree):
    before = hashes(tree)
    path = tree / "coursekit" / "helpers.py"
    path.write_text('"""Docs."""\n# a comment\n' + HELPERS.replace("def host_us(fn):", "def host_us(fn):  # note"))
    assert hashes(tree) == before


def test_the_download_inlines_what_the_snippet_uses_and_nothing_else(tree):
    text = deps.standalone(tree / "snippets" / "mx" / "a.py")
    assert not re.search(r"^\s*(from|import)\s+coursekit", text, re.M)
    assert "def host_us" in text and "def _sample" in text and "SCALE = 1e6" in text
    assert "def other" not in text
    namespace = {"__name__": "standalone"}
    exec(compile(text, "standalone.py", "exec"), namespace)  # noqa: S102 - it is the file a reader runs
    assert "median" in namespace["measure"]()


def test_every_real_snippet_hashes_and_names_its_dependencies():
    for path in store.snippet_files():
        assert len(store.snippet_hash(path)) == 64
        used = {f"{deps.relative(d.path)}:{d.name}" for d in deps.dependencies(path)}
        assert "coursekit/runner.py:call_measure" in used, used
        assert not any(u.startswith("coursekit/build.py") for u in used)


def test_a_snippet_importing_a_missing_helper_is_an_error(tree):
    (tree / "snippets" / "mx" / "c.py").write_text(textwrap.dedent(SNIPPET).replace("host_us", "nope"))
    with pytest.raises(ImportError, match="nope"):
        store.snippet_hash(tree / "snippets" / "mx" / "c.py")


def test_code_that_runs_on_import_counts(tree):
    """A module-level setting (an environment variable, a backend flag) in a helper module runs
    when a snippet imports it: it stales the snippets that use that module, not the others."""
    before = hashes(tree)
    (tree / "coursekit" / "helpers.py").write_text("import os\n" + HELPERS + '\nos.environ["X"] = "1"\n')
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] != before["b"]  # both import helpers


def test_the_package_init_and_the_runner_main_count(tree):
    """coursekit/__init__.py runs on every import of a helper; runner.main runs every snippet."""
    before = hashes(tree)
    (tree / "coursekit" / "__init__.py").write_text("import os\nos.environ['Y'] = '1'\n")
    after = hashes(tree)
    assert after["a"] != before["a"] and after["b"] != before["b"]
    edit(
        tree / "coursekit" / "runner.py",
        "    start = time.perf_counter()\n",
        "    start = time.perf_counter()\n    os.environ['Z'] = '1'\n",
    )
    assert hashes(tree)["a"] != after["a"]


def test_the_download_orders_modules_by_use_and_keeps_only_needed_imports(tree):
    """A helper module whose import-time code uses another module's function comes after it; an
    import no kept definition uses (e.g. jax, for a reader who has only torch) is left out."""
    (tree / "coursekit" / "units.py").write_text("import json\n\n\ndef unit():\n    return 'us'\n")
    (tree / "coursekit" / "helpers.py").write_text(
        "import heapq\n\nfrom coursekit.units import unit\n"
        + HELPERS.replace('return {"median": _sample(fn)}', 'return {"median": _sample(fn), "unit": UNIT}')
        + "\nUNIT = unit()\n"
    )
    text = deps.standalone(tree / "snippets" / "mx" / "a.py")
    assert text.index("def unit") < text.index("UNIT = unit()")
    assert "import heapq" not in text and "import json" not in text
    namespace = {"__name__": "standalone"}
    exec(compile(text, "standalone.py", "exec"), namespace)  # noqa: S102
    assert namespace["measure"]()["unit"] == "us"


def test_the_download_does_not_import_a_name_the_snippet_already_imports(tree):
    """A helper's `from m import a, b` where the snippet has `from m import a` already: the inlined
    import keeps `b` alone (pyflakes would call a second import of `a` a redefinition); one that
    only repeats the snippet's names is dropped."""
    (tree / "coursekit" / "helpers.py").write_text(
        "from math import pi, tau\nfrom math import e\n\n\ndef circle():\n    return pi + tau + e\n"
    )
    (tree / "snippets" / "mx" / "a.py").write_text(
        "from math import e, pi\n\nfrom coursekit.helpers import circle\n\n\ndef measure(small=False):\n"
        "    return circle() + pi + e\n"
    )
    text = deps.standalone(tree / "snippets" / "mx" / "a.py")
    imports = [line for line in text.splitlines() if line.startswith("from math")]
    assert imports == ["from math import e, pi", "from math import tau"], imports
    namespace = {"__name__": "standalone"}
    exec(compile(text, "standalone.py", "exec"), namespace)  # noqa: S102
    assert abs(namespace["measure"]() - (4 * 3.141592653589793 + 2 * 2.718281828459045)) < 1e-9
