"""Re-key stored results after a change to the *hash function*, never after a change to the code.

    python scripts/rehash_results.py [--dry-run]

A result's snippet_hash says which code produced it. When the way the hash is computed changes
(coursekit/results.py), every stored hash stops matching although no snippet changed. This
script proves, per result, that the code did not change — the snippet and every module its hash
covers are, at the git commit recorded in the result's provenance, the same syntax tree as in
the working tree — and only then stores the new hash, noting the migration in the provenance.
The measured data are never touched. A result whose code did change is left stale, as it must be.
"""

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coursekit import results as store  # noqa: E402


def at_commit(commit: str, path: Path) -> str | None:
    rel = path.resolve().relative_to(store.ROOT)
    out = subprocess.run(["git", "show", f"{commit}:{rel}"], capture_output=True, text=True, cwd=store.ROOT)
    return out.stdout if out.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    status = 0
    for path in sorted(store.RESULTS_DIR.rglob("*.json")):
        doc = store.load(path)
        snippet = store.ROOT / doc["snippet"]
        current = store.snippet_hash(snippet)
        if doc["snippet_hash"] == current:
            continue
        commit = doc["provenance"]["commit"]
        files = [snippet] + store._local_imports(snippet, snippet.read_text())
        same = "+" not in commit and all(
            (old := at_commit(commit, f)) is not None
            and store._normalized_ast(old) == store._normalized_ast(f.read_text())
            for f in files
        )
        if not same:
            print(f"stale, left as is: {path.relative_to(store.ROOT)} (code changed since {commit[:12]})")
            status = 1
            continue
        print(f"re-keyed: {path.relative_to(store.ROOT)} (code identical to {commit[:12]})")
        if not args.dry_run:
            doc["provenance"]["rehashed"] = (
                f"{datetime.date.today()}: snippet_hash recomputed by "
                f"scripts/rehash_results.py; code identical to commit {commit[:12]}"
            )
            doc["snippet_hash"] = current
            store.write_atomic(path, doc)
    return status


if __name__ == "__main__":
    sys.exit(main())
