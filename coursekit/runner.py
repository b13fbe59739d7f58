"""Run one snippet's measure() in this (fresh) process and write its data as JSON.

    python -m coursekit.runner snippets/m02/host_overhead.py OUT.json [--small] [--table]

``--table`` then prints the snippet's table from that data (``main_with_table``).

The build job (coursekit.build) starts one of these per snippet, so that the caching
allocator, compile caches and CUDA state never leak from one experiment into the next.
The output holds the snippet's data and the provenance that only this process can see
(device, driver, library versions); the build job adds the rest and validates it.

When its parent, the build job, dies (even by SIGKILL, which runs no cleanup), this process and
its process group (compile workers it started) go too: the kernel sends it SIGTERM
(PR_SET_PDEATHSIG, set by the job), whose handler here SIGKILLs the whole group; a watchdog
thread does the same where that signal is not available.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "none"
    except (OSError, subprocess.TimeoutExpired):
        return "none"


def device_provenance() -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    cuda = torch.cuda.is_available()
    prov = {
        "gpu": torch.cuda.get_device_name() if cuda else "none (CPU run)",
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "driver": _driver() if cuda else "none",
        "cuda": torch.version.cuda or "none",
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "os_kernel": platform.release(),  # names the VM's kernel where there is one: host timings depend on it
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if "jax" in sys.modules:
        prov["jax"] = sys.modules["jax"].__version__
    return prov


class SnippetError(RuntimeError):
    """The snippet could not be run as a measurement: the message says what happened."""


def snippet_env(small: bool, base: dict | None = None) -> dict:
    """The environment a snippet runs in. Part of every result's hash (coursekit/results.py):
    changing how a snippet is run stales what it measured."""
    env = dict(os.environ if base is None else base)
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if small:
        env.setdefault("TRITON_INTERPRET", "1")
    else:
        env.pop("TRITON_INTERPRET", None)  # a GPU run must compile Triton kernels, not interpret them
    return env


def call_measure(snippet: Path, small: bool):
    """Load the snippet as a module (not as __main__: its table printing does not run) and call
    ``measure(small=...)``. Part of every result's hash, like ``snippet_env``."""
    spec = importlib.util.spec_from_file_location(f"snippet_{snippet.stem}", snippet)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.compile looks a function's globals up by module name
    sys.path.insert(0, str(snippet.parent))
    spec.loader.exec_module(module)
    if not callable(getattr(module, "measure", None)):
        raise SnippetError(f"{snippet} defines no measure(small=False) function")
    try:
        return module.measure(small=small)
    except SystemExit as exc:
        raise SnippetError(
            f"{snippet}: measure() called sys.exit({exc.code!r}) instead of returning its data"
        ) from None


def print_table(snippet: Path, data) -> None:
    """Run the snippet's ``if __name__ == "__main__":`` block (the table a reader sees from
    ``python snippet.py``) on ``data`` already measured by ``call_measure``: its ``measure`` is
    swapped for one that returns that data, so nothing is measured twice. The tests run every
    snippet once this way instead of twice (as a script, then through the runner)."""
    module = sys.modules[f"snippet_{snippet.stem}"]
    mains = [
        node
        for node in ast.parse(snippet.read_text()).body
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("__name__ == '__main__'", '__name__ == "__main__"')
    ]
    if len(mains) != 1:
        raise SnippetError(f'{snippet} has {len(mains)} `if __name__ == "__main__":` blocks, not one')
    module.measure = lambda small=False: data
    exec(compile(ast.Module(body=mains[0].body, type_ignores=[]), str(snippet), "exec"), module.__dict__)


def _die_with_parent(parent: int) -> None:
    """Poll until the parent process is gone, then SIGKILL this process's group (or, where this
    process leads no group of its own, only itself: never a shell's job that it happens to be in)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    _kill_group()


def _kill_group(signum=None, frame=None) -> None:
    """SIGTERM (the job died, or stops us): take the compile workers along, then ourselves."""
    if os.getpgid(0) == os.getpid():  # started with start_new_session=True, as the build job does
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _kill_group)
    threading.Thread(target=_die_with_parent, args=(os.getppid(),), daemon=True).start()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snippet", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--small", action="store_true", help="small sizes (CPU runs and tests)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    try:
        data = call_measure(args.snippet, args.small)
    except SnippetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    duration = time.perf_counter() - start
    prov = device_provenance()
    prov["duration_s"] = round(duration, 2)
    args.out.write_text(json.dumps({"data": data, "provenance": prov}, allow_nan=True))
    return 0


def main_with_table(argv=None) -> int:
    """``main``, then the snippet's table printed from the data that run measured (``print_table``):
    ``python coursekit/runner.py SNIPPET OUT --small --table``. ``main`` itself is unchanged (it is
    part of every result's hash); ``call_measure`` is wrapped for the call to keep what it returns."""
    kept = {}

    def call_measure_and_keep(snippet, small):
        kept["data"] = data = measure_once(snippet, small)
        return data

    measure_once = globals()["call_measure"]
    globals()["call_measure"] = call_measure_and_keep
    try:
        code = main(argv)
    finally:
        globals()["call_measure"] = measure_once
    if code != 0:
        return code
    args = argparse.ArgumentParser(add_help=False)
    args.add_argument("snippet", type=Path)
    snippet = args.parse_known_args(argv)[0].snippet
    try:
        print_table(snippet, kept["data"])
    except SnippetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    if "--table" in sys.argv[1:]:
        sys.exit(main_with_table([a for a in sys.argv[1:] if a != "--table"]))
    sys.exit(main())
