"""The Grid Engine backend (Son of Grid Engine, Altair/Univa Grid Engine, Open Cluster Scheduler):
the batch base (:mod:`cigri.backends._batch`) with Grid Engine's commands over SSH
(:mod:`.commands`, on :mod:`cigri.backends._commands`).

A batch is one array job (``qsub -t 1-N``, :mod:`.batch`), and every operation is one command on
the front-end: one submit per batch, one poll for any number of tasks (qstat, then the
accounting records and traces of the tasks it no longer lists), one cancel (``qdel``), one
capacity (``qstat -f``); a group's status file and an output tail one more each, found through
the front-end's index. The site names, in the cluster's table, the ``queue`` of normal jobs, the
``best_effort_queue`` whose jobs it may kill (a slot-wise subordinate of the normal queue: a
killed task is read as preempted), the ``parallel_environment`` of a task of several slots, and
the ``memory_complex`` a job's memory is asked with (``h_vmem`` by default), per slot.

Identity (:mod:`cigri.backends.identity`): ``identity = "sudo"`` runs ``qsub``, ``qdel`` and
``tail`` as the job's login (``sudo -n -u LOGIN``); polls and capacity stay the account's.
"""

from __future__ import annotations

import re
from typing import Any

from cigri.backends._batch import BatchBackend
from cigri.backends._commands import Commands, open_ssh
from cigri.backends.gridengine import commands

DEFAULT_TIMEOUT = 30.0
REMOTE_ID = re.compile(r"[0-9]+\.[0-9]+(\+[0-9]+)?\Z")  # an array task (+ position in its group)


class GridEngineBackend(BatchBackend):
    """:class:`~cigri.backends.ClusterBackend` for a Grid Engine cluster."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        ssh = open_ssh(name, options, float(options.get("timeout", DEFAULT_TIMEOUT)))
        super().__init__(name, options, Commands(name, options, ssh, commands), REMOTE_ID)
