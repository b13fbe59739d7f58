"""Shared fixtures: the repository root and one strict build of the site per test session."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_python(args, timeout=600, env_extra=None, cwd=ROOT):
    """Run a Python file or module in a fresh process, on the CPU, as a reader would."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=str(ROOT))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """`mkdocs build --strict` once; returns (site dir, seconds it took)."""
    site = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return site, seconds


_script_runs = {}


def run_script_once(path):
    """`python path` on the CPU, run once per test session however many tests need it."""
    key = str(path)
    if key not in _script_runs:
        _script_runs[key] = run_python([key])
    return _script_runs[key]
