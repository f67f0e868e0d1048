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

from simnode.errors import SimnodeError

#: (topology path, workload path, ("key=value", ...) overrides)
RunTask = tuple


def run_to_dict(task: RunTask) -> dict:
    """Run one task (named after the workload file's stem) and return its JSON record."""
    topology, workload, sets = task
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import RunOptions
    inputs = load_inputs(topology, workload, list(sets))
    return inputs.run(RunOptions(), name=Path(workload).stem).to_dict()


def run_all(tasks: list[RunTask], jobs: int = 0, labels: list[str] | None = None) -> dict:
    """Run each distinct task once, in parallel processes when more than one is asked for.
    ``labels`` (one per task: the case or scenario it serves) name where a run-time user
    error (an impossible schedule, a deadlock) came from."""
    keys = list(dict.fromkeys(tasks))
    names: dict = {}
    for task, label in zip(tasks, labels or ()):
        names.setdefault(task, []).append(label)
    jobs = min(jobs or os.cpu_count() or 1, len(keys))
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run_to_dict, k) for k in keys]
            return {k: _result(k, f.result, names) for k, f in zip(keys, futures)}
    return {k: _result(k, lambda k=k: run_to_dict(k), names) for k in keys}


def _result(task: RunTask, get, names: dict) -> dict:
    try:
        return get()
    except SimnodeError as exc:
        if task not in names:
            raise
        raise SimnodeError(f"{' and '.join(dict.fromkeys(names[task]))}: {exc}") from None
