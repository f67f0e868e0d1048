"""Run many workloads in worker processes, each as its plain JSON result.

``run_to_dict(task)`` runs one ``(topology_path, workload_path, sets)`` task and returns
``Result.to_dict()``; ``run_all(tasks, jobs)`` runs the distinct tasks once each, in
``jobs`` processes (0 = one per core, capped at the number of tasks), and returns
``{task: result_dict}``. Used by ``simnode validate`` and ``simnode regress``; a task is a
plain tuple so it pickles to the workers and serves as a dict key.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

#: (topology path, workload path, ("key=value", ...) overrides)
RunTask = tuple


def run_to_dict(task: RunTask) -> dict:
    """Run one task (named after the workload file's stem) and return its JSON record."""
    topology, workload, sets = task
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import RunOptions
    inputs = load_inputs(topology, workload, list(sets))
    return inputs.run(RunOptions(), name=Path(workload).stem).to_dict()


def run_all(tasks: list[RunTask], jobs: int = 0) -> dict:
    """Run each distinct task once, in parallel processes when more than one is asked for."""
    keys = list(dict.fromkeys(tasks))
    jobs = jobs or min(len(keys), os.cpu_count() or 1)
    if jobs > 1 and len(keys) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(keys))) as pool:
            return dict(zip(keys, pool.map(run_to_dict, keys)))
    return {k: run_to_dict(k) for k in keys}
