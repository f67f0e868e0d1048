"""The low-latency member on the clock: its two forms against each other, the gating of
every receiver by the slowest AIV of every source, conservation, the breakdown, the shared
fabric a MoE layer drives, and the link loop's two speeds."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from simnode.config.topology import load_topology
from simnode.ep.deepep import build_fabric
from simnode.ep.lowlatency import STEPS, LowLatencySim, steps_of
from simnode.ep.lowlatency_costs import LowLatencyCosts
from simnode.ep.lowlatency_links import link_walk
from simnode.ep.lowlatency_plan import LLShape, build_plan
from simnode.ep.phase import RankTimes
from simnode.ep.routing import route_supernode

ROOT = Path(__file__).resolve().parents[2]
#: the family's constants as the presets state them; remote_write_ns the A3 path's LL fit
COSTS = dict(kernel_launch_ns=1900, remote_store_ns=110, reduce_ops_per_element=3,
             quant_ops_per_element=7, remote_read_ns=0)


def setup(chip: str, R: int, remote_write_ns: float, port=None, T: int = 128, **supernode):
    """(topology, plan, costs) of the published shape on the A3 or the 950."""
    name = {"a3": "atlas900-a3-superpod", "950": "atlas950-supernode"}[chip]
    topo = load_topology(ROOT / "topologies" / f"{name}.yaml")
    sn = dataclasses.replace(topo.supernode, num_ranks=R, **supernode,
                             **({"port_bandwidth_GBps": port} if port else {}))
    topo = dataclasses.replace(topo, supernode=sn)
    A = topo.chip.num_ai_cores * topo.chip.aiv_per_core
    shape = LLShape(R, T, T, 7168, 8, 256, A, "int8" if chip == "a3" else "mxfp8")
    plan = build_plan(route_supernode(T, 256, 8, R, "uniform", 0), shape)
    return topo, plan, LowLatencyCosts(**COSTS, remote_write_ns=remote_write_ns)


def mean_us(topo, plan, costs, kind, **kw):
    return float(LowLatencySim(topo, plan, costs, **kw).run(kind).kernel_ns.mean()) / 1000


# -- one schedule, two forms ------------------------------------------------------------------
@pytest.mark.parametrize("chip, R, rwn, port, tol_dispatch, tol_combine", [
    ("a3", 8, 3529.32, 50.3832, 0.01, 0.04),     # latency-bound (the A3 path's calibration)
    ("950", 8, 0.0, None, 0.01, 0.02),           # the 950's default reading: bandwidth-bound
])
def test_the_chains_form_holds_to_a_flow_per_write(chip, R, rwn, port, tol_dispatch, tol_combine):
    """The fast form (every chain ahead of the clock, writes sharing their path's links in a
    FIFO fluid loop) against a flow per write on the engine (max-min). Measured at 128 tokens:
    dispatch within 0.5%; combine within 3% at these sizes (docs/low-latency.md's table of the
    two forms, generated from runs of both, has each figure): the loop keeps a synchronized convoy of write-backs together longer than
    max-min sharing does, so its combine errs slow where rows converge (docs/low-latency.md)."""
    topo, plan, costs = setup(chip, R, rwn, port)
    for kind, tol in (("dispatch", tol_dispatch), ("combine", tol_combine)):
        fast = mean_us(topo, plan, costs, kind)
        exact = mean_us(topo, plan, costs, kind, form="per_write")
        assert fast == pytest.approx(exact, rel=tol), kind


def test_the_urma_what_if_forms_agree():
    # the engine as topologies/calibrated/deepep-peer-cost.yaml has it (the band's one end)
    topo, plan, costs = setup("950", 8, 0.0, wqe_processing_ns=43.3296,
                              urma_wqe_ns_per_peer=0.0844331)
    for kind in ("dispatch", "combine"):
        fast = mean_us(topo, plan, costs, kind, transport="urma")
        exact = mean_us(topo, plan, costs, kind, transport="urma", form="per_write")
        assert fast == pytest.approx(exact, rel=0.01), kind


def test_the_link_loop_runs_the_same_interpreted_and_compiled():
    rng = np.random.default_rng(3)
    W, C = 600, 40
    chain = np.sort(rng.integers(0, C, W))
    step = np.arange(W) - np.searchsorted(chain, chain)   # each write's place in its chain
    links = np.stack([chain // 8, 5 + rng.integers(0, 5, W)], axis=1)
    links[rng.random(W) < 0.1] = -1                       # some local writes
    shuffle = rng.permutation(W)                          # the writes come in any order
    chain, step, links = chain[shuffle], step[shuffle], links[shuffle]
    args = (chain, step, np.zeros(C), rng.uniform(100, 900, W), np.full(W, 97.0), np.full(W, 7404.0),
            np.full(W, 95.0), rng.uniform(0, 4000, W), links, np.full(10, 300.0))
    slow = link_walk(*args, compiled=False)
    fast = link_walk(*args, compiled=True)
    for a, b in zip(slow, fast):
        assert np.array_equal(a, b)


def test_alone_a_write_streams_at_its_rate_and_shared_links_split_evenly():
    # two chains of one write each on one link of 100 B/ns, each at most 80 B/ns alone
    one = link_walk(np.array([0]), np.array([0]), np.zeros(1), np.zeros(1), np.zeros(1), np.array([800.0]),
                    np.array([80.0]), np.zeros(1), np.array([[0]]), np.array([100.0]))
    assert one[1][0] == pytest.approx(10.0)
    two = link_walk(np.array([0, 1]), np.array([0, 0]), np.zeros(2), np.zeros(2), np.zeros(2), np.full(2, 800.0),
                    np.full(2, 80.0), np.zeros(2), np.array([[0], [0]]), np.array([100.0]))
    assert two[1] == pytest.approx([16.0, 16.0])        # 50 B/ns each


# -- mechanism ----------------------------------------------------------------------------------
class _SlowAiv(LowLatencySim):
    """One AIV of rank 0 prepares its first row 50 us late."""

    def prepare(self, kind):
        super().prepare(kind)
        k = self._k
        first = np.flatnonzero((k.chain == 3) & (k.step == 0))    # chain 3: rank 0's AIV 3
        k.stage = k.stage.copy()
        k.stage[first] += 50_000.0
        if self.form == "chains":
            self.prepare_chains()


def test_the_slowest_aiv_of_every_source_gates_every_receiver():
    topo, plan, costs = setup("a3", 8, 3529.32, 50.3832)
    base = LowLatencySim(topo, plan, costs).run("dispatch").kernel_ns
    slow = _SlowAiv(topo, plan, costs).run("dispatch").kernel_ns
    # every rank waits for rank 0's late statuses, not rank 0 alone: all move by about the
    # same (the 50 us less the slack that AIV had)
    late = slow - base
    assert (late > 30_000).all() and np.ptp(late) < 2_000


def test_steps_add_up_to_each_ranks_kernel_time_and_bytes_are_conserved():
    topo, plan, costs = setup("950", 8, 0.0)
    for kind in ("dispatch", "combine"):
        pr = LowLatencySim(topo, plan, costs).run(kind)      # (the frame checks the bytes)
        for t in pr.ranks:
            steps = steps_of(t.phases, kind)
            assert set(steps) == set(STEPS)
            assert sum(steps.values()) == pytest.approx(t.end_ns - t.start_ns, rel=1e-9)
        assert pr.payload_bytes == pytest.approx(plan.traffic(kind).sum())


def test_the_same_inputs_give_the_same_times():
    topo, plan, costs = setup("950", 8, 0.0)
    a = LowLatencySim(topo, plan, costs).run("combine").kernel_ns
    b = LowLatencySim(topo, plan, costs).run("combine").kernel_ns
    assert np.array_equal(a, b)


def test_a_moe_layer_can_drive_the_ranks_on_a_shared_fabric():
    """The surface ``simnode.moe.layer`` uses for the normal kernels: ``fabric=``, ``name=``,
    each rank's ``dispatch_rank`` / ``combine_rank`` on one clock, ``barrier_wait_ns``."""
    topo, plan, costs = setup("950", 8, 0.0)
    alone = {k: LowLatencySim(topo, plan, costs).run(k).kernel_ns for k in ("dispatch", "combine")}
    fab = build_fabric(topo, plan.num_aiv, 0.0)
    sims = {k: LowLatencySim(topo, plan, costs, fabric=fab, name=f"mb0.{k}")
            for k in ("dispatch", "combine")}
    times = {k: [RankTimes() for _ in range(8)] for k in sims}
    for k, sim in sims.items():               # one kernel after the other on the one clock
        body = sim.dispatch_rank if k == "dispatch" else sim.combine_rank
        for r in range(8):
            fab.env.process(body(r, times[k][r]))
        fab.env.run()
        got = np.array([t.end_ns - t.start_ns for t in times[k]])
        assert got == pytest.approx(alone[k], rel=1e-9)
        assert sim.barrier_wait_ns.shape == (8,)


def test_successive_calls_alternate_window_halves():
    _, plan, _ = setup("950", 8, 0.0)
    nxt = plan.next_call()
    assert (plan.half, nxt.half, nxt.next_call().half) == (0, 1, 0)
    a, b = plan.window_offsets(plan.dispatch), nxt.window_offsets(nxt.dispatch)
    half = plan.shape.window().half
    assert (a < half).all() and (b >= half).all()
    assert nxt.state_base() - plan.state_base() == 500 * 1024
