"""The GPU build job's entry point; see coursekit/build.py (python scripts/build_results.py --help)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # works without `pip install -e .`

from coursekit.build import main  # noqa: E402

sys.exit(main())
