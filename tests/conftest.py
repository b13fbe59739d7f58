"""Shared fixtures: the repository root and one strict build of the site per test session."""
import os
import socket
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def site_port():
    """The port the browser tests serve on: the site is built for that origin, because Material's
    instant navigation only intercepts links under the site_url its sitemap names."""
    return free_port()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, site_port):
    """`mkdocs build --strict` once; returns (site dir, seconds it took)."""
    site = tmp_path_factory.mktemp("site")
    env = dict(os.environ, SITE_URL=f"http://127.0.0.1:{site_port}/", NO_MKDOCS_2_WARNING="1")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
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
