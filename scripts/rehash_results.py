"""Re-key stored results after a change to the *hash function*, never after a change to the code.

    python scripts/rehash_results.py [--dry-run]

A result's snippet_hash says which code produced it. When the way the hash is computed changes
(coursekit/results.py, coursekit/deps.py), every stored hash stops matching although no snippet
changed. This script proves, per result, that the code did not change: the snippet and every
project file whose definitions its hash covers are, at the git commit recorded in the result's
provenance, the same syntax tree as in the working tree. Only then does it store the new hash,
noting the migration in the provenance. The measured data are never touched. A result whose
code did change is left stale, as it must be.

Definitions that did not exist at the result's commit are accepted only if they are listed in
REFACTORED with the reason they did not change what was measured; the note says so.

It also upgrades schema version 1 (one process, no ``runs``) to the current version.
"""

import argparse
import ast
import datetime
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coursekit import deps  # noqa: E402
from coursekit import results as store  # noqa: E402

# Definitions moved out of code that existed before, with the commit that moved them and why the
# behaviour a snippet sees is the same. Extend this list only with such a refactor.
REFACTORED = {
    "coursekit/runner.py:call_measure": "extracted from runner.main (load the snippet as a module, "
    "call measure(small=...)); the same calls",
    "coursekit/runner.py:snippet_env": "extracted from build.run_one (PYTHONUNBUFFERED, PYTHONPATH, "
    "TRITON_INTERPRET only for small runs); the same environment",
}


def at_commit(commit: str, path: Path) -> str | None:
    rel = path.resolve().relative_to(store.ROOT)
    out = subprocess.run(
        ["git", "show", f"{commit}:{rel}"], capture_output=True, text=True, cwd=store.ROOT, check=False
    )
    return out.stdout if out.returncode == 0 else None


def same_code(commit: str, path: Path) -> bool:
    old = at_commit(commit, path)
    if old is None:
        return False
    canon = [deps.canonical(deps.strip_docstrings(ast.parse(src))) for src in (old, path.read_text())]
    return canon[0] == canon[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    status = 0
    for path in [p for hw in store.hardware_sets() for p in store.result_files(hw)]:
        doc = json.loads(path.read_text())
        rel = path.relative_to(store.ROOT)
        snippet = store.ROOT / doc["snippet"]
        current = store.snippet_hash(snippet)
        if doc["snippet_hash"] == current and doc.get("schema_version") == store.SCHEMA_VERSION:
            continue
        commit = doc["provenance"]["commit"]
        used = {d.path for d in deps.dependencies(snippet, extra=())} | {snippet}
        runner = store.ROOT / "coursekit" / "runner.py"
        # The runner's definitions are proven like the rest where runner.py is unchanged; where it
        # changed, only by the refactors listed above.
        refactored = (
            []
            if same_code(commit, runner)
            else sorted(
                f"{deps.relative(d.path)}:{d.name}"
                for d in deps.dependencies(snippet)
                if f"{deps.relative(d.path)}:{d.name}" in REFACTORED
            )
        )
        if not refactored:
            used.add(runner)  # unchanged (proven with the rest), or changed but not by a listed refactor (fails)
        unchanged = "+" not in commit and all(same_code(commit, f) for f in used)
        if not unchanged:
            print(f"stale, left as is: {rel} (code changed since {commit[:12]})")
            status = 1
            continue
        print(f"re-keyed: {rel} (code identical to {commit[:12]})")
        if args.dry_run:
            continue
        note = (
            f"{datetime.date.today()}: snippet_hash recomputed by scripts/rehash_results.py; the snippet and "
            f"{', '.join(sorted(deps.relative(f) for f in used if f != snippet)) or 'no project module'} "
            f"identical to commit {commit[:12]}"
        )
        if refactored:
            note += "; " + "; ".join(f"{r}: {REFACTORED[r]}" for r in refactored)
        if doc.get("schema_version") == 1:
            doc["schema_version"] = store.SCHEMA_VERSION
            doc["provenance"]["processes"] = 1
            note += "; schema 1 -> 2 (one process)"
        doc["provenance"]["rehashed"] = note
        doc["snippet_hash"] = current
        store.write_atomic(path, doc)
    return status


if __name__ == "__main__":
    sys.exit(main())
