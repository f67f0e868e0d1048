"""The one executor of runs: ``simnode run``, ``sweep``, ``validate``, ``regress`` and
``calibrate`` hand it parsed ``RunSpec``s (simnode.workloads.loader) and get their
``Result``s back, in order.

``execute(specs, jobs, executor="local", address=None, labels=None, progress=None)``:

- runs each distinct spec once (validation cases may share a run: ``RunSpec.key``);
- ``simnode run`` is one spec, in this process, with its ``RunOptions`` (a trace, the
  run's own progress line);
- ``local``: in this process when one job is asked for (or there is one run), else in a
  pool of ``jobs`` worker processes (0 = one per core, never more than runs); ``dask``:
  on the dask.distributed scheduler at ``address`` (HOST:PORT), or a ``LocalCluster`` of
  ``jobs`` processes. A spec pickles whole, so workers parse nothing (dask is an optional
  extra, imported only when asked for);
- starts the runs last-first (grids usually list sizes in ascending order; the biggest
  point started first does not run alone at the end) and returns them in the given order;
- draws a progress bar of finished runs (``progress``: None = on a terminal only);
- ``labels`` (one per spec: a case or scenario) name where a run's user error came from;
- on Ctrl-C stops the workers (they ignore SIGINT themselves, so only the parent reports
  it) and lets the ``KeyboardInterrupt`` reach the CLI, which prints one line (exit 130);
- SIGTERM (``kill PID``, a batch system's stop) takes the same path: while a command runs,
  ``simnode.runs.signals.sigterm_as_interrupt`` turns it into ``Terminated`` (a
  ``KeyboardInterrupt``), so the workers are stopped and partial output removed exactly as
  on Ctrl-C, and the CLI prints one line (exit 143). Workers restore SIGTERM's default,
  so the pool's own terminate() (which sends SIGTERM) still ends them at once.
"""

from __future__ import annotations

import os
import re
import signal

from simnode.config.fields import did_you_mean
from simnode.errors import ConfigError, SimnodeError
from simnode.progress import Progress

EXECUTORS = ("local", "dask")
#: a scheduler address: [protocol://]host:port (host a name, IPv4 or [IPv6])
_ADDRESS = re.compile(r"([a-z]+://)?([\w.-]+|\[[0-9a-fA-F:]+\]):\d{1,5}")
DASK_CONNECT_TIMEOUT = "10s"     # a wrong --address fails after this, not after a hang


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


def run_spec(spec, options=None):
    """One run in a worker (or here): the spec's result; ``options`` (a trace, a progress
    line) only for a run in this process."""
    from simnode.workloads.registry import RunOptions
    return spec.run(options or RunOptions())


def _ignore_sigint() -> None:
    """A worker's signals: Ctrl-C is the parent's to report; SIGTERM ends the worker at
    once (a forked worker inherits the parent's Terminated handler, which would make the
    pool's terminate() print a traceback from every worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def execute(specs: list, jobs: int = 0, executor: str = "local", address: str | None = None,
            labels: list[str] | None = None, progress: bool | None = None, title: str = "runs",
            options=None) -> list:
    """The results of ``specs``, in order (see the module docstring); ``options``
    (``RunOptions``: a trace, the run's own progress line) apply when the runs are here."""
    check_executor(executor, address)
    keys = list(dict.fromkeys(s.key for s in specs))
    first = {}
    for s in specs:
        first.setdefault(s.key, s)
    names: dict = {}
    for s, label in zip(specs, labels or ()):
        names.setdefault(s.key, []).append(label)
    unique = [first[k] for k in keys]
    jobs = min(jobs or os.cpu_count() or 1, len(unique))
    with Progress(len(unique), f"{title} ({executor})", enabled=progress) as bar:
        try:
            if executor == "dask":
                done = _dask(unique, jobs, address, bar)
            elif jobs <= 1:
                done = []
                for s in unique:
                    done.append(_tagged(s, options))
                    bar.advance()
            else:
                done = _pool(unique, jobs, bar)
        except SimnodeError as exc:
            key = getattr(exc, "spec_key", None)
            if key in names:
                raise SimnodeError(f"{' and '.join(dict.fromkeys(names[key]))}: {exc}") from None
            raise
    by_key = dict(zip(keys, done))
    return [by_key[s.key] for s in specs]


def _tagged(spec, options=None):
    """``run_spec`` whose user error carries the spec's key (to name its case or scenario)."""
    try:
        return run_spec(spec, options)
    except SimnodeError as exc:
        raise _KeyedError(str(exc), spec.key) from None


class _KeyedError(SimnodeError):
    def __init__(self, message: str, spec_key):
        super().__init__(message)
        self.spec_key = spec_key

    def __reduce__(self):
        return (type(self), (str(self), self.spec_key))


def _pool(specs: list, jobs: int, bar: Progress) -> list:
    """Run in ``jobs`` worker processes, last-first; Ctrl-C terminates them."""
    import multiprocessing              # only for a pool: a single run does not pay its import
    pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_ignore_sigint)
    try:
        pending = [pool.apply_async(_tagged, (s,), callback=lambda _: bar.advance())
                   for s in reversed(specs)]
        out = [p.get() for p in reversed(pending)]
        pool.close()
        return out
    finally:
        pool.terminate()                 # a no-op after close(); stops every worker otherwise
        pool.join()


def _dask(specs: list, jobs: int, address: str | None, bar: Progress) -> list:
    """Run on the scheduler at ``address`` (or a local cluster of ``jobs`` processes)."""
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
        futures = client.map(_tagged, specs[::-1], pure=False)   # last-first, as local
        for _ in dask_completed(futures):
            bar.advance()
        return client.gather(futures)[::-1]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
