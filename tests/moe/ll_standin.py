"""A minimal stand-in for the EP family's low-latency member (``simnode.ep.lowlatency``),
with its public surface on a shared ``Fabric``, for the MoE layer's tests while the member
is built: ``LowLatencySim(topology, plan, costs, *, fabric, name)``, ``prepare(kind)``,
``dispatch_rank(r, t)`` / ``combine_rank(r, t)`` (marking their phases), ``STEPS`` and
``steps_of(phases, kind)``.

Its kernels: launch, every rank's rows to each peer as one flow over the network (a record
per dispatch row, a BF16 row per combine row), then a barrier (every rank's statuses) and a
fixed copy or reduce; no mechanism of the real kernels, only their shape on the clock.
``install()`` puts it in ``sys.modules`` when the real member is not there, ``uninstall()``
takes it out.
"""

from __future__ import annotations

import sys
import types

import numpy as np

from simnode.ep.kernel import EPKernel

STEPS = ("launch", "quantize", "write", "status", "wait", "copy", "reduce")


def steps_of(phases: dict, kind: str) -> dict:
    """ns of each of ``STEPS`` in one rank's phases (named by their steps here)."""
    return {name: (phases[name][1] - phases[name][0]) if name in phases else 0.0 for name in STEPS}
COPY_NS = 1000.0


class LowLatencySim(EPKernel):
    def __init__(self, topology, plan, costs, *, fabric=None, name: str = "", **_):
        super().__init__(topology, plan, costs, name=name)
        self.fab = fabric
        self.attach(fabric.env, fabric.net, fabric.max_latency_ns)

    def prepare(self, kind: str) -> None:
        self.kind = kind
        pair = self.plan.pair_rows()
        self.rows = pair if kind == "dispatch" else pair.T
        self.row_bytes = float(self.plan.shape.record_bytes if kind == "dispatch"
                               else self.plan.shape.combine_row_bytes)

    def _run(self, r: int, t):
        env = self.env
        yield from self.kernel_start(self.kind, r, t)
        s = env.now
        peers = np.flatnonzero((self.rows[r] > 0) & (np.arange(len(self.rows)) != r))
        sends = [self.net.send(r, int(d), float(self.rows[r, d] * self.row_bytes)) for d in peers]
        if sends:
            yield env.all_of(sends)
        w = env.now
        yield from self.barrier(f"{self.name}.status", r, 100.0)
        yield env.timeout(COPY_NS)
        t.mark("launch", t.start_ns, s)
        t.mark("write", s, w)
        t.mark("wait", w, env.now - COPY_NS)
        t.mark("copy" if self.kind == "dispatch" else "reduce", env.now - COPY_NS, env.now)
        yield from self.kernel_end(self.kind, r, t)

    def dispatch_rank(self, r: int, t):
        yield from self._run(r, t)

    def combine_rank(self, r: int, t):
        yield from self._run(r, t)


NAME = "simnode.ep.lowlatency"


def install() -> bool:
    """Make ``simnode.ep.lowlatency`` this stand-in unless the member exists; whether it did."""
    try:
        import simnode.ep.lowlatency  # noqa: F401
    except ImportError:
        mod = types.ModuleType(NAME)
        mod.LowLatencySim, mod.STEPS, mod.steps_of = LowLatencySim, STEPS, steps_of
        sys.modules[NAME] = mod
        return True
    return False


def uninstall() -> None:
    """Take the stand-in out again (other tests see the tree as it is)."""
    if sys.modules.get(NAME) is not None and sys.modules[NAME].LowLatencySim is LowLatencySim:
        del sys.modules[NAME]
