"""Benchmark: ``bench/dispatch.py`` against the Slurm test cluster (``sbatch --array`` as baseline).

    python bench/slurm_dispatch.py [--cluster slurm-a-ssh] [--tasks 500]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from dispatch import main  # noqa: E402

if __name__ == "__main__":
    main(default_cluster="slurm-a-ssh", default_tasks=500)
