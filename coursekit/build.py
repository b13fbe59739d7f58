"""The GPU build job: run every out-of-date snippet and store its data with provenance.

    python scripts/build_results.py                 # everything out of date, on this GPU
    python scripts/build_results.py --only m02      # one module (or one key: m02/crossover)
    python scripts/build_results.py --force         # re-measure even what is up to date
    python scripts/build_results.py --cpu           # a CPU run at small sizes, into build_results/cpu/

Each snippet runs in its own process (python -m coursekit.runner) with a timeout. A result is
written only when the snippet succeeded and its data validates, through a temporary file and a
rename, so a snippet that raises, hangs or returns garbage leaves the stored result untouched.
The job continues past a failure, prints a summary and exits 1 if anything failed; it exits 2,
writing nothing, when asked for GPU results on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit import results as store


def hardware_slug(gpu_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def detect_gpu() -> str | None:
    """The CUDA device's name, or None. Runs in a child so this process stays torch-free."""
    probe = "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise SystemExit("error: `import torch` did not finish within 300 s; cannot tell whether there is a GPU")
    if out.returncode != 0:
        raise SystemExit(f"error: cannot import torch to look for a GPU: {out.stderr.strip().splitlines()[-1:]}")
    name = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    return name or None


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


def is_up_to_date(path: Path, result: Path) -> bool:
    if not result.exists():
        return False
    try:
        return store.load(result)["snippet_hash"] == store.snippet_hash(path)
    except (store.ResultError, SyntaxError, OSError, UnicodeDecodeError):
        return False  # a malformed result, or a snippet that no longer parses: run it and report


def run_one(path: Path, out_json: Path, small: bool, timeout: float, log: Path) -> tuple[bool, str]:
    """Run one snippet in a fresh process group; (ok, one-line reason)."""
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(
            [str(store.ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    if small:
        env.setdefault("TRITON_INTERPRET", "1")
    else:
        env.pop("TRITON_INTERPRET", None)  # a GPU run must compile Triton kernels, not interpret them
    cmd = [sys.executable, "-m", "coursekit.runner", str(path), str(out_json)] + (["--small"] if small else [])
    with open(log, "w") as logf:
        proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=store.ROOT, start_new_session=True
        )
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # The snippet and anything it started (compile workers) go with it, also when this
            # job itself is interrupted: nothing may keep running on the GPU behind our back.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if timed_out:
            return False, f"timed out after {timeout:.0f} s"
    if rc != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(no output)"]
        return False, f"exit code {rc}: {tail[0][:160]}"
    return True, ""


def build(
    only: list[str],
    force: bool,
    cpu: bool,
    timeout: float,
    hardware: str | None,
    snippets_dir: Path,
    results_dir: Path,
    small: bool | None = None,
) -> int:
    gpu = None if cpu else detect_gpu()
    if not cpu and gpu is None:
        print(
            "error: no CUDA GPU found on this machine; GPU results need one "
            "(pass --cpu for a CPU run at small sizes into build_results/cpu/)",
            file=sys.stderr,
        )
        return 2
    hardware = hardware or ("cpu" if cpu else hardware_slug(gpu))
    small = cpu if small is None else small
    snippets = [
        p
        for p in store.snippet_files(snippets_dir)
        if not only or any(store.snippet_key(p) == o or store.snippet_key(p).startswith(o + "/") for o in only)
    ]
    if not snippets:
        print(f"error: no snippet matches {only or 'anything'} under {snippets_dir}", file=sys.stderr)
        return 2
    commit = project_commit()
    print(
        f"build_results: {len(snippets)} snippet(s) for {hardware} ({gpu or 'CPU, small sizes'}), commit {commit[:12]}",
        flush=True,
    )

    rows, failed = [], []
    logs = Path(tempfile.mkdtemp(prefix="build_results_logs_"))
    for i, path in enumerate(snippets, 1):
        key = store.snippet_key(path)
        target = store.result_path(key, hardware, results_dir)
        prefix = f"[{i}/{len(snippets)}] {key:<32}"
        if not force and is_up_to_date(path, target):
            print(f"{prefix} up to date", flush=True)
            rows.append((key, "up to date", 0.0))
            continue
        print(f"{prefix} running ...", flush=True)
        try:
            hash_before = store.snippet_hash(path)
        except (SyntaxError, OSError, UnicodeDecodeError) as exc:
            print(f"{prefix} FAILED (cannot read or parse: {exc})", flush=True)
            rows.append((key, "FAILED", 0.0))
            failed.append((key, f"cannot read or parse: {exc}", None))
            continue
        start = time.perf_counter()
        out_json = logs / f"{key.replace('/', '__')}.json"
        log = logs / f"{key.replace('/', '__')}.log"
        ok, reason = run_one(path, out_json, small, timeout, log)
        elapsed = time.perf_counter() - start
        if ok:
            try:
                child = json.loads(out_json.read_text())
                prov = dict(child["provenance"])
                prov.update(
                    commit=commit,
                    repetitions=child["data"].get("repetitions") if isinstance(child["data"], dict) else None,
                )
                if store.snippet_hash(path) != hash_before:
                    raise store.ResultError("the snippet or a module it imports changed while it ran")
                doc = {
                    "schema_version": store.SCHEMA_VERSION,
                    "key": key,
                    "snippet": str(path.relative_to(snippets_dir.parent))
                    if path.is_relative_to(snippets_dir.parent)
                    else str(path),
                    "snippet_hash": hash_before,
                    "hardware": hardware,
                    "provenance": prov,
                    "data": child["data"],
                }
                store.write_atomic(target, doc)
            except (store.ResultError, json.JSONDecodeError, KeyError, TypeError, OSError, SyntaxError) as exc:
                ok, reason = False, f"bad output: {exc}"[:200]
        status = "ok" if ok else f"FAILED ({reason})"
        print(f"{prefix} {status}  {elapsed:.1f} s  (log: {log})", flush=True)
        rows.append((key, "written" if ok else "FAILED", elapsed))
        if not ok:
            failed.append((key, reason, log))

    print("\nsummary")
    for key, status, elapsed in rows:
        print(f"  {key:<32} {status:<11} {elapsed:7.1f} s")
    if failed:
        print(f"\n{len(failed)} snippet(s) failed; their stored results were left as they were:")
        for key, reason, log in failed:
            print(f"  {key}: {reason}" + (f"\n    log: {log}" if log else ""))
        return 1
    shutil.rmtree(logs, ignore_errors=True)  # all went well: the logs are not needed
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds through run_one's finally: the snippet is killed


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="module folders or keys, e.g. m02 or m02/crossover")
    parser.add_argument("--force", action="store_true", help="re-measure up-to-date snippets too")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU at small sizes (not GPU results)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per snippet (default 600)")
    parser.add_argument("--hardware", help="results folder name (default: from the GPU's name)")
    parser.add_argument("--snippets-dir", type=Path, default=store.SNIPPETS_DIR)
    parser.add_argument("--results-dir", type=Path, default=store.RESULTS_DIR)
    args = parser.parse_args(argv)
    return build(
        args.only,
        args.force,
        args.cpu,
        args.timeout,
        args.hardware,
        args.snippets_dir.resolve(),
        args.results_dir.resolve(),
    )


if __name__ == "__main__":
    sys.exit(main())
