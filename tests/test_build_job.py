"""The GPU build job's behaviour on good and bad snippets, on a machine without a GPU.

Every job here runs on the CPU (--cpu) on synthetic snippets in tmp_path, with its logs in
tmp_path too (--logs-dir): nothing is left in /tmp or in the repository.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_python

from coursekit import build as job
from coursekit import results as store

BUILD = str(ROOT / "scripts" / "build_results.py")
SUMMARY = {"median": 1.0, "p10": 1.0, "p90": 1.0, "min": 1.0, "max": 1.0, "n": 1, "unit": "us"}

GOOD = """
from coursekit.bench import host_us

def measure(small=False):
    return {"repetitions": 3, "t": host_us(lambda: sum(range(100)), calls=10, repeats=3, warmup=1)}
"""
# a constant summary: what the job does with the data, not how it was timed
QUICK = f"""
import os

def measure(small=False):
    return {{"repetitions": 1, "t": {SUMMARY!r}, "pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0))}}
"""
RAISES = "def measure(small=False):\n    raise RuntimeError('snippet broke')\n"
HANGS = "import time\n\ndef measure(small=False):\n    time.sleep(120)\n"
GARBAGE = "def measure(small=False):\n    return {'repetitions': 1, 't': float('nan')}\n"
NO_SPREAD = "def measure(small=False):\n    return {'repetitions': 1, 'speed': 3.0}\n"
SYNTAX = "def measure(small=False):\n    return {\n"
RETURNS_LIST = "def measure(small=False):\n    return [1.0, 2.0]\n"
EXITS = "import sys\n\ndef measure(small=False):\n    sys.exit(0)\n"
OS_EXIT = "import os\n\ndef measure(small=False):\n    os._exit(0)\n"
# hangs after writing its pid (and, with a second line, starting a child of its own) to PIDFILE
HANGS_MARKED = """
import os, subprocess, time
from pathlib import Path

def measure(small=False):
    pids = [os.getpid()] + ([subprocess.Popen(["sleep", "120"]).pid] if {with_child} else [])
    Path({pidfile!r}).write_text(" ".join(map(str, pids)))
    time.sleep(120)
"""
# two processes; the second one fails (MARK: a file that the first one creates)
FLAKY = f"""
from pathlib import Path

PROCESSES = 2

def measure(small=False):
    mark = Path("MARK")
    if mark.exists():
        raise RuntimeError("the second process broke")
    mark.write_text("1")
    return {{"repetitions": 1, "t": {SUMMARY!r}}}
"""


def result_doc(key: str, snippet_hash: str = "0" * 64, duration_s: float = 1.0) -> dict:
    """A complete, valid result (schema 2) with made-up provenance."""
    prov = dict(
        gpu="none (CPU run)",
        gpu_count=0,
        driver="none",
        cuda="none",
        torch="2.13.0",
        triton="3.6.0",
        python="3.11.7",
        cpu="test CPU",
        cpu_count=2,
        os_kernel="6.1.0",
        date="2026-01-01T00:00:00+00:00",
        commit="0" * 40,
        repetitions=1,
        processes=1,
        duration_s=duration_s,
        durations_s=[duration_s],
        workers=1,
        cpu_affinity="0",
    )
    return {
        "schema_version": store.SCHEMA_VERSION,
        "key": key,
        "snippet": f"snippets/{key}.py",
        "snippet_hash": snippet_hash,
        "hardware": "cpu",
        "provenance": prov,
        "data": {"repetitions": 1, "t": dict(SUMMARY)},
    }


def make_tree(tmp_path, stored=(), durations=None, **sources):
    """snippets/mx/<name>.py for each source, and an older valid result for each name in ``stored``
    (which took 1 s to measure, or what ``durations`` says)."""
    snippets = tmp_path / "snippets"
    (snippets / "mx").mkdir(parents=True)
    for name, src in sources.items():
        (snippets / "mx" / f"{name}.py").write_text(src)
    results = tmp_path / "build_results"
    existing = {}
    for name in stored:
        path = store.result_path(f"mx/{name}", "cpu", results)
        store.write_atomic(path, result_doc(f"mx/{name}", duration_s=(durations or {}).get(name, 1.0)))
        existing[path] = path.read_bytes()
    return snippets, results, existing


def job_args(snippets, results, extra, logs=True):
    logs_dir = ["--logs-dir", str(snippets.parent / "logs")] if logs else []
    return [BUILD, "--snippets-dir", str(snippets), "--results-dir", str(results), *logs_dir, *map(str, extra)]


def build(snippets, results, *extra, timeout=120, logs=True, env=None):
    """Run the job to its end; its logs in tmp_path/logs unless ``logs`` is false."""
    return run_python(job_args(snippets, results, extra, logs), timeout=timeout, env_extra=env)


def start_build(snippets, results, *extra, name="job"):
    """Start the job in the background, its output in tmp_path/<name>.out; returns (Popen, that path)."""
    out = snippets.parent / f"{name}.out"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, *job_args(snippets, results, extra)], stdout=f, stderr=f, env=env)
    return proc, out


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_pids(pidfile) -> list[int]:
    """The pids a HANGS_MARKED snippet wrote, once it has."""
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the snippet did not start")
    return [int(p) for p in pidfile.read_text().split()]


def kill_leftovers(pidfile) -> None:
    """Clean up after a failed assertion: the processes this test started, by the pids they wrote."""
    for pid in pidfile.read_text().split() if pidfile.exists() else []:
        if alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A tree with one snippet (GOOD) and its fresh result, measured once for the tests that copy it."""
    base = tmp_path_factory.mktemp("measured")
    snippets, results, _ = make_tree(base, good=GOOD)
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return base


def copy_of(measured, tmp_path):
    shutil.copytree(measured, tmp_path / "tree")
    return tmp_path / "tree" / "snippets", tmp_path / "tree" / "build_results"


# ---------------------------------------------------------------- what the job has always done


def test_failures_leave_results_untouched_and_are_named(tmp_path):
    failing = dict(raises=RAISES, hangs=HANGS, garbage=GARBAGE, no_spread=NO_SPREAD, syntax=SYNTAX)
    snippets, results, existing = make_tree(tmp_path, stored=failing, durations={"hangs": 100}, good=GOOD, **failing)
    proc = build(snippets, results, "--cpu", "--timeout", "15", "--gpus", "2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    started = re.findall(r"(mx/\w+) +running", out)
    # longest first: a snippet never measured (good) counts as longest, then hangs (100 s); the two
    # workers take those two at once, in either order
    assert set(started[:2]) == {"mx/good", "mx/hangs"}, f"two workers did not start with the longest: {started}"
    for name in failing:
        assert f"mx/{name}" in out.split("failed")[-1], f"summary does not name mx/{name}:\n{out}"
    assert "timed out" in out and "snippet broke" in out and "not a finite number" in out
    for path, before in existing.items():
        assert path.read_bytes() == before, f"{path} was changed by a failing snippet"
    assert "mx/good" not in out.split("failed")[-1], out
    good = store.load(store.result_path("mx/good", "cpu", results))
    assert good["snippet_hash"] == store.snippet_hash(snippets / "mx" / "good.py")
    assert good["provenance"]["gpu"] == "none (CPU run)" and good["provenance"]["repetitions"] == 3
    assert not list(results.rglob("*.tmp")), "a temporary file was left behind"


def test_up_to_date_snippets_are_skipped_without_running(measured, tmp_path):
    snippets, results = copy_of(measured, tmp_path)
    before = {p: p.read_bytes() for p in results.rglob("*.json")}
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr
    assert "running" not in proc.stdout, "an up-to-date snippet was run again:\n" + proc.stdout
    assert {p: p.read_bytes() for p in results.rglob("*.json")} == before, "a stored result was rewritten"


def test_refuses_gpu_results_without_a_gpu(tmp_path):
    snippets, results, _ = make_tree(tmp_path, stored=["raises"], raises=RAISES)
    before = sorted(p for p in results.rglob("*") if p.is_file())
    proc = build(snippets, results)
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p for p in results.rglob("*") if p.is_file()) == before


def test_comment_changes_keep_a_result_fresh_and_code_changes_do_not(tmp_path):
    path = tmp_path / "s.py"
    path.write_text(GOOD)
    before = store.snippet_hash(path)
    path.write_text("# a comment\n" + GOOD.replace("calls=10", "calls = 10"))
    assert store.snippet_hash(path) == before
    path.write_text(GOOD.replace("calls=10", "calls=11"))
    assert store.snippet_hash(path) != before


def test_malformed_result_is_reported_with_its_path(tmp_path):
    bad = tmp_path / "m02" / "broken.json"
    bad.parent.mkdir()
    bad.write_text('{"schema_version": 2, "key": ')
    with pytest.raises(store.ResultError, match=re.escape(str(bad))):
        store.load(bad)
    doc = result_doc("m02/broken")
    del doc["provenance"]["driver"]
    bad.write_text(json.dumps(doc))
    with pytest.raises(store.ResultError) as err:
        store.load(bad)
    assert str(bad) in str(err.value) and "driver" in str(err.value)


# ---------------------------------------------------------------- processes, GPUs, summary


def test_processes_and_workers_are_recorded_per_snippet(tmp_path):
    twice, bad_count = "PROCESSES = 2\n" + QUICK, "PROCESSES = 'two'\n" + QUICK
    flaky = FLAKY.replace("MARK", str(tmp_path / "flaky.mark"))
    snippets, results, existing = make_tree(tmp_path, stored=["flaky"], twice=twice, flaky=flaky, bad_count=bad_count)
    summary_json = tmp_path / "summary.json"
    # --parallel-host: these host-bound (PROCESSES = 2) snippets run on the two workers, each pinned
    proc = build(snippets, results, "--cpu", "--gpus", "2", "--parallel-host", "--summary-json", summary_json)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "mx/flaky: process 2/2:" in out and "the second process broke" in out
    assert "PROCESSES must be a positive integer literal" in out
    assert all(path.read_bytes() == before for path, before in existing.items()), "a failed process wrote a result"
    assert f"results in {results / 'cpu'}" in out
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"wall time \d+\.\d s for 3 snippets on 2 CPU worker\(s\); worker seconds \d+\.\d", last), last

    doc = store.load(store.result_path("mx/twice", "cpu", results))
    prov, runs = doc["provenance"], doc["runs"]
    assert prov["processes"] == 2 and len(runs) == 1 and len(prov["durations_s"]) == 2
    assert prov["duration_s"] == pytest.approx(sum(prov["durations_s"]), abs=0.02)
    assert doc["data"]["pid"] != runs[0]["pid"], "the two processes were not fresh ones"
    half = len(os.sched_getaffinity(0)) // 2
    for data in (doc["data"], runs[0]):  # each process ran pinned to its worker's half of the cores
        assert len(data["cores"]) == half and job.cpu_list(data["cores"]) == prov["cpu_affinity"]
    assert prov["workers"] == 2 and "gpu_index" not in prov

    summary = json.loads(summary_json.read_text())
    rows = {row["key"]: row for row in summary["snippets"]}
    assert summary["gpus"] == 2 and summary["wall_s"] > 0
    assert rows["mx/twice"]["status"] == "written" and rows["mx/twice"]["processes"] == 2
    assert rows["mx/twice"]["gpu_seconds"] > 0
    assert rows["mx/flaky"]["status"] == "failed" and rows["mx/flaky"]["processes"] == 2
    assert rows["mx/bad_count"]["processes"] == 0

    # --processes overrides every snippet's PROCESSES; one process stores no runs
    proc = build(snippets, results, "--cpu", "--only", "mx/twice", "--force", "--processes", "1")
    doc = store.load(store.result_path("mx/twice", "cpu", results))
    assert proc.returncode == 0 and doc["provenance"]["processes"] == 1 and "runs" not in doc, proc.stdout


def test_more_gpus_than_present_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    snippets, results, _ = make_tree(tmp_path, quick=QUICK)
    monkeypatch.setattr(job, "detect_gpu", lambda: ("NVIDIA Test GPU", 1))
    args = job.parse_args(["--gpus", "2", "--snippets-dir", str(snippets), "--results-dir", str(results)])
    assert job.build(args) == 2
    assert "--gpus 2, but this machine has 1 GPU(s)" in capsys.readouterr().err
    assert not results.exists()


# ---------------------------------------------------------------- defects, each named after what went wrong


def test_two_jobs_on_one_results_folder_are_locked_out(tmp_path):
    """D1: a second job on the same results folder refuses at once (exit 3, naming the holder) or waits."""
    pidfile = tmp_path / "hangs.pid"
    snippets, results, _ = make_tree(
        tmp_path, hangs=HANGS_MARKED.format(pidfile=str(pidfile), with_child=0), raises=RAISES
    )
    first, _ = start_build(snippets, results, "--cpu", "--only", "mx/hangs", "--timeout", "100", name="first")
    waiting = None
    try:
        [snippet] = read_pids(pidfile)
        second = build(snippets, results, "--cpu", "--only", "mx/raises")
        assert second.returncode == 3 and f"pid {first.pid}" in second.stderr, second.stdout + second.stderr
        assert "snippet broke" not in second.stdout + second.stderr

        waiting, out = start_build(snippets, results, "--cpu", "--only", "mx/raises", "--wait", name="waiting")
        wait_for(lambda: f"pid {first.pid}" in out.read_text(), 30, "--wait did not say whom it waits for")
        assert waiting.poll() is None
        first.terminate()
        assert first.wait(timeout=30) == 128 + signal.SIGTERM
        assert waiting.wait(timeout=60) == 1 and "snippet broke" in out.read_text(), out.read_text()
        assert not alive(snippet), "SIGTERM left the snippet running"
    finally:
        for proc in (first, waiting):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        kill_leftovers(pidfile)


def test_sighup_or_sigkill_of_the_job_leaves_no_snippet_running(tmp_path):
    """D2: a closed terminal (SIGHUP) or a SIGKILL of the job takes the snippet with it, and what the
    snippet started (a compile worker, say): the kernel's SIGTERM makes the runner kill its group."""
    pidfile = tmp_path / "hangs.pid"
    snippets, results, _ = make_tree(tmp_path, hangs=HANGS_MARKED.format(pidfile=str(pidfile), with_child=1))
    for sig in (signal.SIGHUP, signal.SIGKILL):
        pidfile.unlink(missing_ok=True)
        proc, out = start_build(snippets, results, "--cpu", "--timeout", "100", name=sig.name)
        try:
            pids = read_pids(pidfile)
            proc.send_signal(sig)
            assert proc.wait(timeout=30) == (128 + sig if sig == signal.SIGHUP else -sig), out.read_text()
            wait_for(lambda: not any(alive(p) for p in pids), 5, f"the snippet or its child ran on after {sig.name}")
        finally:
            proc.kill()
            proc.wait()
            kill_leftovers(pidfile)


def test_runner_dies_with_its_parent_and_takes_its_group(tmp_path):
    """D2: the runner's watchdog kills its process group (what the snippet started) when its parent
    dies without cleaning up, also where the kernel's parent-death signal is not set."""
    pidfile = tmp_path / "group.pid"
    snippet = tmp_path / "group.py"
    snippet.write_text(HANGS_MARKED.format(pidfile=str(pidfile), with_child=1))
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.Popen(sys.argv[1:], start_new_session=True); time.sleep(120)",
            *[sys.executable, "-m", "coursekit.runner", str(snippet), str(tmp_path / "out.json")],
        ],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        pids = read_pids(pidfile)
        parent.kill()
        parent.wait()
        wait_for(lambda: not any(alive(p) for p in pids), 5, "the runner or its child outlived the runner's parent")
    finally:
        parent.kill()
        parent.wait()
        kill_leftovers(pidfile)


def test_misleading_messages_name_what_the_snippet_did(tmp_path):
    """D12: a list from measure(), sys.exit(0) in it, and an exit without output are named as such."""
    snippets, results, _ = make_tree(tmp_path, returns_list=RETURNS_LIST, exits=EXITS, os_exit=OS_EXIT)
    proc = build(snippets, results, "--cpu", "--gpus", "2")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "mx/returns_list: measure() returned a list, not a dict" in out
    assert "mx/exits: exit code 2: measure() called sys.exit(0) instead of returning its data" in out
    assert "mx/os_exit: exited 0 without writing its data" in out
    assert "provenance lacks" not in out and "No such file" not in out


def test_malformed_stored_result_is_measured_again_not_a_crash(measured, tmp_path):
    """The up-to-date check names an unusable stored result and re-measures the snippet."""
    snippets, results = copy_of(measured, tmp_path)
    path = store.result_path("mx/good", "cpu", results)
    doc = json.loads(path.read_text())
    doc["data"]["t"]["median"] = "7.3"
    path.write_text(json.dumps(doc))
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"stored result unusable, measuring again: {re.escape(str(path))}.*median", proc.stdout)
    assert store.is_number(store.load(path)["data"]["t"]["median"])


def test_stale_temporary_files_are_removed_under_the_lock(measured, tmp_path):
    """D13a: a write killed half-way leaves .<name>.json.<random>.tmp; the next job deletes it."""
    snippets, results = copy_of(measured, tmp_path)
    stale = results / "cpu" / "mx" / ".good.json.k3x9a1b2.tmp"
    stale.write_text('{"schema_version": ')
    elsewhere = results / "other-gpu" / "mx" / ".good.json.q7w8e9r0.tmp"  # another hardware's folder: not ours
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("{")
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 0 and f"removed {stale}" in proc.stdout, proc.stdout + proc.stderr
    assert not stale.exists() and elsewhere.exists()


def test_cpu_results_stay_out_of_build_results():
    """D13b: --cpu writes to an ignored folder unless --results-dir says otherwise."""
    default = job.parse_args(["--cpu"]).results_dir
    assert default == ROOT / ".cache" / "cpu-results" and not default.is_relative_to(store.RESULTS_DIR)
    assert job.parse_args([]).results_dir == store.RESULTS_DIR
    assert job.parse_args(["--cpu", "--results-dir", "/x"]).results_dir == job.Path("/x")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(default / "cpu" / "m02" / "x.json")], cwd=ROOT)
    assert ignored.returncode == 0, f"{default} is not ignored by git"


def test_logs_are_not_left_in_tmp(measured, tmp_path):
    """D13c: logs go to --logs-dir; without it, to a temporary folder deleted when all went well and
    kept, and named, when something failed. TMPDIR points to a folder of this test's own, so that
    other processes' files in /tmp cannot confuse it."""
    snippets, results = copy_of(measured, tmp_path)
    (snippets / "mx" / "raises.py").write_text(RAISES)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    logs = snippets.parent / "logs"

    proc = build(snippets, results, "--cpu", env=env)  # with --logs-dir
    assert proc.returncode == 1 and (logs / "mx__raises.1.log").exists() and f"logs kept in {logs}" in proc.stdout
    assert not list(tmp.iterdir()), "the job wrote to the temporary folder although --logs-dir was given"

    proc = build(snippets, results, "--cpu", "--only", "mx/good", logs=False, env=env)
    assert proc.returncode == 0 and not list(tmp.iterdir()), "a successful job left its logs behind"

    proc = build(snippets, results, "--cpu", "--only", "mx/raises", logs=False, env=env)
    [kept] = tmp.glob("build_results_logs_*")
    assert proc.returncode == 1 and f"logs kept in {kept}" in proc.stdout and (kept / "mx__raises.1.log").exists()


# ---------------------------------------------------------------- the hash on other Python versions


def other_pythons():
    """Commands that run other Python 3 versions here: pythonX.Y on the PATH, or pyenv's versions."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = {}
    for v in ("3.10", "3.12", "3.13"):
        if v != here and shutil.which(f"python{v}"):
            found[v] = ([f"python{v}"], {})
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True)
        for version in out.stdout.split():
            mm = ".".join(version.split(".")[:2])
            if version[0] == "3" and mm not in (here, "3.6", "3.7", "3.8", "3.9"):
                found[mm] = (["pyenv", "exec", "python"], {"PYENV_VERSION": version})
    return [(cmd, dict(os.environ, **env)) for cmd, env in found.values()]


def test_hash_is_the_same_on_every_python_version():
    """The GPU machine's Python (3.12) and the test machines' (3.11) must agree on a snippet's hash.
    An interpreter that runs but crashes on the hash is a failure, not "not installed" (test gap 1)."""
    import glob

    code = (
        "import sys, glob; sys.path.insert(0, '.'); from coursekit import results as s; "
        "print([s.snippet_hash(p) for p in sorted(glob.glob('snippets/*/*.py'))])"
    )
    here = str([store.snippet_hash(p) for p in sorted(glob.glob(str(ROOT / "snippets/*/*.py")))])
    compared = 0
    for cmd, env in other_pythons():
        # First: does this interpreter run at all? Only then is a failure of the hash a failure.
        probe = subprocess.run(cmd + ["-c", "import sys"], capture_output=True, text=True, cwd=ROOT, env=env)
        if probe.returncode != 0:
            continue  # e.g. a pyenv shim for a version that is not installed
        out = subprocess.run(cmd + ["-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
        name = f"{cmd} {env.get('PYENV_VERSION', '')}"
        assert out.returncode == 0, f"{name} runs, but computing the hashes there failed:\n{out.stderr[-2000:]}"
        assert out.stdout.strip() == here, f"{name} computes different hashes"
        compared += 1
    if not compared:
        pytest.skip(
            "no second Python version runs here; the GPU machine's results (Python 3.12) "
            "are still compared with this one's hashes by tests/test_results.py"
        )


def test_a_first_run_into_a_new_folder_still_starts_the_slowest_snippet_first(tmp_path):
    """With no result in the target folder yet, the duration comes from another hardware folder:
    a parallel re-run into a new folder once started its longest snippet last and ran out of time."""
    from coursekit import build

    results = tmp_path / "build_results"
    for hw, key, seconds in (("ref", "mx/slow", 300.0), ("ref", "mx/quick", 5.0)):
        path = results / hw / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": {"duration_s": seconds}}))
    store.write_set_info(results / "ref", store.default_set_info("ref", "NVIDIA Test GPU", results))  # a set
    new = results / "rerun"
    assert build.previous_duration(new / "mx" / "slow.json") == 300.0
    assert build.previous_duration(new / "mx" / "quick.json") == 5.0
    assert build.previous_duration(new / "mx" / "never.json") == float("inf")


def test_host_bound_snippets_run_one_at_a_time_unless_asked(tmp_path):
    """Issue 7 item 8: measured on two GPUs in parallel, host-side numbers did not match a serial
    run number by number, so with --gpus N the host-bound snippets (PROCESSES > 1) run one at a
    time, on one worker with every core, after the others; --parallel-host runs them in parallel."""
    host = GOOD.replace("def measure", "PROCESSES = 2\n\n\ndef measure")
    snippets, results, _ = make_tree(tmp_path, host=host, gpu_a=GOOD, gpu_b=GOOD)
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("needs two cores for two workers")
    assert build(snippets, results, "--cpu", "--gpus", "2", "--force").returncode == 0
    prov = {n: store.load(store.result_path(f"mx/{n}", "cpu", results))["provenance"] for n in ("host", "gpu_a")}
    assert prov["host"]["workers"] == 1 and prov["host"]["processes"] == 2
    assert prov["host"]["cpu_affinity"] == job.cpu_list(sorted(os.sched_getaffinity(0)))
    assert prov["gpu_a"]["workers"] == 2
    assert build(snippets, results, "--cpu", "--gpus", "2", "--force", "--parallel-host").returncode == 0
    assert store.load(store.result_path("mx/host", "cpu", results))["provenance"]["workers"] == 2


def test_snippets_spanning_every_gpu_run_alone_last_with_all_of_them(tmp_path, monkeypatch):
    """A distributed snippet (module 11's expert parallelism) declares GPUS = "all": it runs after the
    others, alone, on one worker holding every GPU and core of the job, and its GPU seconds count
    every GPU it held. Any other GPUS value fails, naming it, and writes nothing."""
    spans = QUICK.replace("import os", 'import os\n\nGPUS = "all"')
    bad = QUICK.replace("import os", "import os\n\nGPUS = 2")
    snippets, results, _ = make_tree(tmp_path, spans=spans, bad=bad, one=QUICK)
    paths = {p.stem: p for p in snippets.rglob("*.py")}
    assert job.declared_all_gpus(paths["spans"]) and not job.declared_all_gpus(paths["one"])
    with pytest.raises(job.Failed, match='GPUS may only be "all"'):
        job.declared_all_gpus(paths["bad"])

    workers = [job.Worker("0", [0, 1], 2), job.Worker("1", [2, 3], 2)]
    spanning = job.spanning_worker(workers)
    assert spanning.gpu == "0,1" and spanning.cores == [0, 1, 2, 3] and spanning.gpu_count == 2
    assert spanning.env(small=False)["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert job.spanning_worker([job.Worker(None, [0], 1)]).gpu_count == 1

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores for two workers")
    summary_json = tmp_path / "summary.json"
    proc = build(snippets, results, "--cpu", "--gpus", "2", "--summary-json", summary_json)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and 'GPUS may only be "all" (a snippet that spans every GPU), not 2' in out, out
    assert not store.result_path("mx/bad", "cpu", results).exists()
    prov = store.load(store.result_path("mx/spans", "cpu", results))["provenance"]
    assert prov["workers"] == 1 and prov["cpu_affinity"] == job.cpu_list(sorted(os.sched_getaffinity(0)))
    assert store.load(store.result_path("mx/one", "cpu", results))["provenance"]["workers"] == 2
    order = [line for line in proc.stdout.splitlines() if "running" in line]
    assert "mx/spans" in order[-1], order  # started after every other snippet


# ---------------------------------------------------------------- the published CPU set (issue 16)


def test_cpu_publish_writes_a_labelled_cpu_set_and_lists_what_it_lacks(tmp_path):
    """--cpu --publish writes build_results/cpu-small/ beside the GPU sets: results that say CPU and
    small sizes, and a README naming each snippet without a result there, with the reason; a later
    run of some snippets keeps the reasons of the others."""
    snippets, results, _ = make_tree(tmp_path, quick=QUICK, raises=RAISES)
    proc = build(snippets, results, "--cpu", "--publish")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # mx/raises failed: named, the rest written
    assert store.hardware_sets(results) == ["cpu-small"]
    doc = store.load(store.result_path("mx/quick", "cpu-small", results))
    assert doc["hardware"] == "cpu-small"
    assert doc["provenance"]["gpu"] == store.CPU_GPU and doc["provenance"]["sizes"] == store.SMALL
    readme = (results / "cpu-small" / "README.md").read_text()
    assert "This is not GPU data" in readme
    assert "| `mx/raises` | exit code 1: RuntimeError: snippet broke |" in readme, readme
    assert "`mx/quick`" not in readme
    proc = build(snippets, results, "--cpu", "--publish", "--only", "mx/quick", "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "| `mx/raises` | exit code 1: RuntimeError: snippet broke |"
        in (results / "cpu-small" / "README.md").read_text()
    )


def test_cpu_and_gpu_sets_cannot_be_mistaken_for_each_other(tmp_path):
    """--publish needs --cpu; a CPU run's folder is named cpu or cpu-<name>; and the store refuses a
    CPU run's result in a folder named like a GPU's, or a GPU's in a CPU set."""
    snippets, results, _ = make_tree(tmp_path, quick=QUICK)
    proc = build(snippets, results, "--publish")
    assert proc.returncode == 2 and "--publish is for a CPU run" in proc.stderr, proc.stderr
    proc = build(snippets, results, "--cpu", "--hardware", "nvidia-h200")
    assert proc.returncode == 2 and "a CPU set's folder is named cpu or cpu-<name>" in proc.stderr, proc.stderr
    assert not results.exists() or not list(results.rglob("*.json"))
    cpu_in_gpu_folder = dict(result_doc("mx/quick"), hardware="nvidia-h200")
    with pytest.raises(store.ResultError, match="a CPU run at small sizes in the folder 'nvidia-h200'"):
        store.validate(cpu_in_gpu_folder)
    gpu_in_cpu_folder = result_doc("mx/quick")
    gpu_in_cpu_folder["provenance"] = dict(gpu_in_cpu_folder["provenance"], gpu="NVIDIA H200")
    with pytest.raises(store.ResultError, match="is a CPU set, but provenance.gpu"):
        store.validate(dict(gpu_in_cpu_folder, hardware="cpu-small"))


# ---------------------------------------------------------------- names, folders and helpers that escape


@pytest.mark.parametrize("name", ["cpu-/../../../x", "cpu-a/b", "cpu-X", "cpu-", "cpu-x.", "/tmp/cpu-x"])
def test_a_hardware_name_that_is_not_a_plain_slug_is_refused(name, tmp_path):
    """N6: --hardware names a folder under the results folder, nothing else: no path, no dot."""
    base = tmp_path / "a" / "b"
    base.mkdir(parents=True)
    snippets, results, _ = make_tree(base, quick=QUICK)
    proc = build(snippets, results, "--cpu", "--hardware", name)
    assert proc.returncode == 2 and f"--hardware {name!r} is not" in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not results.exists() and not list(tmp_path.rglob(".lock")), sorted(tmp_path.rglob("*"))
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]


def test_a_lock_that_cannot_be_taken_ends_the_job_with_a_message(tmp_path):
    """N5: a .lock that is a folder, or one whose write fails (a full disk: /dev/full), ends the job
    with a message naming it and exit 2, never a traceback; nothing is measured."""
    snippets, results, _ = make_tree(tmp_path, quick=QUICK)
    lock = results / "cpu" / ".lock"
    lock.mkdir(parents=True)
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 2 and str(lock) in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and not list(results.rglob("*.json"))
    lock.rmdir()
    lock.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    proc = build(snippets, results, "--cpu")
    assert proc.returncode == 2 and str(lock) in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and not list(results.rglob("*.json"))


def test_a_read_only_results_folder_ends_the_job_with_a_message(tmp_path, monkeypatch, capsys):
    """N5: a results folder the job cannot write to (read-only: EROFS, which even root meets) ends it
    with a message and exit 2; nothing is measured."""
    import errno

    snippets, results, _ = make_tree(tmp_path, quick=QUICK)

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(job.Path, "mkdir", read_only)
    args = job.parse_args(["--cpu", "--snippets-dir", str(snippets), "--results-dir", str(results)])
    assert job.build(args) == 2
    err = capsys.readouterr().err
    assert "Read-only file system" in err and str(results / "cpu") in err, err
    assert not results.exists()


HELPER_ESCAPES = """
import os, subprocess, sys, time
from pathlib import Path

def measure(small=False):
    helper = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(120)"])
    Path({pidfile!r}).write_text(str(helper.pid))
    time.sleep({linger})
    return {{"repetitions": 1, "t": {summary!r}}}
"""


@pytest.mark.parametrize("linger, timeout", [(0, 300), (600, 12)], ids=["snippet-returns", "snippet-times-out"])
def test_a_helper_that_leaves_the_process_group_does_not_outlive_the_job(linger, timeout, tmp_path):
    """N7: a process the snippet started that calls os.setsid() (its own session, out of the group
    the job kills) is found among the snippet's descendants and killed when the snippet ends."""
    pidfile = tmp_path / "helper.pid"
    source = HELPER_ESCAPES.format(pidfile=str(pidfile), linger=linger, summary=SUMMARY)
    snippets, results, _ = make_tree(tmp_path, escapes=source)
    try:
        proc = build(snippets, results, "--cpu", "--timeout", str(timeout), timeout=timeout + 60)
        assert proc.returncode == (0 if linger == 0 else 1), proc.stdout + proc.stderr
        [helper] = read_pids(pidfile)
        wait_for(lambda: not alive(helper), 5, "the helper that called os.setsid() outlived the job")
    finally:
        kill_leftovers(pidfile)


# ---------------------------------------------------------------- a process that disagrees with the others


def _summary(median):
    return dict(SUMMARY, median=median, p10=median, p90=median, min=median, max=median)


def test_disagreement_names_the_process_and_the_timing():
    """A timing whose median in one process is more than 10x off the other processes' is named;
    spreads of the usual kind, and results of fewer than three processes, are not."""
    runs = [{"repetitions": 1, "pts": [{"t": _summary(v)}]} for v in (1.6, 1.3, 10650.6)]
    assert (
        job.disagreement(runs)
        == "process 3's pts[0].t (median 1.065e+04) is more than 10x off the median over the processes (1.6)"
    )
    runs[2]["pts"][0]["t"] = _summary(0.1)
    assert job.disagreement(runs).startswith("process 3's pts[0].t (median 0.1)")
    runs[2]["pts"][0]["t"] = _summary(4.0)  # 2.8x: noise, not a stall
    assert job.disagreement(runs) is None
    assert job.disagreement([{"t": _summary(1.0)}, {"t": _summary(100.0)}]) is None


DISAGREES_ONCE = """
from pathlib import Path

PROCESSES = 3


def measure(small=False):
    count = Path({count!r})
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    t = 1000.0 if n == 3 else 1.0  # the first attempt's third process stalls
    return {{"repetitions": 1, "t": dict({summary!r}, median=t, p10=t, p90=t, min=t, max=t)}}
"""


def test_processes_that_disagree_are_measured_again_once_and_the_provenance_says_so(tmp_path):
    snippets, results, _ = make_tree(
        tmp_path, disagrees=DISAGREES_ONCE.format(count=str(tmp_path / "count"), summary=SUMMARY)
    )
    proc = build(snippets, results, "--cpu", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "measuring all 3 processes again, once" in proc.stdout
    assert (tmp_path / "count").read_text() == "6"
    doc = store.load(store.result_path("mx/disagrees", "cpu", results))
    assert doc["provenance"]["remeasured"] == (
        "measured twice: in the first attempt process 3's t (median 1000) is more than 10x off the median "
        "over the processes (1); this attempt's processes agree"
    )
    assert [r["t"]["median"] for r in [doc["data"], *doc["runs"]]] == [1.0, 1.0, 1.0]
