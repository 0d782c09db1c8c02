"""Benchmark: ``bench/dispatch.py`` against the Grid Engine test cluster (``qsub -t 1-N`` as baseline).

    python bench/gridengine_dispatch.py [--cluster gridengine-ssh] [--tasks 500]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from dispatch import main  # noqa: E402

if __name__ == "__main__":
    main(default_cluster="gridengine-ssh", default_tasks=500)
