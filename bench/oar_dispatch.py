"""Benchmark: ``bench/dispatch.py`` against the OAR test cluster (its own array as baseline).

    python bench/oar_dispatch.py [--cluster oar-ssh] [--tasks 100]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from dispatch import main  # noqa: E402

if __name__ == "__main__":
    main(default_cluster="oar-ssh", default_tasks=100)
