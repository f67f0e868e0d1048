"""Parameter sweeps: the cartesian grid of ``--param FIELD=V1,V2,...`` run in parallel.

``parse_params(["num_ranks=8,16"])`` -> {"num_ranks": [8, 16]}; ``grid(params)`` ->
the list of points (dicts, in the order the values were given, last field fastest);
``run_sweep(topology, workload, params, sets, jobs)`` validates every point first
(a bad value fails before any run, exit 2), then runs them in ``jobs`` worker
processes and returns ``[(point, Result)]`` in grid order. Field names are those of
``--set`` (workload fields, or ``topology.``-prefixed topology fields).
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor

from simnode.config.overrides import parse_assignment
from simnode.errors import ConfigError
from simnode.report.columns import align
from simnode.units import ns_to_us


def parse_params(specs: list[str]) -> dict[str, list]:
    out: dict[str, list] = {}
    for spec in specs:
        key, raw = parse_assignment(spec, "--param")
        text = str(raw) if not isinstance(raw, list) else ",".join(map(str, raw))
        values = [parse_assignment(f"{key}={v.strip()}", "--param")[1]
                  for v in text.split(",") if v.strip() != ""]
        if not values:
            raise ConfigError("--param", key, raw, "a comma-separated list of one or more values")
        if key in out:
            raise ConfigError("--param", key, raw, "each field at most once")
        out[key] = values
    if not out:
        raise ConfigError("--param", "", "<none>", "at least one --param FIELD=V1,V2,...")
    return out


def grid(params: dict[str, list]) -> list[dict]:
    keys = list(params)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(params[k] for k in keys))]


def _run_point(args):
    topology, workload, sets, name = args
    from simnode.workloads.loader import load_inputs
    from simnode.workloads.registry import RunOptions
    inputs = load_inputs(topology, workload, sets)
    return inputs.kind.run(inputs.topology, inputs.params, RunOptions(), name=name)


def run_sweep(topology: str, workload: str, params: dict[str, list], sets: list[str],
              jobs: int = 0, name: str = "sweep") -> list:
    from simnode.workloads.loader import load_inputs
    points = grid(params)
    tasks = []
    for point in points:
        point_sets = list(sets) + [f"{k}={v}" for k, v in point.items()]
        load_inputs(topology, workload, point_sets)          # validate before running anything
        tasks.append((topology, workload, point_sets, name))
    jobs = jobs or min(len(tasks), os.cpu_count() or 1)
    if jobs <= 1:
        results = [_run_point(t) for t in tasks]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_run_point, tasks))
    return list(zip(points, results))


def format_sweep(rows: list) -> str:
    """A table: the swept fields, makespan, TFLOPS or bandwidths, bottleneck."""
    if not rows:
        return "(no points)"
    keys = list(rows[0][0])
    extra = [k for k, v in rows[0][1].details.items()
             if isinstance(v, float) and (k.endswith("_GBps") or k.endswith("_sim_over_bound"))]
    header = keys + ["makespan_us"] + (["tflops"] if rows[0][1].flops else []) + extra + ["bottleneck"]
    table = [header]
    for point, r in rows:
        line = [str(point[k]) for k in keys] + [f"{ns_to_us(r.makespan_ns):.2f}"]
        if r.flops:
            line.append(f"{r.tflops:.1f}")
        line += [f"{r.details[k]:.3f}" if k.endswith("bound") else f"{r.details[k]:.1f}" for k in extra]
        line.append(r.bottleneck)
        table.append(line)
    return align(table)
