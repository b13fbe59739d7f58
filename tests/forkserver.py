"""A Python that has imported torch and triton (or torch only) once and forks a child per run.

Most of what a test pays for a fresh interpreter on a small CPU is `import torch` (seconds), and the
tests start one for every code block on the site and every snippet; a block that calls torch.compile
pays as much again to import its machinery (torch._dynamo, which imports triton, and Inductor's
compile_fx), which the code blocks' server therefore imports too (``COMPILER``). A child forked from
this server starts with those already in sys.modules and nothing else of anyone's: no state of a
test, no compiled code, no configuration changed (importing them draws no random number and starts
no thread); the compiling server has also asked Inductor once which vector instruction sets the CPU
runs, an answer every child would get the same. Its environment, working folder, argv and
sys.path[0] are those the fresh interpreter would have had, and its stdout and stderr go to files.
What cannot be the same is anything read from the environment while those modules are imported; so
code that touches the environment, or starts processes through multiprocessing (which re-imports
__main__), runs in a fresh interpreter instead (``needs_fresh``).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# Code that may behave differently with torch imported before it runs: it sets the environment
# (which torch and triton read as they are imported), or spawns interpreters through multiprocessing
# (which re-imports __main__). Reading the environment is harmless, and so are two settings: the
# server's own TRITON_INTERPRET=1, and JAX's variables (the server has not imported JAX).
FRESH = re.compile(
    r"environ\[[^\]]+\]\s*=|environ\.(setdefault|update|pop)|putenv|multiprocessing|mp\.spawn|set_start_method"
)
HARMLESS = re.compile(
    r"""os\.environ\.setdefault\("TRITON_INTERPRET", "1"\)|os\.environ\.setdefault\("XLA_\w+", "\w+"\)"""
)

SERVER = r"""
import json, os, runpy, sys, traceback
import importlib
for _name in sys.argv[1].split(","):  # the point of the server: imported once (torch, and triton unless told)
    importlib.import_module(_name)
if "torch._inductor.compile_fx" in sys.argv[1].split(","):
    # A compile on the CPU first probes which vector instruction sets the machine runs (Inductor builds
    # a test program per set and loads it in a child interpreter: about 1.4 s here) and caches the list
    # for the process: a fact of the machine, the same in every child, so the server probes it once.
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list
    valid_vec_isa_list()

def child(req):
    for fd, path in ((1, req["out"]), (2, req["err"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    argv = req["argv"]
    code = 0
    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            main = type(sys)("__main__")  # a module of its own, as a fresh interpreter's __main__
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

channel = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    channel.write(json.dumps({"pid": pid}) + "\n")
    _, status = os.waitpid(pid, 0)
    channel.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
"""


# What torch.compile imports on its first call, imported by the code blocks' server besides torch and
# triton (torch._dynamo imports triton itself): about 2.7 s of CPU a compiling block no longer pays.
COMPILER = ("torch._dynamo", "torch._inductor.compile_fx")


def needs_fresh(code: str) -> bool:
    return FRESH.search(HARMLESS.sub("", code)) is not None


class ForkServer:
    """One server per test process, started on first use with the environment its children get."""

    def __init__(self, env: dict, cwd: Path, preload: tuple[str, ...] = ("torch", "triton", *COMPILER)):
        self.env, self.preload = env, preload
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, ",".join(preload)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self.buffer = b""

    def _line(self, timeout: float | None = None) -> dict | None:
        """The server's next line, read unbuffered from its pipe; None if none came within timeout."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("the fork server exited")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, argv: list[str], cwd, env: dict, timeout: float) -> subprocess.CompletedProcess:
        folder = Path(tempfile.mkdtemp(prefix="forked-", dir=env.get("TMPDIR")))
        out, err = folder / "stdout", folder / "stderr"
        request = {"argv": argv, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        pid = self._line()["pid"]
        done = self._line(timeout)
        timed_out = done is None
        if timed_out:
            os.kill(pid, signal.SIGKILL)
            done = self._line()
        rc = done["rc"]
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        for f in (out, err):
            f.unlink()
        folder.rmdir()
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess([sys.executable, *argv], rc, stdout, stderr)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
