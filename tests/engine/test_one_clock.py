"""One clock: a chip kernel and a network message that share one rank's HBM slow each other
down exactly as the HBM's policy says (max-min fair or first come, first served)."""

from __future__ import annotations

import dataclasses

import pytest
import simpy

from simnode.config.topology import load_topology
from simnode.hardware.chip import ChipSim
from simnode.instr import isa
from simnode.instr.schedule import CoreProgram, KernelSchedule
from simnode.network.flows import FlowNetwork
from simnode.config.supernode import SupernodeSpec
from simnode.network.urma import RankEndpoints
from tests.conftest import REPO_ROOT

HBM = 200.0          # GB/s: below the chip's 165 GB/s copy plus the 400 GB/s message
PORT = 400.0         # GB/s of wire per rank
COPY = 1_000_000     # bytes the chip reads from HBM (an L2 miss: no region to hit)
MSG = 2_000_000      # bytes the message carries


def spec() -> SupernodeSpec:
    return SupernodeSpec(num_ranks=2, ports_per_rank=1, port_bandwidth_GBps=PORT, leaf_radix=4,
                         spine_radix=4, num_spines=0, oversubscription=1.0, routing="spray",
                         hop_latency_ns=0.0, link_latency_ns=0.0, mtu_bytes=4096,
                         header_bytes_per_packet=0, wqe_processing_ns=0.0, doorbell_ns=0.0,
                         wqebb_bytes=64, source="test")


def run(policy: str, copy: bool = True, message: bool = True) -> dict:
    """Times (ns) at which the copy streamed its last byte and the message arrived."""
    chip_spec = load_topology(REPO_ROOT / "topologies" / "ascend950dt.yaml").chip
    chip_spec = dataclasses.replace(chip_spec, memory=dataclasses.replace(
        chip_spec.memory, hbm_bandwidth_GBps=HBM))
    env = simpy.Environment()
    net = FlowNetwork(env, spec())
    ends = RankEndpoints(net, HBM, hbm_fcfs=policy == "fcfs")
    chip = ChipSim(chip_spec, env, net.share, name="rank0", hbm=int(ends.hbm[0]))
    out = {}
    if copy:
        prog = CoreProgram(0, {("aic", "mte2"): [isa.Copy("gm_to_l1", COPY, None, "notalloc")]})
        done, crun = chip.launch(KernelSchedule("probe", [prog]))
        done.callbacks.append(lambda _e: out.__setitem__("copy", crun.end_ns))
    if message:
        tr = ends.send(0, 1, MSG, descriptor_bytes=0, wqes=1)
        tr.callbacks.append(lambda _e: out.__setitem__("message", env.now))
    env.run()
    return out


def expected(x_copy: float, x_msg: float) -> dict:
    """Both run at the given rates until the first ends; then the other alone at its own
    limit (the copy's path rate, or the message's port), all through the one HBM."""
    base = chip_base_ns()
    path = chip_path_GBps()
    t_copy, t_msg = COPY / x_copy, MSG / x_msg
    if t_copy <= t_msg:
        left = MSG - x_msg * t_copy
        return {"copy": t_copy + base, "message": t_copy + left / min(PORT, HBM)}
    left = COPY - x_copy * t_msg
    return {"copy": t_msg + left / min(path, HBM) + base, "message": t_msg}


def chip_path_GBps() -> float:
    chip = load_topology(REPO_ROOT / "topologies" / "ascend950dt.yaml").chip
    p = chip.paths["gm_to_l1"]
    return p.bandwidth_B_per_cycle * chip.aic_freq_GHz


def chip_base_ns() -> float:
    chip = load_topology(REPO_ROOT / "topologies" / "ascend950dt.yaml").chip
    return chip.paths["gm_to_l1"].base_latency_cycles / chip.aic_freq_GHz


def test_each_alone_runs_at_its_own_limit():
    path = chip_path_GBps()
    assert run("fair", message=False)["copy"] == pytest.approx(COPY / path + chip_base_ns())
    assert run("fair", copy=False)["message"] == pytest.approx(MSG / min(PORT, HBM))


def test_fair_hbm_gives_both_the_same_rate():
    # max-min: copy x and message x (wire = payload here) fill HBM together: 2x = 200
    got = run("fair")
    assert got == pytest.approx(expected(HBM / 2, HBM / 2))
    assert got["copy"] > run("fair", message=False)["copy"]


def test_fcfs_hbm_serves_each_in_proportion_to_what_it_offers():
    # offered with HBM unlimited: the copy its path rate, the message its port; both scaled
    # by HBM / total offered
    path = chip_path_GBps()
    scale = HBM / (path + PORT)
    got = run("fcfs")
    assert got == pytest.approx(expected(path * scale, PORT * scale))
    fair = run("fair")
    assert got["copy"] > fair["copy"] and got["message"] < fair["message"]
