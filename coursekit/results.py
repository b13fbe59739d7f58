"""The results store: build_results/<hardware>/<module>/<snippet>.json.

One JSON file per snippet and hardware. Its layout (``SCHEMA_VERSION`` 2):

    {
      "schema_version": 2,
      "key": "m02/host_overhead",               # <module folder>/<snippet stem>
      "snippet": "snippets/m02/host_overhead.py",
      "snippet_hash": "sha256 of the snippet's AST and the definitions it uses (coursekit/deps.py)",
      "hardware": "nvidia-h200",                # or cpu-<name>: a CPU run at small sizes (build.py --cpu)
      "provenance": {gpu, driver, cuda, torch, triton, python, cpu, date, commit, repetitions,
                     duration_s, processes, durations_s, workers, gpu_index, cpu_affinity,
                     sizes ("small" on a CPU set), ...},
      "data": {... what process 1's measure() returned; timings are coursekit.stats summaries},
      "runs": [{... process 2's data}, ...],    # only when the snippet ran in several processes
      "artifacts": [{"name", "bytes", "sha256"}, ...]  # only for a snippet that writes evidence files
    }

Evidence files (coursekit/evidence.py): a snippet's ``data["artifacts"]`` lists the files it wrote
(``name``, ``what`` it is, the tool it ``opens_with``, what it ``shows``); the build job stores them in
``<set>/<module>/<name>/`` beside the result (``write_with_evidence``), each at most
``MAX_ARTIFACT_BYTES``, and records each one's bytes and SHA-256 under the result's ``artifacts``.

Nothing here imports torch: the site build reads results on machines without it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coursekit import deps

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS_DIR = ROOT / "snippets"
RESULTS_DIR = ROOT / "build_results"
REFERENCE_HARDWARE = "nvidia-h200"
SCHEMA_VERSION = 2
CPU_GPU = "none (CPU run)"  # provenance.gpu of every result measured without a GPU
SMALL = "small"  # provenance.sizes of a CPU run: the snippets' measure(small=True)

PROVENANCE_FIELDS = (
    "gpu",
    "driver",
    "cuda",
    "torch",
    "triton",
    "python",
    "cpu",
    "date",
    "commit",
    "repetitions",
    "duration_s",
)


class ResultError(ValueError):
    """A results file or a snippet's data that does not satisfy the schema."""


# ---------------------------------------------------------------- snippets and hashes


def snippet_files(snippets_dir: Path = SNIPPETS_DIR) -> list[Path]:
    """Every measured snippet: snippets/<module>/<name>.py, except figures.py and _private.py."""
    return sorted(p for p in Path(snippets_dir).glob("*/*.py") if p.name != "figures.py" and not p.name.startswith("_"))


def snippet_key(path: Path) -> str:
    path = Path(path)
    return f"{path.parent.name}/{path.stem}"


def snippet_hash(path: Path) -> str:
    """SHA-256 of the snippet's syntax tree (docstrings, comments and formatting left out) and of
    every project definition it uses, transitively, including how the runner calls it
    (coursekit/deps.py). A new function in coursekit/bench.py stales nothing; a change to
    ``host_us`` stales exactly the snippets that use it."""
    path = Path(path)
    digest = hashlib.sha256(deps.module_text(path).encode())
    itself = deps.parse(path).path  # resolved
    for d in deps.dependencies(path):
        if d.path == itself:  # both resolved (coursekit/deps.py)
            continue
        digest.update(f"\n{deps.relative(d.path)}:{d.name}=".encode())
        digest.update(deps.definition_text(d).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- validation


SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # a plain folder name: nvidia-h200, cpu-small
KEY = re.compile(r"[a-z0-9_]+/[a-z0-9_]+")
SUMMARY_NUMBERS = ("median", "p10", "p90", "min", "max")
SUMMARY_FIELDS = (*SUMMARY_NUMBERS, "n", "unit")
PROVENANCE_TEXT = ("gpu", "driver", "cuda", "torch", "triton", "python", "cpu", "date", "commit")


def is_number(value) -> bool:
    """A number as the site uses one: int or float, never a bool (JSON true is not 1)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


MAX_DEPTH = 32  # levels of nesting a result may have (the deepest stored one has far fewer)


def check_finite(value, where: str = "data", depth: int = 0) -> None:
    """Every number is finite, every key a string and nothing nested more than MAX_DEPTH levels:
    what JSON and the site can use (and the checks below can walk without running out of stack)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if depth >= MAX_DEPTH and isinstance(value, dict | list | tuple):
        raise ResultError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ResultError(f"{where} is {value!r}, not a finite number")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ResultError(f"{where} has a non-string key {k!r}")
            check_finite(v, f"{where}.{k}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]", depth + 1)
        return
    raise ResultError(f"{where} is a {type(value).__name__}, which JSON cannot store")


def is_summary(value) -> bool:
    """A timing summary (coursekit/stats.py): anything with a median or a percentile is one."""
    return isinstance(value, dict) and any(k in value for k in ("median", "p10", "p90"))


def check_summary(s: dict, where: str) -> None:
    """A summary is complete or rejected: numbers are numbers, percentiles in order."""
    missing = [k for k in SUMMARY_FIELDS if k not in s]
    if missing:
        raise ResultError(f"{where} is a timing summary without {', '.join(missing)}")
    for k in SUMMARY_NUMBERS:
        if not is_number(s[k]):
            raise ResultError(f"{where}.{k} is {s[k]!r} ({type(s[k]).__name__}), not a number")
    if not isinstance(s["n"], int) or isinstance(s["n"], bool) or s["n"] < 1:
        raise ResultError(f"{where}.n is {s['n']!r}, not a positive integer")
    if not isinstance(s["unit"], str):
        raise ResultError(f"{where}.unit is {s['unit']!r}, not a string")
    if "clock" in s and s["clock"] not in ("host", "device"):
        raise ResultError(f"{where}.clock is {s['clock']!r}, not 'host' or 'device'")
    if "rounds" in s and (
        not isinstance(s["rounds"], list) or len(s["rounds"]) != s["n"] or not all(map(is_number, s["rounds"]))
    ):
        raise ResultError(f"{where}.rounds must list the summary's n samples as numbers, in the order taken")
    if not s["min"] <= s["p10"] <= s["median"] <= s["p90"] <= s["max"]:
        raise ResultError(f"{where}: min <= p10 <= median <= p90 <= max does not hold: {s}")


def _check_summaries(value, where: str) -> int:
    """Check every summary inside ``value``; return how many there are."""
    if is_summary(value):
        check_summary(value, where)
        return 1
    if isinstance(value, dict):
        return sum(_check_summaries(v, f"{where}.{k}") for k, v in value.items())
    if isinstance(value, list):
        return sum(_check_summaries(v, f"{where}[{i}]") for i, v in enumerate(value))
    return 0


def check_data(data, where: str = "data") -> None:
    """What a snippet's measure() must return: plain data, repetitions, at least one spread."""
    if not isinstance(data, dict):
        raise ResultError(f"measure() returned a {type(data).__name__}, not a dict")
    check_finite(data, where)
    if "repetitions" not in data:
        raise ResultError(
            f"{where} has no repetitions: measure() returned its data without a repetitions count "
            "(a positive integer: how many timed repetitions each summary took)"
        )
    reps = data["repetitions"]
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise ResultError(
            f"{where}.repetitions is {reps!r}: measure() returned a repetitions count that is not a positive integer"
        )
    if not _check_summaries(data, where):
        raise ResultError(f"{where} holds no timing summary (median/p10/p90/n): record the spread")
    if "races" in data:  # rows of the scoreboard (coursekit/scoreboard.py): refused here if malformed
        if not isinstance(data["races"], list):
            raise ResultError(f"{where}.races must be a list of races")
        for i, race in enumerate(data["races"]):
            check_race(race, f"{where}.races.{i}")
    if "artifacts" in data:  # the evidence files the snippet wrote (coursekit/evidence.py)
        check_artifact_list(data["artifacts"], f"{where}.artifacts")


# ---------------------------------------------------------------- evidence files

MAX_ARTIFACT_BYTES = 2 * 1024 * 1024  # one evidence file: a reader downloads it, the repository stores it
ARTIFACT_KINDS = ("profiler trace", "memory snapshot", "compile log", "Triton IR")
ARTIFACT_FIELDS = ("name", "what", "opens_with", "shows")
ARTIFACT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,119}")  # a plain file name: no folder, no space, no ..


def artifact_prefix(key: str) -> str:
    """What every evidence file of snippet ``key`` is named with first: ``m02/evidence`` -> ``m02-evidence-``."""
    return key.replace("/", "-") + "-"


def check_artifact_name(name, key: str | None, where: str) -> None:
    if not isinstance(name, str) or not ARTIFACT_NAME.fullmatch(name) or ".." in name:
        raise ResultError(
            f"{where}: the evidence file name {name!r} is not a plain file name "
            "(lower-case letters, digits, '.', '_' and '-', no folder, at most 120 characters)"
        )
    if name.endswith(".json"):  # every .json under build_results/ is a result; a trace is gzipped
        raise ResultError(f"{where}: the evidence file {name!r} ends in .json, as results do: gzip it (.json.gz)")
    if key is not None and not name.startswith(artifact_prefix(key)):
        raise ResultError(f"{where}: the evidence file {name!r} must be named {artifact_prefix(key)}... (its snippet)")


def check_artifact_list(artifacts, where: str) -> None:
    """``data["artifacts"]`` as measure() returns it: one entry per file, each with its name, what it
    is (one of ARTIFACT_KINDS), the tool that opens it and what it shows, all text."""
    if not isinstance(artifacts, list) or not artifacts:
        raise ResultError(f"{where} must list the evidence files the snippet wrote (a non-empty list)")
    names = set()
    for i, a in enumerate(artifacts):
        here = f"{where}[{i}]"
        if not isinstance(a, dict) or set(a) != set(ARTIFACT_FIELDS):
            raise ResultError(f"{here}: an evidence file is a dict with exactly {', '.join(ARTIFACT_FIELDS)}")
        for f in ARTIFACT_FIELDS:
            if not isinstance(a[f], str) or not a[f].strip() or "\n" in a[f]:
                raise ResultError(f"{here}.{f} is {a[f]!r}, not one line of text")
        check_artifact_name(a["name"], None, here)
        if a["what"] not in ARTIFACT_KINDS:
            raise ResultError(f"{here}.what is {a['what']!r}, not one of {', '.join(ARTIFACT_KINDS)}")
        if a["name"] in names:
            raise ResultError(f"{here}: {a['name']!r} is listed twice")
        names.add(a["name"])


def artifact_records(key: str, data: dict, folder: Path | None) -> list[dict]:
    """Each listed evidence file in ``folder`` (where the snippet's process wrote them) as the result
    records it: name, bytes, sha256. A ResultError names the snippet and the file where one is listed
    but missing, is not a plain file, is larger than MAX_ARTIFACT_BYTES, is badly named, or where the
    folder holds a file the snippet did not list."""
    listed = data.get("artifacts")
    if listed is None:
        stray = sorted(p.name for p in Path(folder).iterdir()) if folder and Path(folder).is_dir() else []
        if stray:
            raise ResultError(
                f"{key}: wrote evidence files {', '.join(stray)} but measure() lists none under artifacts"
            )
        return []
    check_artifact_list(listed, f"{key}: data.artifacts")
    records = []
    for a in listed:
        name = a["name"]
        check_artifact_name(name, key, key)
        path = Path(folder) / name if folder else None
        if path is None or path.is_symlink() or not path.is_file():
            raise ResultError(f"{key}: the evidence file {name!r} is listed but was not written (in {folder})")
        size = path.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise ResultError(
                f"{key}: the evidence file {name!r} is {size:,} bytes, over the limit of {MAX_ARTIFACT_BYTES:,} "
                "(2 MB): record fewer steps, or compress it"
            )
        if size == 0:
            raise ResultError(f"{key}: the evidence file {name!r} is empty")
        records.append({"name": name, "bytes": size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    unlisted = sorted({p.name for p in Path(folder).iterdir()} - {a["name"] for a in listed})
    if unlisted:
        raise ResultError(f"{key}: wrote evidence files {', '.join(unlisted)} that data.artifacts does not list")
    return records


def check_artifact_records(doc: dict, where: str) -> None:
    """A result's ``artifacts``: one record per file its data lists, in that order, each sized and hashed."""
    listed = doc["data"].get("artifacts")
    records = doc.get("artifacts")
    if listed is None and records is None:
        return
    if listed is None or not isinstance(records, list):
        raise ResultError(f"{where}: artifacts and data.artifacts go together (the files and what they are)")
    if [r.get("name") if isinstance(r, dict) else r for r in records] != [a["name"] for a in listed]:
        raise ResultError(f"{where}: artifacts must record exactly the files data.artifacts lists, in its order")
    for i, r in enumerate(records):
        if set(r) != {"name", "bytes", "sha256"}:
            raise ResultError(f"{where}: artifacts[{i}] is {{name, bytes, sha256}}")
        check_artifact_name(r["name"], doc["key"], f"{where}: artifacts[{i}]")
        if not isinstance(r["bytes"], int) or isinstance(r["bytes"], bool) or not 0 < r["bytes"] <= MAX_ARTIFACT_BYTES:
            raise ResultError(f"{where}: artifacts[{i}].bytes is {r['bytes']!r}, not 1..{MAX_ARTIFACT_BYTES}")
        if not isinstance(r["sha256"], str) or not re.fullmatch(r"[0-9a-f]{64}", r["sha256"]):
            raise ResultError(f"{where}: artifacts[{i}].sha256 is not a SHA-256 in hex")


def evidence_dir(result: Path) -> Path:
    """Where a result's evidence files are stored: beside it, ``<set>/<module>/<name>/``."""
    return Path(result).with_suffix("")


RACE_FIELDS = ("name", "peer", "ours", "theirs", "bar", "chapter")
DOCS_DIR = ROOT / "docs"


def check_race(race, where: str) -> None:
    """A race entry as a snippet must store it under data["races"] (coursekit/scoreboard.py reads
    them): two timing summaries of positive times in one unit, a positive bar, names as text, and
    the chapter a page of the site (docs/<part>/<page>.md). A ResultError names the field otherwise."""
    if not isinstance(race, dict):
        raise ResultError(f"{where}: a race is a dict with {', '.join(RACE_FIELDS)}")
    missing = [f for f in RACE_FIELDS if f not in race]
    if missing:
        raise ResultError(f"{where}: a race lacks {', '.join(missing)}")
    for name in ("name", "peer"):
        if not isinstance(race[name], str) or not race[name].strip():
            raise ResultError(f"{where}.{name} is {race[name]!r}, not a non-empty string")
    for side in ("ours", "theirs"):
        summary = race[side]
        if not is_summary(summary):
            raise ResultError(f"{where}.{side}: a race compares two timing summaries")
        check_summary(summary, f"{where}.{side}")
        for k in SUMMARY_NUMBERS:  # the scoreboard divides by them: a time is positive
            if summary[k] <= 0:
                raise ResultError(f"{where}.{side}.{k} is {summary[k]!r}: a race's times must be positive")
        if any(r <= 0 for r in summary.get("rounds", [])):
            raise ResultError(f"{where}.{side}.rounds holds a time that is not positive: a race's times must be")
    if race["ours"]["unit"] != race["theirs"]["unit"]:
        raise ResultError(f"{where}: ours in {race['ours']['unit']}, theirs in {race['theirs']['unit']}")
    if not is_number(race["bar"]) or race["bar"] <= 0:
        raise ResultError(f"{where}.bar: a positive ratio, theirs / ours")
    chapter = race["chapter"]
    if (
        not isinstance(chapter, str)
        or not re.fullmatch(r"[a-z0-9-]+(/[a-z0-9-]+)*\.md", chapter)
        or not (DOCS_DIR / chapter).is_file()
    ):
        raise ResultError(f"{where}.chapter {chapter!r} is not a page of the site (docs/<part>/<page>.md)")


def validate(doc, where: str = "result") -> None:
    """Raise ResultError, naming ``where`` and the field, if ``doc`` is not a complete result."""
    if not isinstance(doc, dict):
        raise ResultError(f"{where}: not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultError(f"{where}: schema_version is {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    for name in ("key", "snippet", "snippet_hash", "hardware", "provenance", "data"):
        if name not in doc:
            raise ResultError(f"{where}: missing field {name!r}")
    for name in ("key", "snippet", "snippet_hash", "hardware"):
        if not isinstance(doc[name], str):
            raise ResultError(f"{where}: {name} is {doc[name]!r}, not a string")
    if not KEY.fullmatch(doc["key"]):
        raise ResultError(f"{where}: key {doc['key']!r} is not <module folder>/<snippet name>")
    if not re.fullmatch(r"[0-9a-f]{64}", doc["snippet_hash"]):
        raise ResultError(f"{where}: snippet_hash is not a SHA-256 in hex")
    if not SLUG.fullmatch(doc["hardware"]):
        raise ResultError(f"{where}: hardware {doc['hardware']!r} is not a plain folder name (a-z, 0-9, single -)")
    snippet = doc["snippet"]
    if not re.fullmatch(r"snippets/[a-z0-9_]+/[a-z0-9_]+\.py", snippet) or ".." in snippet:
        raise ResultError(f"{where}: snippet {snippet!r} is not a path snippets/<module>/<name>.py")
    prov = doc["provenance"]
    if not isinstance(prov, dict):
        raise ResultError(f"{where}: provenance is not an object")
    try:  # the data first: the build job copies data.repetitions into the provenance
        check_data(doc["data"])
    except ResultError as exc:
        raise ResultError(f"{where}: {exc}") from None
    missing = [f for f in PROVENANCE_FIELDS if prov.get(f) in (None, "")]
    if missing:
        raise ResultError(f"{where}: provenance lacks {', '.join(missing)}")
    try:
        check_finite(prov, "provenance")
    except ResultError as exc:
        raise ResultError(f"{where}: {exc}") from None
    for name in PROVENANCE_TEXT:
        if not isinstance(prov[name], str):
            raise ResultError(f"{where}: provenance.{name} is {prov[name]!r}, not a string")
    if not is_number(prov["duration_s"]):
        raise ResultError(f"{where}: provenance.duration_s is {prov['duration_s']!r}, not a number")
    processes = prov.get("processes", 1)
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ResultError(f"{where}: provenance.processes is {processes!r}, not a positive integer")
    runs = doc.get("runs", [])
    if not isinstance(runs, list) or len(runs) != processes - 1:
        raise ResultError(f"{where}: runs must list the data of processes 2..{processes} ({processes - 1} entries)")
    try:
        for i, run in enumerate(runs, 2):
            check_data(run, f"runs[{i - 2}] (process {i})")
    except ResultError as exc:
        raise ResultError(f"{where}: {exc}") from None
    if prov["repetitions"] != doc["data"]["repetitions"]:
        raise ResultError(f"{where}: provenance.repetitions differs from data.repetitions")
    check_artifact_records(doc, where)
    # a CPU set is named as one, and a GPU set holds no CPU run: nobody mistakes one for the other
    if is_cpu_set(doc["hardware"]) and prov["gpu"] != CPU_GPU:
        raise ResultError(f"{where}: hardware {doc['hardware']!r} is a CPU set, but provenance.gpu is {prov['gpu']!r}")
    if not is_cpu_set(doc["hardware"]) and (prov["gpu"] == CPU_GPU or prov.get("sizes") == SMALL):
        raise ResultError(
            f"{where}: a CPU run at small sizes in the folder {doc['hardware']!r}; a CPU set's folder is "
            "named cpu or cpu-<name> (python scripts/build_results.py --cpu --publish)"
        )


# ---------------------------------------------------------------- reading and writing


def result_path(key: str, hardware: str, results_dir: Path = RESULTS_DIR) -> Path:
    return Path(results_dir) / hardware / f"{key}.json"


_LOADED: dict[Path, tuple[tuple[int, int], dict]] = {}


def load(path: Path) -> dict:
    """Read and validate one results file; errors name the file. A file is read and validated
    once per process while it is unchanged (the site build asks for the same result many
    times): treat the returned document as read-only."""
    path = Path(path).resolve()
    try:
        st = path.stat()
    except OSError as exc:
        raise ResultError(f"{path}: cannot read ({exc.strerror})") from None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _LOADED.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ResultError(f"{path}: nested too deeply to read (more than {MAX_DEPTH} levels are refused)") from None
    except OSError as exc:
        raise ResultError(f"{path}: cannot read ({exc.strerror or exc})") from None
    validate(doc, str(path))
    _LOADED[path] = (stamp, doc)
    return doc


def write_atomic(path: Path, doc: dict) -> None:
    """Validate, then write through a temporary file and a rename: a reader never sees half a file."""
    validate(doc, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = path.parent.parent  # <results>/<set>/<module>/<name>.json
    if folder.name == doc["hardware"] and not (folder / SET_FILE).exists():  # a new set: describe it
        write_set_info(folder, default_set_info(doc["hardware"], doc["provenance"]["gpu"], folder.parent))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by anyone
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_with_evidence(path: Path, doc: dict, source: Path | None) -> None:
    """``write_atomic`` for a result with evidence files (or one whose older result had some): the
    files listed in ``doc["artifacts"]`` are copied from ``source`` (the snippet process's folder)
    into a new folder, checked against their records, and swapped in for the older folder
    (``evidence_dir``) just before the result is written; where anything fails, the older result
    and its files stay as they were."""
    validate(doc, str(path))
    path = Path(path)
    final = evidence_dir(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{final.name}.new.", suffix=".tmp"))
    old = None
    try:
        for r in doc.get("artifacts", []):
            copy = new / r["name"]
            shutil.copyfile(Path(source) / r["name"], copy)
            if copy.stat().st_size != r["bytes"] or hashlib.sha256(copy.read_bytes()).hexdigest() != r["sha256"]:
                raise ResultError(f"{path}: the evidence file {r['name']!r} changed after it was measured")
            os.chmod(copy, 0o644)
        os.chmod(new, 0o755)
        if final.exists() or final.is_symlink():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{final.name}.old.", suffix=".tmp"))
            os.replace(final, old / final.name)
        if doc.get("artifacts"):
            os.replace(new, final)
        try:
            write_atomic(path, doc)
        except BaseException:
            if final.exists():
                shutil.rmtree(final)
            if old is not None:
                os.replace(old / final.name, final)
            raise
    finally:
        for leftover in (new, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover)


def restore_interrupted_evidence(folder: Path) -> list[str]:
    """After a job died inside ``write_with_evidence``: an older evidence folder moved aside and not
    replaced goes back; every other temporary folder of it goes. Returns what it did, in words."""
    said = []
    for tmp in sorted(Path(folder).rglob(".*.tmp")):
        if not tmp.is_dir() or tmp.is_symlink():
            continue
        parts = tmp.name[1:].split(".")
        if len(parts) >= 3 and parts[-3] == "old":
            name = ".".join(parts[:-3])
            kept, final = tmp / name, tmp.parent / name
            if kept.is_dir() and not final.exists():
                os.replace(kept, final)
                said.append(f"restored {final}, moved aside by an interrupted write")
        shutil.rmtree(tmp)
        said.append(f"removed {tmp}, left behind by an interrupted write")
    return said


SET_FILE = "set.json"  # a set's descriptor: build_results/<set>/set.json
SET_FIELDS = {"label": str, "kind": str, "gpu": str, "reference": bool, "description": str}


def is_cpu_set(hardware: str) -> bool:
    """A set measured on the CPU at the snippets' small sizes: its folder is ``cpu`` or ``cpu-<name>``."""
    return hardware == "cpu" or hardware.startswith("cpu-")


def check_set_info(info, hardware: str, where: str) -> None:
    """A set's descriptor (asv's machine.json is the model): how the site names the set (label), its
    kind (gpu or cpu, as its folder name says), the GPU its results were measured on (a CPU set's:
    "none (CPU run)"), whether it is the reference set, and one line that describes it."""
    if not isinstance(info, dict):
        raise ResultError(f"{where}: not a JSON object with {', '.join(SET_FIELDS)}")
    missing = [f for f in SET_FIELDS if f not in info]
    if missing:
        raise ResultError(f"{where}: set lacks {', '.join(missing)} (fields: {', '.join(SET_FIELDS)})")
    for name, kind in SET_FIELDS.items():
        if not isinstance(info[name], kind) or (kind is str and not info[name].strip()):
            raise ResultError(
                f"{where}: {name} is {info[name]!r}, not a {'non-empty string' if kind is str else 'boolean'}"
            )
    unknown = sorted(set(info) - set(SET_FIELDS))
    if unknown:
        raise ResultError(f"{where}: unknown field(s) {', '.join(unknown)} (fields: {', '.join(SET_FIELDS)})")
    kind = "cpu" if is_cpu_set(hardware) else "gpu"
    if info["kind"] != kind:
        raise ResultError(
            f"{where}: kind is {info['kind']!r}, but the folder {hardware!r} holds a {kind} set "
            "(a CPU set's folder is named cpu or cpu-<name>)"
        )
    if kind == "cpu" and info["gpu"] != CPU_GPU:
        raise ResultError(f"{where}: gpu of a CPU set is {CPU_GPU!r}, not {info['gpu']!r}")
    if info["reference"] != (hardware == REFERENCE_HARDWARE):
        raise ResultError(
            f"{where}: reference is {info['reference']!r}; the reference set is {REFERENCE_HARDWARE!r} and only it"
        )
    if "\n" in info["description"] or "\n" in info["label"]:
        raise ResultError(f"{where}: label and description are one line each")


def set_info(hardware: str, results_dir: Path = RESULTS_DIR) -> dict:
    """The validated set.json of one set; a ResultError names the folder or the file otherwise."""
    folder = Path(results_dir) / hardware
    if folder.is_symlink():
        raise ResultError(f"{folder}: a symbolic link, not a folder of results; a set is a real folder")
    if not folder.is_dir():
        raise ResultError(f"{folder}: no such set (a folder of results)")
    path = folder / SET_FILE
    if not path.is_file():
        raise ResultError(
            f"{folder} has no {SET_FILE}: a set needs one ({', '.join(SET_FIELDS)}), or it is not a set "
            "(README.md, 'Adding a hardware set')"
        )
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        if _SETS.get(path, (None,))[0] == stamp:  # read once per build while unchanged, like load()
            return _SETS[path][1]
        info = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ResultError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise ResultError(f"{path}: cannot read ({exc.strerror or exc})") from None
    check_set_info(info, hardware, str(path))
    _SETS[path] = (stamp, info)
    return info


_SETS: dict[Path, tuple[tuple[int, int], dict]] = {}


def hardware_sets(results_dir: Path = RESULTS_DIR) -> list[str]:
    """Every hardware set, by name: a folder named as a slug (a-z, 0-9, single dashes) with a valid
    set.json. Dot-folders and loose files are not sets; a slug-named entry that is not a described
    folder (no set.json, a symbolic link) is refused with a ResultError naming it. The one function
    that lists the sets: the site, the scripts and the build job all use it."""
    d = Path(results_dir)
    names = (
        sorted(p.name for p in d.iterdir() if SLUG.fullmatch(p.name) and (p.is_dir() or p.is_symlink()))
        if d.is_dir()
        else []
    )
    for name in names:
        set_info(name, d)
    return names


def result_files(hardware: str, results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Every result file of one set (<set>/<module>/<name>.json; the set's set.json is none)."""
    return sorted((Path(results_dir) / hardware).glob("*/*.json"))


def set_label(hardware: str, results_dir: Path = RESULTS_DIR) -> str:
    """How the site names a set to a reader: its set.json's label."""
    return set_info(hardware, results_dir)["label"]


def default_set_info(hardware: str, gpu: str, results_dir: Path = RESULTS_DIR) -> dict:
    """The set.json a new set starts with (written with its first result): edit its label and
    description by hand. A CPU set is "CPU, small sizes"; a GPU set is named after its GPU, the
    reference set and a second run of a set (<set>-rerun) saying so."""
    if is_cpu_set(hardware):
        label = "CPU, small sizes" + ("" if hardware in ("cpu", "cpu-small") else f" ({hardware})")
        description = (
            "Every snippet at its small sizes on a CPU, Triton's kernels in its interpreter: "
            "not comparable with a GPU set."
        )
        return {"label": label, "kind": "cpu", "gpu": CPU_GPU, "reference": False, "description": description}
    short = gpu.removeprefix("NVIDIA ")
    base = hardware.removesuffix("-rerun")
    if hardware == REFERENCE_HARDWARE:
        label = f"{short} (reference)"
    elif base != hardware and (Path(results_dir) / base).is_dir():
        label = f"{short}, second run"
    else:
        label = short
    description = f"Every snippet measured on {gpu} with scripts/build_results.py."
    return {
        "label": label,
        "kind": "gpu",
        "gpu": gpu,
        "reference": hardware == REFERENCE_HARDWARE,
        "description": description,
    }


def write_set_info(folder: Path, info: dict) -> None:
    """Validate a set's descriptor and write it as <folder>/set.json (through a rename)."""
    folder = Path(folder)
    check_set_info(info, folder.name, str(folder / SET_FILE))
    tmp = folder / f".{SET_FILE}.tmp"
    tmp.write_text(json.dumps(info, indent=1) + "\n")
    os.replace(tmp, folder / SET_FILE)


@dataclass
class Lookup:
    """A value found in a result, with the document it came from."""

    value: object
    doc: dict
    path: Path


def lookup(key: str, field: str, hardware: str, results_dir: Path = RESULTS_DIR) -> Lookup:
    """``data.<field>`` of result ``key``: a dotted path, list items chosen by ``[name=value]``."""
    path = result_path(key, hardware, results_dir)
    if not path.exists():
        raise KeyError(f"no result {key!r} for hardware {hardware!r} (expected {path})")
    doc = load(path)
    return Lookup(walk(doc["data"], field, f"{key}: ", str(path)), doc, path)


PATH_PART = re.compile(r"(?P<name>[^.\[\]]+)(?:\[(?P<select>[^\]]*)\])?")


def split_path(field: str) -> list[tuple[str, str | None]]:
    """``points[tokens=4096].modes.eager`` -> [("points", "tokens=4096"), ("modes", None), ("eager", None)]."""
    parts, pos = [], 0
    while field and pos < len(field):
        m = PATH_PART.match(field, pos)
        if not m:
            raise KeyError(f"cannot read the path {field!r} at {field[pos:]!r}")
        parts.append((m["name"], m["select"]))
        pos = m.end()
        if pos < len(field):
            if field[pos] != ".":
                raise KeyError(f"cannot read the path {field!r} at {field[pos:]!r}")
            pos += 1
    return parts


def _matches(item, conditions: list[tuple[str, str]]) -> bool:
    if not isinstance(item, dict):
        return False
    for name, want in conditions:
        if name not in item:
            return False
        have = item[name]
        try:
            if is_number(have) and float(want.replace("_", "")) == have:
                continue
        except ValueError:
            pass
        if str(have) != want:
            return False
    return True


def walk(node, field: str, prefix: str = "", where: str = "the data"):
    """Follow a dotted path into nested dicts; a list is entered only by selecting one item by its
    fields, ``points[tokens=4096]`` (several: ``[tokens=4096,mode=eager]``). A position (``points.5``)
    is refused: it names a sweep point only while the sweep keeps its shape."""
    for name, select in split_path(field) if field else []:
        if isinstance(node, list) and name.lstrip("-").isdigit():
            raise KeyError(
                f"{prefix}{field!r} picks a list item by position ({name}); select it by its fields, "
                f"e.g. [tokens=4096], so that it keeps naming the same point when the sweep changes"
            )
        if not isinstance(node, dict) or name not in node:
            raise KeyError(f"{prefix}no field {name!r} (in {field!r}) in {where}")
        node = node[name]
        if select is not None:
            if not isinstance(node, list):
                raise KeyError(f"{prefix}{name}[{select}] in {field!r}: {name} is not a list in {where}")
            conditions = []
            for cond in select.split(","):
                k, eq, v = cond.partition("=")
                if not eq or not k.strip():
                    raise KeyError(f"{prefix}{name}[{select}] in {field!r}: a selector is [field=value,...]")
                conditions.append((k.strip(), v.strip()))
            found = [item for item in node if _matches(item, conditions)]
            if len(found) != 1:
                raise KeyError(
                    f"{prefix}{name}[{select}] in {field!r} matches {len(found)} items of {where}, not exactly one"
                )
            node = found[0]
    return node
