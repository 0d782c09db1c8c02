"""``cigri simulate --plot`` without matplotlib (issue 28): refused before the simulation
runs, not after it (a scenario ran 77 s and then refused)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CIGRI = str(Path(sys.executable).parent / "cigri")
# Ten of bench/scenarios/gricad_month.json's months (23 s each on a quiet machine) at once.
YEAR = {"seed": 3, "cycle_period": 30,
        "clusters": {"c1": {"cores": 640, "local_load": 0.5}, "c2": {"cores": 320, "local_load": 0.3}},
        "gricad": {"campaigns": 600, "users": ["alice", "bob", "carol"], "over_hours": 10_000, "max_tasks": 3000}}


def test_plot_without_matplotlib_is_refused_before_simulating(tmp_path: Path) -> None:
    missing = tmp_path / "site" / "matplotlib"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text('raise ImportError("No module named \'matplotlib\'")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(missing.parent), os.environ.get("PYTHONPATH", "")])}
    scenario = tmp_path / "year.json"
    scenario.write_text(json.dumps(YEAR))
    done = subprocess.run([CIGRI, "simulate", str(scenario), "--plot", str(tmp_path / "year.svg")], env=env,
                          capture_output=True, text=True, timeout=60)  # the simulation alone takes minutes
    assert (done.returncode, done.stderr) == (2, "cigri: --plot needs matplotlib: pip install 'cigri[sim]'\n")
    assert done.stdout == "" and not (tmp_path / "year.svg").exists()
