"""Lower bounds of a tile program's run, and the bottleneck they predict.

``bounds(chip, schedule, builder)`` returns, in ns:

- ``compute_ns``: the MMADs at the cube's peak rate over all AI cores (facts 1.2);
- ``vector_ns``: all vector work at the chip's vector rates over all AIVs;
- ``pipe_ns``: the busiest single pipe's own work (copies at their path rate, MMADs and
  vector ops at their rates; a pipe is in order, so nothing overlaps inside it), and
  ``pipe``, which one;
- ``hbm_ns``: the kernel's unique GM bytes (every tensor read once, every tensor written
  once; TileKernels counts its inputs and outputs the same way) over HBM bandwidth;
- ``l2_ns``: every GM copy's bytes over L2 bandwidth (all GM traffic passes L2);
- ``bound_ns``: their maximum; ``bound_term``, the one that binds, named as a result names
  its bottleneck; and the intensities: vector ops (lanes of full-rate VF instructions, 64
  each) and FLOP per unique HBM byte against the chip's balance points (the rate over HBM
  bandwidth).
"""

from __future__ import annotations

import math

from simnode.config.chip import DTYPE_BITS, GM_PATHS
from simnode.instr import isa


def _durations(chip):
    f = chip.aic_freq_GHz
    fv = chip.aiv_freq_GHz
    sat = chip.cube.saturating_m_rows
    macs = chip.cube.macs_per_cycle
    paths = chip.paths

    def dur(ins, unit) -> float:
        t = type(ins)
        if t is isa.Copy or t is isa.Fixpipe:
            p = paths[ins.path]
            size = ins.size_bytes if t is isa.Copy else ins.m * ins.n * DTYPE_BITS[ins.out_dtype] // 8
            return max(size / p.bandwidth_B_per_cycle, p.min_issue_interval_cycles) / f
        if t is isa.Mmad:
            k0 = macs[ins.dtype] // 256
            return math.ceil(max(ins.m, sat) / 16) * math.ceil(ins.n / 16) * math.ceil(ins.k / k0) / f
        if t is isa.VecOp:
            return chip.vector.cycles(ins) / (f if unit == "aic" else fv)
        if t is isa.Scalar:
            return ins.cycles / (f if unit == "aic" else fv)
        if t is isa.Delay:
            return ins.time_ns
        return 0.0
    return dur


def bounds(chip, sched, builder) -> dict:
    dur = _durations(chip)
    cache: dict = {}
    busiest, busiest_ns = "", 0.0
    vector_total = 0.0
    vec_ops = 0.0
    gm_bytes = 0
    # vector work in lanes of full-rate VF instructions: 64 per instruction at the chip's
    # issue rate (config.vector); element-wise classes scaled by their rates to that unit
    rate_ref = chip.vector.ops_per_cycle["vf_alu"] * chip.vector.issue_rate()
    for prog in sched.cores:
        for (unit, pipe), instrs in prog.pipes.items():
            total = 0.0
            for ins in instrs:
                t = type(ins)
                if t is isa.Copy or t is isa.Fixpipe:
                    if ins.path in GM_PATHS:
                        gm_bytes += ins.size_bytes if t is isa.Copy else ins.m * ins.n * DTYPE_BITS[ins.out_dtype] // 8
                    total += dur(ins, unit)
                    continue
                d = cache.get(id(ins))
                if d is None:
                    d = cache[id(ins)] = dur(ins, unit)
                total += d
                if t is isa.VecOp:
                    vec_ops += ins.ops if ins.op_class == "vf_alu" else \
                        ins.ops * rate_ref / chip.vector.ops_per_cycle[ins.op_class] \
                        if ins.op_class in chip.vector.ops_per_cycle else ins.ops
            if pipe == "v":
                vector_total += total
            if total > busiest_ns:
                busiest, busiest_ns = f"{'aic' if unit == 'aic' else 'aiv'}.{pipe}", total
    f = chip.aic_freq_GHz
    cores = chip.num_ai_cores
    compute_ns = sum(m * n * k / chip.cube.macs_per_cycle[dt] for m, n, k, dt in builder.gemms) / f / cores
    vector_ns = vector_total / (cores * chip.aiv_per_core)
    hbm_bytes = sum(t.nbytes * (int(t.read) + int(t.written)) for t in builder.tensors.values())
    hbm_ns = hbm_bytes / chip.memory.hbm_bandwidth_GBps
    l2_ns = gm_bytes / chip.memory.l2_bandwidth_GBps
    terms = {"compute_ns": (compute_ns, isa.PIPE_NAMES["aic.m"]), "vector_ns": (vector_ns, isa.PIPE_NAMES["aiv.v"]),
             "pipe_ns": (busiest_ns, isa.PIPE_NAMES.get(busiest, busiest)),
             "hbm_ns": (hbm_ns, "HBM bandwidth"), "l2_ns": (l2_ns, "L2 bandwidth")}
    term = max(terms, key=lambda k: (terms[k][0], k == "pipe_ns"))
    dt = builder.gemms[0][3] if builder.gemms else "bf16"
    peak_flop_per_ns = 2 * chip.cube.macs_per_cycle[dt] * f * cores
    vec_rate = rate_ref * chip.aiv_freq_GHz * cores * chip.aiv_per_core
    hbm_bw = chip.memory.hbm_bandwidth_GBps
    return {"compute_ns": compute_ns, "vector_ns": vector_ns, "pipe_ns": busiest_ns, "pipe": busiest,
            "hbm_ns": hbm_ns, "l2_ns": l2_ns, "bound_ns": terms[term][0], "bound_term": term,
            "predicted_bottleneck": terms[term][1], "hbm_unique_bytes": hbm_bytes,
            "gm_copy_bytes": gm_bytes,
            "intensity_vec_ops_per_B": vec_ops / hbm_bytes if hbm_bytes else 0.0,
            "balance_vec_ops_per_B": vec_rate / hbm_bw,
            "intensity_flop_per_B": builder.flops / hbm_bytes if hbm_bytes else 0.0,
            "balance_flop_per_B": peak_flop_per_ns / hbm_bw}
