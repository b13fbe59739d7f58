"""The code follows the ecosystem's linter and formatter: ruff, configured in pyproject.toml."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


def ruff(*args, cwd=ROOT):
    if RUFF is None:
        pytest.fail("ruff is not installed: it is part of the test extra (pip install -e '.[test]')")
    return subprocess.run([RUFF, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


def test_ruff_check_passes():
    proc = ruff("check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_check_passes():
    proc = ruff("format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_would_catch_what_it_should(tmp_path):
    """The configuration lints and formats: an unused import and a badly formatted file fail."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\nx=1\n")
    assert ruff("check", "bad.py", cwd=tmp_path).returncode != 0
    assert ruff("format", "--check", "bad.py", cwd=tmp_path).returncode != 0
    (tmp_path / "page.md").write_text('```python\n--8<-- "snippets/x.py:sec"\n```\n')
    assert ruff("format", "--check", ".", cwd=tmp_path).returncode != 0  # bad.py only: pages are excluded
    assert "page.md" not in ruff("format", "--check", ".", cwd=tmp_path).stdout
