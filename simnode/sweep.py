"""Parameter sweeps: the cartesian grid of ``--param FIELD=V1,V2,...`` run in parallel.

``parse_params(["num_ranks=8,16"])`` -> {"num_ranks": [8, 16]}; ``grid(params)`` ->
the list of points (dicts, in the order the values were given, last field fastest);
``run_sweep(topology, workload, params, sets, jobs, executor=, address=)`` validates
every point first (a bad value fails before any run, exit 2), then runs them and
returns ``[(point, Result)]`` in grid order, with a progress bar on stderr when it is
a terminal. Field names are those of ``--set`` (workload fields, or
``topology.``-prefixed topology fields).

Executors (``EXECUTORS``): ``local`` runs ``jobs`` worker processes on this machine
(1: in this process); ``dask`` sends the points to a dask.distributed scheduler at
``address`` (HOST:PORT), or to a ``LocalCluster`` of ``jobs`` worker processes when no
address is given. dask is an optional extra (``pip install 'simnode[dask]'``),
imported only when asked for. Each point is a pure function of its files and
``--set`` values, so every executor returns the same results; workers read the files
by absolute path, so a remote cluster needs them at the same paths. Points start
last-first (results still come back in grid order): grids usually list sizes in
ascending order, and starting the biggest point first keeps it from running alone at
the end (EP8..EP128 on 2 processes: x1.1 faster than 1 process in grid order, more
last-first; benchmarks/bench_sweep.py).
"""

from __future__ import annotations

import itertools
import os
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from simnode.config.fields import did_you_mean
from simnode.config.overrides import assignment_text, parse_assignment
from simnode.errors import ConfigError, SimnodeError
from simnode.progress import Progress
from simnode.report.columns import align
from simnode.units import ns_to_us

EXECUTORS = ("local", "dask")
#: a scheduler address: [protocol://]host:port (host a name, IPv4 or [IPv6])
_ADDRESS = re.compile(r"([a-z]+://)?([\w.-]+|\[[0-9a-fA-F:]+\]):\d{1,5}")
DASK_CONNECT_TIMEOUT = "10s"     # a wrong --address fails after this, not after a hang


def parse_params(specs: list[str]) -> dict[str, list]:
    out: dict[str, list] = {}
    for spec in specs:
        key, raw = parse_assignment(spec, "--param")
        text = str(raw) if not isinstance(raw, list) else ",".join(map(str, raw))
        values = [parse_assignment(f"{key}={v.strip()}", "--param")[1]
                  for v in text.split(",") if v.strip() != ""]
        if not values:
            raise ConfigError("--param", key, raw, "a comma-separated list of one or more values")
        if len(set(map(repr, values))) < len(values):
            raise ConfigError("--param", key, raw, "distinct values (a point would run twice)")
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
    return inputs.run(RunOptions(), name=name)


def check_executor(executor: str, address: str | None) -> None:
    """Reject an unknown executor, an address without dask, or dask when not installed."""
    if executor not in EXECUTORS:
        raise ConfigError("--executor", "executor", executor, "one of " + ", ".join(EXECUTORS),
                          did_you_mean(str(executor), EXECUTORS))
    if address and executor != "dask":
        raise ConfigError("--address", "address", address,
                          "no address with --executor local (an address is for --executor dask)")
    if address is not None and not _ADDRESS.fullmatch(address):
        raise ConfigError("--address", "address", address,
                          "HOST:PORT of a dask scheduler (for example 10.0.0.5:8786 or "
                          "tcp://scheduler:8786)")
    if executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise SimnodeError("--executor dask needs dask.distributed, which is not installed: "
                               "pip install 'simnode[dask]' (or 'dask[distributed]')") from None


def run_sweep(topology: str, workload: str, params: dict[str, list], sets: list[str],
              jobs: int = 0, name: str = "sweep", executor: str = "local",
              address: str | None = None, progress: bool | None = None) -> list:
    """Run every point of ``grid(params)``; ``progress`` None = a bar only on a terminal."""
    from simnode.workloads.loader import load_inputs
    check_executor(executor, address)
    points = grid(params)
    tasks = []
    topology, workload = str(Path(topology).resolve()), str(Path(workload).resolve())
    if sets:
        load_inputs(topology, workload, list(sets))          # a bad --set is named as such
    for point in points:
        point_sets = list(sets) + [assignment_text(k, v) for k, v in point.items()]
        try:
            load_inputs(topology, workload, point_sets)      # validate before running anything
        except ConfigError as exc:
            if not exc.source.startswith("--set"):
                raise
            # the --set values passed alone, so the grid point is at fault: name --param
            raise ConfigError("--param", exc.key_path, exc.value, exc.expected, exc.hint) from None
        tasks.append((topology, workload, point_sets, name))
    jobs = min(jobs or os.cpu_count() or 1, len(tasks))     # never more workers than points
    with Progress(len(tasks), f"sweep ({executor})", enabled=progress) as bar:
        if executor == "dask":
            results = _run_dask(tasks, jobs, address, bar)
        elif jobs <= 1:
            results = []
            for t in tasks:
                results.append(_run_point(t))
                bar.advance()
        else:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(_run_point, t) for t in reversed(tasks)]
                for _ in as_completed(futures):
                    bar.advance()
                results = [f.result() for f in reversed(futures)]
    return list(zip(points, results))


def _run_dask(tasks: list, jobs: int, address: str | None, bar: Progress) -> list:
    """Run ``tasks`` on the scheduler at ``address`` (or a local cluster of ``jobs`` processes)."""
    from distributed import Client, LocalCluster, as_completed as dask_completed
    cluster = None
    try:
        if address:
            client = Client(address, timeout=DASK_CONNECT_TIMEOUT)
        else:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")     # any free port: never collide
            client = Client(cluster)
    except (OSError, ValueError, TimeoutError) as exc:
        raise SimnodeError(f"--address {address}: no dask scheduler answered ({exc})") from None
    try:
        futures = client.map(_run_point, tasks[::-1], pure=False)   # last-first, as local
        for _ in dask_completed(futures):
            bar.advance()
        return client.gather(futures)[::-1]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def format_sweep(rows: list) -> str:
    """A table: the swept fields, makespan, TFLOPS or bandwidths, bottleneck."""
    if not rows:
        return "(no points)"
    keys = list(rows[0][0])
    # the figures any point has (a fused MoE layer has no separate dispatch bandwidth)
    extra = list(dict.fromkeys(
        k for _, r in rows for k, v in r.details.items()
        if isinstance(v, float) and (k.endswith("_GBps") or k.endswith("_sim_over_bound"))))
    header = keys + ["makespan_us"] + (["tflops"] if rows[0][1].flops else []) + extra + ["bottleneck"]
    table = [header]
    for point, r in rows:
        line = [str(point[k]) for k in keys] + [f"{ns_to_us(r.makespan_ns):.2f}"]
        if r.flops:
            line.append(f"{r.tflops:.1f}")
        line += ["-" if k not in r.details else f"{r.details[k]:.3f}" if k.endswith("bound")
                 else f"{r.details[k]:.1f}" for k in extra]
        line.append(r.bottleneck)
        table.append(line)
    return align(table)
