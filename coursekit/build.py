"""The GPU build job: run every out-of-date snippet and store its data with provenance.

    python scripts/build_results.py                 # everything out of date, on this GPU
    python scripts/build_results.py --only m02      # one module (or one key: m02/crossover)
    python scripts/build_results.py --force         # re-measure even what is up to date
    python scripts/build_results.py --gpus 4        # four snippets at a time, one per GPU
    python scripts/build_results.py --processes 3   # every snippet in three fresh processes
    python scripts/build_results.py --cpu           # small sizes on the CPU, into .cache/cpu-results/
    python scripts/build_results.py --cpu --publish # the same, as the published set build_results/cpu-small/

Each snippet runs in fresh processes (python -m coursekit.runner), one after another, each with a
timeout (--timeout): as many as the snippet's module-level ``PROCESSES = N`` asks (read from its
syntax tree, never imported: the job stays torch-free), 1 where it has none, or --processes N for
every snippet. Process 1's data is the result's ``data``, the others' its ``runs``. A result is
written only when every process succeeded and its data validates, through a temporary file and a
rename, so a snippet that raises, hangs or returns garbage leaves the stored result untouched.
Each process gets a fresh folder for evidence files in COURSE_EVIDENCE_DIR (coursekit/evidence.py);
process 1's, as its data lists them (each checked: written, plainly named, at most 2 MB, nothing
unlisted), go beside the result with their sizes and SHA-256 (``store.write_with_evidence``).
Where one process's timing (the median of any summary in its data) lies more than 10x above or
below the median over three or more processes (a stall of the machine, ``disagreement``), all the
snippet's processes run again, once; the result is the second attempt, and its provenance says why
(``remeasured``), naming the disagreement again if it persists. No process is ever dropped.

--gpus N runs N snippets at a time: worker i uses GPU i (CUDA_VISIBLE_DEVICES) and the i-th of N
contiguous slices of the job's CPU cores, runs all processes of one snippet before taking the
next, and takes the longest first (by the previous result's duration). Host-bound snippets (those
declaring PROCESSES > 1) run one at a time after the others, on one worker with every core, unless
--parallel-host is given: measured in parallel, their host numbers did not match a serial run.
A snippet declaring ``GPUS = "all"`` (a distributed one, a rank per GPU) runs after all of
them, alone, on one worker holding every GPU and core of the job; its GPU seconds count each GPU.
The provenance records the worker's GPU(s) and cores, and how many workers there were.

One job at a time per results folder: the job holds an flock on <results-dir>/<hardware>/.lock,
which holds its pid; a second job exits 3 naming that pid, or waits for it with --wait. With the
lock held, it deletes the temporary files of writes that a killed job left behind.

No snippet outlives the job: on every way out, SIGTERM and SIGHUP included, the job kills each
running snippet's process group (its compile workers too) and every process below it, found in
/proc, even one that left the group with os.setsid(); the runner and the job are child subreapers
(PR_SET_CHILD_SUBREAPER), so what an exited snippet left behind is re-parented to them and killed.
A SIGKILLed job can do nothing, so the kernel sends the snippet's process SIGTERM
(PR_SET_PDEATHSIG, set between fork and exec), on which the runner kills its whole group; where
that is not available, the runner's watchdog does (a helper that left the group then escapes).
Linux only (sched_setaffinity, prctl, flock). --gpus N with --cpu runs N CPU workers, for testing.

--cpu --publish writes the CPU run beside the GPU sets, as build_results/cpu-small/ (a CPU set's folder is
always ``cpu`` or ``cpu-<name>``, and its results say ``"gpu": "none (CPU run)", "sizes": "small"``): a real
second set for the site's hardware selector, not comparable with a GPU's numbers. The job then rewrites the
set's README.md: what the set is, and each snippet that has no result in it, with the reason.

The job continues past a failure and ends with a summary: status, processes and GPU seconds (wall
seconds its processes held the GPU) of each snippet, and the build's wall time; --summary-json
PATH writes the same as JSON. Logs go to --logs-dir, or to a temporary folder that is deleted when
everything succeeded and kept, and named, when something failed. Exit codes: 0 all good; 1 some
snippet failed (named in the summary); 2 nothing could run (no GPU for GPU results, --gpus more
than there are, no snippet matches, a --hardware name that is not a plain slug, a results folder
that cannot be locked or written: read-only, a full disk, a .lock that is a folder); 3 another job
holds the results folder; 128 + N on signal N. A new results folder gets a set.json (its label,
kind, GPU, whether it is the reference, a description), which the site needs: edit it by hand.
"""

from __future__ import annotations

import argparse
import ast
import ctypes
import fcntl
import json
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from coursekit import results as store
from coursekit import runner
from coursekit.evidence import EVIDENCE_ENV

CPU_RESULTS_DIR = store.ROOT / ".cache" / "cpu-results"  # --cpu's default: never the site's build_results/
PUBLISHED_CPU_SET = "cpu-small"  # --cpu --publish's folder under build_results/
LOCKED = 3  # exit code when another job holds the results folder
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36  # likewise: orphaned descendants are re-parented to us, not to init
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_SUBREAPER = False  # whether this process adopts its children's orphans (set by main)


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C through the code that kills the running snippets."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


class Failed(Exception):
    """A snippet could not be measured; the message says why in one line."""


class Refused(Exception):
    """The job cannot run at all (a bad name, a results folder it cannot lock or write): the
    message says why in one line, and the job exits 2 without measuring anything."""


# ---------------------------------------------------------------- the machine and the snippets


def hardware_slug(gpu_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def detect_gpu() -> tuple[str, int] | None:
    """(the CUDA device's name, how many devices), or None. Runs in a child so this process stays torch-free."""
    probe = (
        "import torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0; "
        "print(n, torch.cuda.get_device_name() if n else '')"
    )
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise SystemExit(
            "error: `import torch` did not finish within 300 s; cannot tell whether there is a GPU"
        ) from None
    if out.returncode != 0:
        raise SystemExit(f"error: cannot import torch to look for a GPU: {out.stderr.strip().splitlines()[-1:]}")
    count, _, name = (out.stdout.strip().splitlines() or ["0"])[-1].partition(" ")
    return (name.strip(), int(count)) if int(count) else None


def project_commit() -> str:
    if os.environ.get("COURSE_COMMIT"):
        return os.environ["COURSE_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=store.ROOT, timeout=30)
        if out.returncode == 0:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--", "snippets", "coursekit"],
                capture_output=True,
                text=True,
                cwd=store.ROOT,
                timeout=30,
            ).stdout.strip()
            return out.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        pass
    return "unknown"


def _module_constant(path: Path, name: str) -> tuple[object, str | None]:
    """The snippet's module-level ``NAME = <value>``: the value where it is a literal (None where it
    is not) and its source text (None where the name is not assigned). Read from the syntax tree: the
    job never imports a snippet."""
    value, text = None, None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            text = ast.unparse(node.value)
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None  # not a literal
    return value, text


def declared_processes(path: Path) -> int:
    """The snippet's module-level ``PROCESSES = N``: how many fresh processes measure it (1 if absent)."""
    n, text = _module_constant(path, "PROCESSES")
    if text is None:
        return 1
    if type(n) is not int or n < 1:
        raise Failed(f"PROCESSES must be a positive integer literal, not {text}")
    return n


def declared_all_gpus(path: Path) -> bool:
    """Whether the snippet declares ``GPUS = "all"``: it spans every GPU of the job (a distributed
    snippet, one rank per GPU), so it runs alone, after the others, with all of them visible."""
    value, text = _module_constant(path, "GPUS")
    if text is not None and value != "all":
        raise Failed(f'GPUS may only be "all" (a snippet that spans every GPU), not {text}')
    return text is not None


def _declared_or_one(path: Path) -> int:
    """declared_processes, or 1 where it cannot be read (the snippet's own run reports why)."""
    try:
        return declared_processes(path)
    except (Failed, SyntaxError, OSError, UnicodeDecodeError):
        return 1


def _spans_all_gpus(path: Path) -> bool:
    """declared_all_gpus, or False where it cannot be read (the snippet's own run reports why)."""
    try:
        return declared_all_gpus(path)
    except (Failed, SyntaxError, OSError, UnicodeDecodeError):
        return False


def is_up_to_date(path: Path, result: Path) -> tuple[bool, str]:
    """Whether ``result`` was measured from the snippet as it is now; and, when a stored result
    exists but cannot be used, why (naming the file). Never raises: an unusable result is re-run."""
    if not result.exists():
        return False, ""
    try:
        current = store.snippet_hash(path)
    except (SyntaxError, OSError, ValueError):
        return False, ""  # a snippet that no longer parses: running it reports why
    try:
        return store.load(result)["snippet_hash"] == current, ""
    except store.ResultError as exc:
        return False, str(exc)  # names the file
    except (TypeError, KeyError, ValueError) as exc:  # a check that met a type it did not expect
        return False, f"{result}: {type(exc).__name__}: {exc}"


def previous_duration(result: Path) -> float:
    """Seconds a stored result took to measure (for longest-first scheduling): its own folder's,
    else the same snippet's in another hardware folder beside it (a first run into a new folder
    must still start the slowest snippet first); inf when none is known, so new snippets start
    first."""
    results_dir, key = result.parents[2], result.relative_to(result.parents[1])  # <dir>/<hw>/<module>/<x>.json
    try:
        others = [results_dir / hw / key for hw in store.hardware_sets(results_dir)]
    except (store.ResultError, OSError):
        others = []  # a folder that is no set: its results are not a guide
    for path in [result, *others]:
        try:
            return float(json.loads(path.read_text())["provenance"]["duration_s"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return float("inf")


# ---------------------------------------------------------------- the results folder


def lock_results(folder: Path, wait: bool):
    """Hold an exclusive lock on a results folder for as long as the returned file stays open.
    The file holds the holder's pid, for the message a second job prints. Returns None when
    another job holds it and ``wait`` is false; raises Refused, naming the file, when the folder
    or the lock cannot be created or written (read-only, a full disk, a .lock that is a folder)."""
    path = folder / ".lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a+")  # "a+", not "w": the holder's pid must survive our opening it
    except OSError as exc:
        raise Refused(f"cannot create the lock {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            if not wait:
                lock.close()
                print(
                    f"error: another build job (pid {holder}) holds {path}; pass --wait to wait for it", file=sys.stderr
                )
                return None
            print(f"waiting for the build job with pid {holder}, which holds {path} ...", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
    except OSError as exc:
        lock.close()
        raise Refused(f"cannot write the lock {path}: {exc.strerror or exc}") from None
    return lock


def remove_stale_temporaries(folder: Path) -> None:
    """Delete the temporary files (store.write_atomic's .<name>.json.<random>.tmp) of writes that a
    killed job left behind. Only with the lock held: otherwise they may be another job's writes."""
    for tmp in sorted(folder.rglob(".*.json.*.tmp")):
        tmp.unlink(missing_ok=True)
        print(f"removed {tmp}, left behind by an interrupted write", flush=True)
    for line in store.restore_interrupted_evidence(folder):  # store.write_with_evidence's folders
        print(line, flush=True)


# ---------------------------------------------------------------- workers and their processes


def cpu_list(cores) -> str:
    """{0, 1, 2, 3, 8} -> "0-3,8", the notation of taskset and /proc/<pid>/status."""
    spans: list[list[int]] = []
    for c in sorted(cores):
        if spans and c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


@dataclass
class Worker:
    """One slot of the job: its GPU (None on the CPU) and the CPU cores its processes are pinned to."""

    gpu: str | None  # the value of CUDA_VISIBLE_DEVICES for its processes
    cores: list[int]
    workers: int  # how many slots the job has

    @property
    def gpu_count(self) -> int:
        """How many GPUs this worker holds (1 on the CPU, where the seconds are the worker's wall time)."""
        return len(self.gpu.split(",")) if self.gpu else 1

    def env(self, small: bool) -> dict:
        env = runner.snippet_env(small)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        return env

    def provenance(self) -> dict:
        prov = {"workers": self.workers, "cpu_affinity": cpu_list(self.cores)}
        if self.gpu is not None:
            prov["gpu_index"] = int(self.gpu) if self.gpu.isdigit() else self.gpu
        return prov

    def label(self) -> str:
        return (f"GPU {self.gpu}, " if self.gpu is not None else "") + f"cores {cpu_list(self.cores)}"

    def preexec(self, job_pid: int):
        """What runs in the child between fork and exec: pin it to this worker's cores, and have
        the kernel signal it when the job dies, even by SIGKILL, where no finally runs: SIGTERM,
        whose handler in the runner kills the snippet's whole process group (compile workers too)."""

        def setup():
            os.sched_setaffinity(0, self.cores)
            if _LIBC is not None:
                _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
                # what the snippet starts and leaves behind stays below the runner (kept across exec)
                _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1)
                if os.getppid() != job_pid:  # the job died before prctl took effect
                    os._exit(1)

        return setup


def make_workers(n: int, gpus: bool) -> list[Worker]:
    """N workers, each with a contiguous slice of this process's cores and, on a GPU run, GPU i
    (the i-th of CUDA_VISIBLE_DEVICES where that is set)."""
    cores = sorted(os.sched_getaffinity(0))
    if n > len(cores):
        raise ValueError(f"--gpus {n} needs a CPU core per worker; this job may use {len(cores)}")
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    devices = visible or [str(i) for i in range(n)]
    return [
        Worker(devices[i] if gpus else None, cores[i * len(cores) // n : (i + 1) * len(cores) // n], n)
        for i in range(n)
    ]


def spanning_worker(workers: list[Worker]) -> Worker:
    """One worker holding every GPU and core of ``workers``: where a GPUS = "all" snippet runs."""
    gpus = [w.gpu for w in workers if w.gpu is not None]
    return Worker(",".join(gpus) if gpus else None, sorted(c for w in workers for c in w.cores), 1)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this job can see (Linux's /proc)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    parents[int(entry.name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return parents


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, whatever session or group it moved to (os.setsid() leaves the
    group, not the tree); the nearest first."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        found.append(p)
        todo += children.get(p, [])
    return found


def _kill_pids(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Children:
    """The snippet processes running now, so that every way out of the job can kill them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.stopping = False

    def start(self, cmd: list[str], **kwargs) -> subprocess.Popen | None:
        """Popen in a new session (its own process group); None once the job is stopping."""
        with self._lock:
            if self.stopping:
                return None
            proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
            self._running.add(proc)
            return proc

    def end(self, proc: subprocess.Popen) -> None:
        """Kill the process, its group and every process below it (what the snippet started goes
        with it, even one that left the group with os.setsid()), reap it, then sweep up the strays."""
        _kill_pids(descendants(proc.pid))
        _killpg(proc.pid)
        proc.wait()
        with self._lock:
            self._running.discard(proc)
        self.sweep()

    def sweep(self) -> None:
        """Kill and reap the job's strays: processes re-parented to the job (a child subreaper, see
        main) because the snippet that started them has exited, and everything below them. Only
        processes that are not a running snippet's runner are strays; and only in a job run by
        main(), whose process is the job's alone (build() called in another program leaves that
        program's children alone)."""
        if not _SUBREAPER:
            return
        with self._lock:  # held throughout: a snippet started meanwhile (start) would look like a stray
            running = {p.pid for p in self._running}
            mine = os.getpid()
            strays = [pid for pid, parent in _parents().items() if parent == mine and pid not in running]
            for pid in strays:
                _kill_pids(descendants(pid) + [pid])
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass  # not ours to reap (a Popen of this job reaped it)

    def kill_all(self) -> None:
        with self._lock:
            self.stopping = True
            for proc in self._running:
                _kill_pids(descendants(proc.pid))
                _killpg(proc.pid)


@dataclass
class Task:
    index: int  # position in the job's list, from 1
    path: Path
    key: str
    target: Path


@dataclass
class Outcome:
    task: Task
    status: str  # "up to date", "written" or "failed"
    processes: int = 0  # processes started
    gpu_seconds: float = 0.0  # wall seconds they ran
    reason: str = ""
    log: Path | None = None


OUTLIER = 10  # a process whose timing is this many times off the others' is measured again


def _medians(node, path: str = ""):
    """(path, median) of every timing summary in a snippet's data, list items by position."""
    if store.is_summary(node):
        yield path, node.get("median")
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _medians(v, f"{path}.{k}" if path else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _medians(v, f"{path}[{i}]")


def disagreement(runs: list[dict]) -> str | None:
    """Where the processes of one snippet disagree by more than OUTLIER times: the first timing
    summary (in the data's order) whose median in one process lies more than OUTLIER times above or
    below the median over all processes, named; None where they agree. Needs three processes or more
    (with two, the median cannot say which one is off). A stall of a loaded machine makes such a
    process (a 10,650 us "floor" beside 1.3 and 1.6 us); no result of the GPU sets has one."""
    if len(runs) < 3:
        return None
    per = [dict(_medians(run)) for run in runs]
    for path in per[0]:
        values = [p.get(path) for p in per]
        if not all(store.is_number(v) and v > 0 for v in values):
            continue
        middle = statistics.median(values)
        for i, v in enumerate(values):
            if v > OUTLIER * middle or v * OUTLIER < middle:
                return (
                    f"process {i + 1}'s {path} (median {v:.4g}) is more than {OUTLIER}x off the median "
                    f"over the processes ({middle:.4g})"
                )
    return None


def last_line(log: Path, snippet: Path) -> str:
    """The log's last non-empty line after a colon, without the snippet's path (the summary names
    the snippet already); nothing for an empty log."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return ": " + lines[-1].replace(f"{snippet}: ", "").removeprefix("error: ")[:300] if lines else ""


class Job:
    """One build: its settings, the running children, and the outcomes so far."""

    def __init__(self, args, hardware: str, commit: str, logs: Path, workers: int):
        self.args, self.hardware, self.commit, self.logs, self.workers = args, hardware, commit, logs, workers
        self.children = Children()
        self.outcomes: list[Outcome] = []
        self.total = 0
        self._print_lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._print_lock:
            print(line, flush=True)

    def tag(self, task: Task) -> str:
        return f"[{task.index}/{self.total}] {task.key:<32}"

    def run_process(self, task: Task, worker: Worker, log: Path, out_json: Path) -> tuple[dict | None, str]:
        """Run measure() once in a fresh process: (its output, "") or (None, why it failed)."""
        out_json.unlink(missing_ok=True)  # a --logs-dir may hold an earlier job's
        cmd = [sys.executable, "-m", "coursekit.runner", str(task.path), str(out_json)]
        cmd += ["--small"] if self.args.small else []
        # a fresh folder for the evidence files the snippet writes (coursekit/evidence.py); set here,
        # not in runner.snippet_env, whose code is part of every result's hash
        evidence = out_json.with_suffix(".evidence")
        shutil.rmtree(evidence, ignore_errors=True)
        evidence.mkdir(parents=True)
        env = worker.env(self.args.small)
        env[EVIDENCE_ENV] = str(evidence)
        with open(log, "w") as logf:
            proc = self.children.start(
                cmd,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=store.ROOT,
                preexec_fn=worker.preexec(os.getpid()),
            )
            if proc is None:
                return None, "the job is stopping"
            try:
                rc = proc.wait(timeout=self.args.timeout)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                self.children.end(proc)  # the snippet and its compile workers: nothing keeps running
        if rc is None:
            return None, f"timed out after {self.args.timeout:.0f} s"
        if rc < 0:
            return None, f"killed by {signal.Signals(-rc).name}{last_line(log, task.path)}"
        if rc != 0:
            return None, f"exit code {rc}{last_line(log, task.path)}"
        if not out_json.exists():
            return None, f"exited 0 without writing its data{last_line(log, task.path)}"
        try:
            out = json.loads(out_json.read_text())
        except (OSError, ValueError) as exc:
            return None, f"unreadable output: {exc}"
        if isinstance(out, dict):
            out["_evidence"] = evidence  # not stored: where its files are until the result is written
        return out, ""

    def document(self, task: Task, worker: Worker, outputs: list[dict], snippet_hash: str) -> dict:
        """The result (schema 2) from the outputs of processes 1..N."""
        durations = [out["provenance"]["duration_s"] for out in outputs]
        prov = dict(outputs[0]["provenance"])  # device, versions and date, from process 1
        prov.update(
            commit=self.commit,
            repetitions=outputs[0]["data"].get("repetitions"),
            processes=len(outputs),
            duration_s=round(sum(durations), 2),
            durations_s=durations,
            **worker.provenance(),
        )
        if self.args.small:
            prov["sizes"] = store.SMALL  # measure(small=True): not comparable with a GPU run's sizes
        snippets_root = self.args.snippets_dir.parent
        doc = {
            "schema_version": store.SCHEMA_VERSION,
            "key": task.key,
            "snippet": str(task.path.relative_to(snippets_root))
            if task.path.is_relative_to(snippets_root)
            else str(task.path),
            "snippet_hash": snippet_hash,
            "hardware": self.hardware,
            "provenance": prov,
            "data": outputs[0]["data"],
        }
        if len(outputs) > 1:
            doc["runs"] = [out["data"] for out in outputs[1:]]
        if outputs[0].get("_artifacts"):  # process 1's evidence files, as its data lists them
            doc["artifacts"] = outputs[0]["_artifacts"]
        return doc

    def run_processes(self, task: Task, worker: Worker, n: int, outcome: Outcome, hash_before: str) -> list[dict]:
        """Run the snippet's n processes one after another; their outputs, each checked as it comes
        (a bad one stops the snippet before the next). Raises Failed naming the process."""
        outputs = []
        for k in range(1, n + 1):
            where = f"process {k}/{n}: " if n > 1 else ""
            stem = f"{task.key.replace('/', '__')}.{outcome.processes + 1}"
            outcome.log = self.logs / f"{stem}.log"
            start = time.perf_counter()
            out, problem = self.run_process(task, worker, outcome.log, self.logs / f"{stem}.json")
            outcome.processes += 1
            outcome.gpu_seconds += (time.perf_counter() - start) * worker.gpu_count
            if problem:
                raise Failed(where + problem)
            if not isinstance(out.get("data"), dict):  # said first: every later check would be about a dict
                raise Failed(f"{where}measure() returned a {type(out.get('data')).__name__}, not a dict")
            try:
                out["_artifacts"] = store.artifact_records(task.key, out["data"], out.get("_evidence"))
            except store.ResultError as exc:
                raise Failed(f"{where}{exc}") from None
            outputs.append(out)
            try:
                store.validate(self.document(task, worker, outputs, hash_before), str(task.target))
            except (store.ResultError, KeyError, TypeError, ValueError) as exc:
                raise Failed(f"{where}bad output: {exc}") from None
            if n > 1:
                self.say(f"{self.tag(task)} process {k}/{n} ok  {out['provenance']['duration_s']:.1f} s")
        return outputs

    def measure(self, task: Task, worker: Worker) -> Outcome:
        """Run all processes of one snippet and write its result if every one succeeded. Where one
        process's timings disagree with the others' by more than OUTLIER times (``disagreement``),
        all processes run again, once, and the provenance says why (``remeasured``)."""
        outcome = Outcome(task, "failed")
        try:
            try:
                hash_before = store.snippet_hash(task.path)
                n = self.args.processes or declared_processes(task.path)
                declared_all_gpus(task.path)  # a GPUS value other than "all" fails here, naming it
            except (SyntaxError, OSError, ValueError) as exc:
                raise Failed(f"cannot read or parse: {exc}") from None
            self.say(f"{self.tag(task)} running {n} process(es) on {worker.label()}")
            outputs = self.run_processes(task, worker, n, outcome, hash_before)
            remeasured = None
            first = disagreement([out["data"] for out in outputs])
            if first:
                self.say(f"{self.tag(task)} {first}: measuring all {n} processes again, once")
                outputs = self.run_processes(task, worker, n, outcome, hash_before)
                again = disagreement([out["data"] for out in outputs])
                remeasured = f"measured twice: in the first attempt {first}" + (
                    f"; in this one, again: {again}" if again else "; this attempt's processes agree"
                )
            try:
                if store.snippet_hash(task.path) != hash_before:
                    raise Failed("the snippet or a definition it uses changed while it ran")
            except (SyntaxError, OSError, ValueError) as exc:
                raise Failed(f"the snippet changed while it ran and no longer parses: {exc}") from None
            doc = self.document(task, worker, outputs, hash_before)
            if remeasured:
                doc["provenance"]["remeasured"] = remeasured
            try:
                if "artifacts" in doc or store.evidence_dir(task.target).exists():
                    store.write_with_evidence(task.target, doc, outputs[0].get("_evidence"))
                else:
                    store.write_atomic(task.target, doc)
            except (store.ResultError, OSError) as exc:
                raise Failed(f"cannot write the result: {exc}") from None
            outcome.status, outcome.log = "written", None
        except Failed as exc:
            outcome.reason = str(exc)
        return outcome

    def work(self, worker: Worker, tasks: queue.SimpleQueue) -> None:
        """One worker's loop: take the next snippet, measure it, report; until none is left."""
        while not self.children.stopping:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                return
            try:
                outcome = self.measure(task, worker)
            except Exception as exc:  # a bug in this job: report it against the snippet, carry on
                outcome = Outcome(task, "failed", reason=f"internal error: {exc!r}")
            if self.children.stopping:
                return  # killed by the job's own interrupt: not the snippet's failure
            self.outcomes.append(outcome)
            status = "ok" if outcome.status == "written" else f"FAILED ({outcome.reason})"
            log = f"  (log: {outcome.log})" if outcome.log else ""
            self.say(f"{self.tag(task)} {status}  {outcome.gpu_seconds:.1f} s{log}")


# ---------------------------------------------------------------- the build


def choose(args: argparse.Namespace):
    """What the job will run: (the GPU or None, the workers, the results folder's name, the snippets).
    Raises Refused when nothing can run: no GPU for GPU results, more workers than GPUs or cores, a
    folder name that is not a plain slug or that names the other kind of set, no snippet matching."""
    gpu = None
    if not args.cpu:
        gpu = detect_gpu()
        if gpu is None:
            raise Refused(
                "no CUDA GPU found on this machine; GPU results need one "
                f"(pass --cpu for a CPU run at small sizes into {CPU_RESULTS_DIR})"
            )
        if args.gpus > gpu[1]:
            raise Refused(f"--gpus {args.gpus}, but this machine has {gpu[1]} GPU(s)")
    try:
        workers = make_workers(args.gpus, gpus=gpu is not None)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    hardware = args.hardware or ((PUBLISHED_CPU_SET if args.publish else "cpu") if args.cpu else hardware_slug(gpu[0]))
    if not store.SLUG.fullmatch(hardware):  # a folder under the results folder, never a path out of it
        raise Refused(
            f"--hardware {hardware!r} is not a plain folder name (lower-case letters, digits, single dashes "
            "between them, e.g. cpu-small)"
        )
    if store.is_cpu_set(hardware) != bool(args.cpu):
        why = (
            "would hold a CPU run; a CPU set's folder is named cpu or cpu-<name>"
            if args.cpu
            else "is named as a CPU set (cpu, cpu-<name>); a GPU run writes elsewhere"
        )
        raise Refused(f"--hardware {hardware!r} {why}")
    snippets = [
        p
        for p in store.snippet_files(args.snippets_dir)
        if not args.only
        or any(store.snippet_key(p) == o or store.snippet_key(p).startswith(o + "/") for o in args.only)
    ]
    if not snippets:
        raise Refused(f"no snippet matches {args.only or 'anything'} under {args.snippets_dir}")
    return gpu, workers, hardware, snippets


def build(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        gpu, workers, hardware, snippets = choose(args)
        folder = args.results_dir / hardware
        lock = lock_results(folder, args.wait)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if lock is None:
        return LOCKED
    with lock:  # held until the job ends; the kernel releases it however the job ends
        try:
            if not (folder / store.SET_FILE).exists():  # a new set: describe it (edit set.json by hand)
                store.write_set_info(
                    folder, store.default_set_info(hardware, gpu[0] if gpu else store.CPU_GPU, args.results_dir)
                )
            remove_stale_temporaries(folder)
            logs = args.logs_dir or Path(tempfile.mkdtemp(prefix="build_results_logs_"))
            logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            print(f"error: cannot write {exc.filename or folder}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        commit = project_commit()
        seats = f"{args.gpus} GPU(s)" if gpu else f"{args.gpus} CPU worker(s)"
        print(
            f"build_results: {len(snippets)} snippet(s) for {hardware} ({gpu[0] if gpu else 'CPU, small sizes'}) "
            f"on {seats}, commit {commit[:12]}\nresults in {folder}",
            flush=True,
        )
        job = Job(args, hardware, commit, logs, len(workers))
        job.total = len(snippets)
        tasks = out_of_date(job, snippets)
        try:
            for phase_workers, phase_tasks in phases(tasks, workers, gpu is not None, args.parallel_host):
                run_phase(job, phase_workers, phase_tasks)
        except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: no snippet may keep running on the GPU
            job.children.kill_all()
            print(f"interrupted: the running snippets were killed; logs kept in {logs}", file=sys.stderr)
            raise
        finally:
            job.children.sweep()  # anything a snippet left behind, even outside its process group
        code = report(job, args, hardware, gpu, time.perf_counter() - start)
        if args.publish:
            try:
                write_set_readme(folder, store.snippet_files(args.snippets_dir), job.outcomes, args.snippets_dir)
            except OSError as exc:
                print(f"error: cannot write {folder / 'README.md'}: {exc.strerror or exc}", file=sys.stderr)
                return code or 1
        return code


def out_of_date(job: Job, snippets: list[Path]) -> list[Task]:
    """The snippets to measure (all with --force), as tasks; each other one is reported up to date."""
    tasks = []
    for i, path in enumerate(snippets, 1):
        key = store.snippet_key(path)
        task = Task(i, path, key, store.result_path(key, job.hardware, job.args.results_dir))
        fresh, problem = is_up_to_date(path, task.target)
        if problem:
            print(f"{job.tag(task)} stored result unusable, measuring again: {problem}", flush=True)
        if fresh and not job.args.force:
            print(f"{job.tag(task)} up to date", flush=True)
            job.outcomes.append(Outcome(task, "up to date"))
        else:
            tasks.append(task)
    return tasks


def phases(tasks: list[Task], workers: list[Worker], gpus: bool, parallel_host: bool) -> list[tuple]:
    """(workers, tasks) in the order they run. Distributed snippets (GPUS = "all") run last, alone,
    on one worker that holds every GPU and core of the job; on the CPU they run the same way, with
    their own gloo processes. Host-bound snippets (PROCESSES > 1) run one at a time after the others,
    on one worker with every core: measured in parallel, their host numbers did not match a serial
    run number by number (docs/methodology.md, "Two runs at one commit"), unless ``parallel_host``."""
    spanning = [t for t in tasks if _spans_all_gpus(t.path)]
    tasks = [t for t in tasks if t not in spanning]
    out = [(workers, tasks)]
    if len(workers) > 1 and not parallel_host:
        host = [t for t in tasks if _declared_or_one(t.path) > 1]
        out = [(workers, [t for t in tasks if t not in host]), (make_workers(1, gpus), host)]
    if spanning:
        out.append(([spanning_worker(workers)], spanning))
    return out


def run_phase(job: Job, workers: list[Worker], tasks: list[Task]) -> None:
    """Run ``tasks`` on ``workers``, one thread each, longest first where there are several."""
    if len(workers) > 1:  # longest first, so that the last snippet to start is a short one
        tasks.sort(key=lambda t: -previous_duration(t.target))
    todo = queue.SimpleQueue()
    for task in tasks:
        todo.put(task)
    threads = [threading.Thread(target=job.work, args=(w, todo), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def report(job: Job, args: argparse.Namespace, hardware: str, gpu, wall: float) -> int:
    """Print the summary (and write it as JSON with --summary-json); the job's exit code."""
    rows = sorted(job.outcomes, key=lambda o: o.task.index)
    failed = [o for o in rows if o.status == "failed"]
    total = sum(o.gpu_seconds for o in rows)
    print("\nsummary")
    for o in rows:
        status = "FAILED" if o.status == "failed" else o.status
        print(f"  {o.task.key:<32} {status:<11} {o.processes:3d} process(es) {o.gpu_seconds:8.1f} s")
    if failed:
        print(f"\n{len(failed)} snippet(s) failed; their stored results were left as they were:")
        for o in failed:
            print(f"  {o.task.key}: {o.reason}" + (f"\n    log: {o.log}" if o.log else ""))
        print(f"logs kept in {job.logs}")
    elif not args.logs_dir:
        shutil.rmtree(job.logs, ignore_errors=True)  # all went well: the logs are not needed
    if args.summary_json:
        summary = {
            "hardware": hardware,
            "gpus": job.workers,
            "cpu": args.cpu,
            "wall_s": round(wall, 1),
            "gpu_seconds": round(total, 1),
            "snippets": [
                dict(key=o.task.key, status=o.status, processes=o.processes, gpu_seconds=round(o.gpu_seconds, 1))
                | ({"reason": o.reason} if o.reason else {})
                for o in rows
            ],
        }
        args.summary_json.parent.mkdir(parents=True, exist_ok=True)
        args.summary_json.write_text(json.dumps(summary, indent=1) + "\n")
    seats, unit = (f"{job.workers} GPU(s)", "GPU") if gpu else (f"{job.workers} CPU worker(s)", "worker")
    print(f"wall time {wall:.1f} s for {len(rows)} snippets on {seats}; {unit} seconds {total:.1f}")
    return 1 if failed else 0


SET_README = """# {hardware}: the snippets on a CPU, at their small sizes

Written by `python scripts/build_results.py --cpu --publish` (coursekit/build.py), which rewrites it
on every run: do not edit it by hand.

**This is not GPU data.** Each result here ran `measure(small=True)`, the small sizes the test
suite uses, on the CPU its provenance names (`"gpu": "none (CPU run)"`, `"sizes": "small"`), with
Triton kernels run by Triton's interpreter (`TRITON_INTERPRET=1`) and no CUDA. Its numbers are
real measurements of that, and are not comparable with a GPU set's: the sizes differ, CUDA
events, graphs and streams do not exist on a CPU, and an interpreted kernel times Python. The site
shows the set beside the reference GPU's (the hardware selector of every page with measured
numbers) as a second real set; a number the pages read that a small-size run does not produce
is shown from the reference set, marked as such. To re-measure it:
`nice python scripts/build_results.py --cpu --publish`.

## Snippets without a result here

{table}
"""
_README_ROW = re.compile(r"^\| `(?P<key>[a-z0-9_]+/[a-z0-9_]+)` \| (?P<why>.*) \|$")


def write_set_readme(folder: Path, snippets: list[Path], outcomes: list[Outcome], snippets_dir: Path) -> None:
    """The published CPU set's README: what it is, and every snippet with no result in it, with why:
    this run's failure, else the reason the README gave before (a run of some modules keeps the rest)."""
    readme = folder / "README.md"
    before = {}
    if readme.exists():
        before = {m["key"]: m["why"] for m in map(_README_ROW.match, readme.read_text().splitlines()) if m}
    failed = {o.task.key: o.reason for o in outcomes if o.status == "failed"}
    rows = []
    for path in snippets:
        key = store.snippet_key(path)
        if store.result_path(key, folder.name, folder.parent).exists():
            continue
        why = failed.get(key) or before.get(key) or "not run on the CPU yet"
        rows.append(f"| `{key}` | {why.replace('|', '/').replace(chr(10), ' ')} |")
    table = "| snippet | why |\n|---|---|\n" + "\n".join(rows) if rows else "None: every snippet has one."
    text = SET_README.format(hardware=folder.name, table=table)
    tmp = readme.with_name(".README.md.tmp")
    tmp.write_text(text)
    os.replace(tmp, readme)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="module folders or keys, e.g. m02 or m02/crossover")
    parser.add_argument("--force", action="store_true", help="re-measure up-to-date snippets too")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU at small sizes (not GPU results)")
    parser.add_argument(
        "--publish",
        action="store_true",
        help=f"with --cpu: write into build_results/{PUBLISHED_CPU_SET}/, a published set labelled as CPU, small sizes",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per process (default 600)")
    parser.add_argument(
        "--processes", type=_positive_int, help="fresh processes per snippet (default: its PROCESSES, else 1)"
    )
    parser.add_argument("--gpus", type=_positive_int, default=1, help="snippets run at a time, one per GPU")
    parser.add_argument(
        "--parallel-host",
        action="store_true",
        help="with --gpus N, run host-bound snippets (PROCESSES > 1) in parallel too (default: one at a time, last)",
    )
    parser.add_argument("--wait", action="store_true", help="wait for another job holding the results folder")
    parser.add_argument("--hardware", help="results folder name (default: from the GPU's name)")
    parser.add_argument("--snippets-dir", type=Path, default=store.SNIPPETS_DIR)
    parser.add_argument(
        "--results-dir", type=Path, help=f"default {store.RESULTS_DIR}, or {CPU_RESULTS_DIR} with --cpu"
    )
    parser.add_argument("--logs-dir", type=Path, help="keep the logs here (default: a temporary folder)")
    parser.add_argument("--summary-json", type=Path, help="also write the summary to this JSON file")
    args = parser.parse_args(argv)
    if args.publish and not args.cpu:
        parser.error("--publish is for a CPU run (--cpu --publish); a GPU run always writes build_results/<gpu>/")
    cpu_dir = store.RESULTS_DIR if args.publish else CPU_RESULTS_DIR
    args.results_dir = (args.results_dir or (cpu_dir if args.cpu else store.RESULTS_DIR)).resolve()
    args.snippets_dir = args.snippets_dir.resolve()
    args.logs_dir = args.logs_dir and args.logs_dir.resolve()
    args.small = args.cpu  # small sizes on the CPU, full sizes on a GPU
    return args


def _terminate(signum, frame):
    raise Interrupted(signum)  # unwinds through build(), which kills the running snippets


def main(argv=None) -> int:
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal (SIGHUP) is handled like kill
        signal.signal(signum, _terminate)
    global _SUBREAPER
    if _LIBC is not None:  # a snippet's orphans come to the job, which kills them (Children.sweep)
        _SUBREAPER = _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    args = parse_args(argv)
    try:
        return build(args)
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print(f"build_results: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
