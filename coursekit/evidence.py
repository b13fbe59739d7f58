"""Where an evidence snippet (snippets/mNN/evidence.py) writes the files behind a chapter's figure.

An evidence snippet is a measured snippet like the others; besides its data it writes files a
reader opens in a tool (a profiler trace for ui.perfetto.dev, a memory snapshot for
pytorch.org/memory_viz, compile logs for tlparse, Triton's IR for a text editor), and its
``measure()`` lists them under ``data["artifacts"]`` (coursekit/results.py checks the list).
Each file's name starts with the snippet's key, ``m02/evidence`` -> ``m02-evidence-trace.json.gz``,
so a file names its snippet wherever it is saved.

The build job (coursekit/build.py) names a fresh folder per snippet process in ``COURSE_EVIDENCE_DIR``
and moves the listed files beside the result (``build_results/<set>/mNN/evidence/``). Run alone
(a reader's download), the files go to ``./evidence/<module>-<name>/`` in the current directory.

Standard library only and kept small: a snippet's download inlines it (coursekit/deps.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

EVIDENCE_ENV = "COURSE_EVIDENCE_DIR"


def artifact(key: str, suffix: str) -> Path:
    """The path to write one evidence file of snippet ``key`` to: ``<folder>/<module>-<name>-<suffix>``.
    The folder is the build job's (``COURSE_EVIDENCE_DIR``) or, run alone, ``./evidence/<module>-<name>/``,
    said on stderr."""
    stem = key.replace("/", "-")
    folder = os.environ.get(EVIDENCE_ENV)
    if folder:
        folder = Path(folder)
    else:
        folder = Path("evidence") / stem
        print(f"evidence file: {folder.resolve() / f'{stem}-{suffix}'}", file=sys.stderr)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stem}-{suffix}"
