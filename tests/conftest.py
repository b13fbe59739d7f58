"""Shared fixtures: the repository root and one strict build of the site per test session."""

import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Triton decides at import whether its kernels run in the interpreter, and the first test module
# to import it fixes that for the session: on a machine without a GPU, the interpreter from the
# start (tests/test_m07_kernels.py runs Triton kernels in this process).
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def load_snippet(key: str):
    """snippets/<key>.py as a module, as the build job's runner loads one: its folder on sys.path
    while it runs, so that an import of a sibling snippet resolves."""
    path = ROOT / "snippets" / f"{key}.py"
    # a sibling imported by bare name (`from _model import ...`) may be another module's file of the
    # same name, cached by an earlier load in this process: forget it, so this folder's is imported
    for sibling in path.parent.glob("*.py"):
        cached = sys.modules.get(sibling.stem)
        if cached is not None and Path(getattr(cached, "__file__", "") or "").parent != path.parent:
            del sys.modules[sibling.stem]
    spec = importlib.util.spec_from_file_location(key.replace("/", "_"), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


_child_tmp = None  # set for the session by children_tmpdir below
_inductor_dir = None  # likewise: the test run's one Inductor cache


@pytest.fixture(scope="session", autouse=True)
def children_tmpdir(tmp_path_factory):
    """The processes the tests start (snippets, mkdocs, Chromium) write their temporary
    files (TMPDIR: torch's inductor cache, tempfile's) under pytest's tmp_path, not loose in /tmp."""
    global _child_tmp, _inductor_dir
    _child_tmp = tmp_path_factory.mktemp("child-tmp")
    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist each worker's basetemp (popen-gwN) sits in the run's own folder
    _inductor_dir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "inductor-cache"
    yield _child_tmp
    _child_tmp = _inductor_dir = None


def child_env(**extra):
    """os.environ for a child process, with TMPDIR in this session's children_tmpdir, and one
    Inductor cache for every child of the test run (under pytest-xdist, of every worker): a CPU
    compile's one-time costs (Inductor probes the CPU's vector ISAs by compiling test programs,
    ~8 s on a cold cache) are paid once per run, not once per worker. Snippets that time cold
    compiles make their own empty cache (torch._inductor.utils.fresh_cache), as on the GPU."""
    env = dict(os.environ, **extra)
    # pytest names the running test here, so the variable changes with every test: a child would
    # see a test's name no reader has, and each fork server (whose environment must equal its
    # children's) would be started again for every test, paying torch's import each time
    env.pop("PYTEST_CURRENT_TEST", None)
    if _child_tmp is not None:
        env["TMPDIR"] = str(_child_tmp)
    if _inductor_dir is not None and "TORCHINDUCTOR_CACHE_DIR" not in extra:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(_inductor_dir)
    return env


def run_python(args, timeout=600, env_extra=None, cwd=ROOT):
    """Run a Python file or module in a fresh process, on the CPU, as a reader would."""
    env = child_env(TRITON_INTERPRET="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


_fork_servers = {}  # PYTHONPATH -> the server that forks children with it


def run_forked(args, code: str, cwd, timeout=600, pythonpath=""):
    """run_python(args, cwd=cwd, env_extra={"PYTHONPATH": pythonpath}), forked from a server that
    has imported torch, triton and torch.compile's machinery once (tests/forkserver.py) unless
    ``code`` (what the child runs) touches the environment or multiprocessing; then, and with
    COURSE_TESTS_FRESH=1, in a fresh interpreter."""
    from forkserver import ForkServer, needs_fresh

    env = child_env(TRITON_INTERPRET="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=pythonpath)
    if needs_fresh(code) or os.environ.get("COURSE_TESTS_FRESH") == "1":
        return run_python(args, timeout=timeout, env_extra={"PYTHONPATH": pythonpath}, cwd=cwd)
    server = _fork_servers.get(pythonpath)
    if server is None or server.env != env:
        if server is not None:
            server.close()
        server = _fork_servers[pythonpath] = ForkServer(env, ROOT)
    return server.run(list(args), cwd, env, timeout)


def run_reader_code(args, code: str, cwd, timeout=600):
    """run_forked for a code block a reader runs: nothing of the repository on the path."""
    return run_forked(args, code, cwd, timeout, pythonpath="")


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("site")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without printing a line per request to stderr."""

    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="session")
def site_server(site_dir):
    """An HTTP server for the built site on 127.0.0.1, bound before the build: the site is built
    for this origin, because Material's instant navigation only intercepts links under the
    site_url its sitemap names. Yields the base URL."""
    handler = functools.partial(QuietHandler, directory=str(site_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def _mkdocs_build(site: Path, origin: str) -> dict:
    """`mkdocs build --strict` of the repository into ``site`` for the server at ``origin``."""
    env = child_env(SITE_URL=origin, NO_MKDOCS_2_WARNING="1")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env=env,
    )
    seconds = time.perf_counter() - start
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "seconds": seconds}


def copy_site_for(built: Path, built_origin: str, site: Path, origin: str) -> None:
    """``built`` (a site built for ``built_origin``) copied to ``site`` as the build for ``origin``
    writes it: the origin is the only thing a build takes from SITE_URL (the canonical links, the
    sitemap and its gzipped copy; the site's own links are relative, and SITE_URL's path, "/", is
    the same), so every occurrence of the one is replaced by the other, and sitemap.xml.gz is
    gzipped again as mkdocs gzips it (the same timestamp and file name)."""
    import gzip

    old, new = built_origin.encode(), origin.encode()
    for source in built.rglob("*"):
        target = site / source.relative_to(built)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif source.name == "sitemap.xml.gz":
            with gzip.open(source) as f:
                text = f.read()
                mtime = f.mtime
            with (
                open(target, "wb") as raw,
                gzip.GzipFile(fileobj=raw, filename=str(target), mode="wb", mtime=mtime) as f,
            ):
                f.write(text.replace(old, new))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            data = source.read_bytes()
            target.write_bytes(data.replace(old, new) if old in data else data)


@pytest.fixture(scope="session")
def built_site(site_dir, site_server, tmp_path_factory):
    """`mkdocs build --strict` once per test run; returns (site dir, seconds the build took).

    Under pytest-xdist the first worker to need it builds the site, under a lock, into the run's
    shared folder (for its own server's origin), and every worker serves a copy of that build made
    for its own origin (copy_site_for): one build a run, not one a worker."""
    import fcntl

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        result = _mkdocs_build(site_dir, site_server)
    else:
        shared = tmp_path_factory.getbasetemp().parent  # the run's folder: popen-gwN are its children
        with open(shared / "site-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker building the site: wait for it
            done = shared / "site-build.json"
            if not done.exists():
                done.write_text(json.dumps(_mkdocs_build(shared / "site-build", site_server) | {"origin": site_server}))
            result = json.loads(done.read_text())
        if result["returncode"] == 0:
            copy_site_for(shared / "site-build", result["origin"], site_dir, site_server)
    assert result["returncode"] == 0, f"mkdocs build --strict failed:\n{result['stdout']}\n{result['stderr']}"
    return site_dir, result["seconds"]


_script_runs = {}


def _shared_dir() -> Path | None:
    """A folder shared by the pytest-xdist workers of one test run (None without xdist): a snippet run
    by one worker is read by the others instead of being run again."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return None
    folder = Path(tempfile.gettempdir()) / f"course-script-runs-{run}"
    folder.mkdir(exist_ok=True)
    return folder


READER_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM")


def reader_env() -> dict:
    """The environment of a reader who runs a download on a CPU: a login's variables and nothing of
    the project's: no TRITON_INTERPRET (a file that runs Triton kernels on a CPU must switch Triton's
    interpreter on itself, before it imports triton), no COURSE_* variable, no PYTHONPATH. Two
    additions decide nothing about what runs: TMPDIR (the session's folder for children's files)
    and TORCHINDUCTOR_CACHE_DIR (the test run's one Inductor cache, see child_env). On a machine
    with a GPU, CUDA_VISIBLE_DEVICES="" hides it: the downloads are proved on the CPU."""
    env = {k: os.environ[k] for k in READER_VARIABLES if k in os.environ}
    if _child_tmp is not None:
        env["TMPDIR"] = str(_child_tmp)
    if _inductor_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(_inductor_dir)
    if shutil.which("nvidia-smi") is not None:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


_reader_servers = {}  # what they have imported -> the server that forks downloads (see run_download)
COMPILES = re.compile(r"\btorch\.compile\b|\.compile\(")


def uses_triton(text: str) -> bool:
    """Whether a file imports triton anywhere (at its top, in a function, through torch.compile it
    may still: see run_download)."""
    return re.search(r"^\s*(import|from)\s+triton\b", text, re.M) is not None


def imports_torch_before_triton(text: str) -> bool:
    """Whether the first import of torch or triton that running the file executes (its module level,
    the branches of its ifs, trys and withs, its class bodies; not its functions, which run later)
    imports torch."""
    import ast

    found = []

    def visit(body):
        for s in body:
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(s, ast.Import):
                found.extend((s.lineno, a.name.split(".")[0]) for a in s.names)
            elif isinstance(s, ast.ImportFrom) and s.level == 0 and s.module:
                found.append((s.lineno, s.module.split(".")[0]))
            for name in ("body", "orelse", "finalbody"):
                visit(getattr(s, name, None) or [])
            for handler in getattr(s, "handlers", None) or []:
                visit(handler.body)

    visit(ast.parse(text).body)
    first = [module for _, module in sorted(found) if module in ("torch", "triton")]
    return bool(first) and first[0] == "torch"


def run_download(text: str, name: str, timeout=900) -> dict:
    """A snippet's download ``text`` run as a reader runs it: saved as ``name`` alone in an empty
    folder outside the repository, in ``reader_env()`` (no TRITON_INTERPRET, no COURSE_*), with
    nothing of the project on the path, through a copy of the build job's runner (coursekit/runner.py,
    standard library only) beside it: ``python course_runner.py FILE out.json --small --table`` calls
    measure(small=True) as the job does, writes the data, then prints the table from that data as
    ``python FILE`` would.

    It is forked from a server that has imported torch only, in the same environment (``import
    torch`` imports no triton, and reads no variable that the file may set, TRITON_INTERPRET
    included): a file that imports triton still decides Triton's interpreter by its own order
    (triton.language's functions are made at import, for the interpreter or not), which no
    interpreter that imported triton before it could show. A file that calls torch.compile and
    neither imports triton nor mentions TRITON_INTERPRET is forked from a server that has imported
    torch.compile's machinery too (forkserver.COMPILER; torch._dynamo imports triton, as the file's
    first torch.compile would in the same environment). A file that imports triton before torch
    (``imports_torch_before_triton``), or that sets the environment (``needs_fresh``), runs in a
    fresh interpreter, as every one does with COURSE_TESTS_FRESH=1."""
    from forkserver import COMPILER, ForkServer, needs_fresh

    folder = Path(tempfile.mkdtemp(prefix="reader-", dir=_child_tmp))
    assert not folder.resolve().is_relative_to(ROOT), f"{folder} is inside the repository"
    argv = ["course_runner.py", name, "out.json", "--small", "--table"]
    env = reader_env()
    try:
        (folder / name).write_text(text)
        shutil.copyfile(ROOT / "coursekit" / "runner.py", folder / "course_runner.py")
        fresh = uses_triton(text) and not imports_torch_before_triton(text)
        if fresh or needs_fresh(text) or os.environ.get("COURSE_TESTS_FRESH") == "1":
            proc = subprocess.run(
                [sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=folder, env=env
            )
        else:
            triton_free = not uses_triton(text) and "TRITON_INTERPRET" not in text
            preload = ("torch", *COMPILER) if triton_free and COMPILES.search(text) else ("torch",)
            server = _reader_servers.get(preload)
            if server is None or server.env != env:
                if server is not None:
                    server.close()
                server = _reader_servers[preload] = ForkServer(env, folder.parent, preload=preload)
            proc = server.run(argv, folder, env, timeout)
        out = folder / "out.json"
        data = json.loads(out.read_text())["data"] if proc.returncode == 0 and out.exists() else None
        return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "data": data}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_script(path):
    from coursekit import deps
    from coursekit import results as store

    if Path(path).resolve() in {p.resolve() for p in store.snippet_files()}:
        text = deps.standalone(Path(path))
        return run_download(text, Path(path).name) | {"standalone": text}
    proc = run_forked([str(path)], Path(path).read_text(), ROOT, pythonpath=str(ROOT))  # python path, as run_python
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "data": None}


def run_script_once(path):
    """`python path` on the CPU, run once per test session however many tests need it (and, under
    pytest-xdist, once per test run: the workers share the result through a locked file).

    A measured snippet runs as its download (``run_download``): the same file with the course's
    helpers it uses inlined (coursekit/deps.py), alone in an empty folder with nothing of the
    project on the path, in a fresh interpreter with a reader's environment (``reader_env``),
    through a copy of the build job's runner. That one run proves the table, the data
    (``proc.data``, tests/test_snippets.py) and the download (tests/test_downloads.py, which also
    checks statically that no download imports the project)."""
    import fcntl
    import hashlib
    import types

    key = str(path)
    if key not in _script_runs:
        shared = _shared_dir()
        if shared is None:
            result = _run_script(path)
        else:
            name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
            with open(shared / f"{name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another worker running this script: wait for its result
                done = shared / f"{name}.json"
                if done.exists():
                    result = json.loads(done.read_text())
                else:
                    result = _run_script(path)
                    done.write_text(json.dumps(result))
        _script_runs[key] = types.SimpleNamespace(args=[key], **result)
    return _script_runs[key]
