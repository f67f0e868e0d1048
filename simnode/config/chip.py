"""Chip specification: the frozen record every hardware model reads.

``ChipSpec`` (cores, clocks, cube and vector rates, buffer capacities, copy paths,
L2, HBM, sync resources) is built by ``load_chip(path)`` or ``chip_from_mapping``.
Numbers carry their unit in their name; per-cycle rates are in the AIC clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from simnode.config.fields import Reader, load_yaml
from simnode import units

DTYPES = ("bf16", "fp16", "fp8", "fp4")
DTYPE_BITS = MappingProxyType({"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp4": 4})

#: Copy paths of the AI core (facts 1.4); every chip file must give each of them.
PATH_NAMES = ("gm_to_l1", "gm_to_ub", "ub_to_gm", "ub_to_l1", "l1_to_l0", "l1_to_l0_scale",
              "l0c_to_ub", "l0c_to_ub_dual", "l0c_to_gm")
#: Paths that read or write global memory and so go through L2 (and HBM on a miss).
GM_PATHS = frozenset({"gm_to_l1", "gm_to_ub", "ub_to_gm", "l0c_to_gm"})
#: vector op classes, each a rate in fp32 element-ops per cycle: "simple", "div", "special" are
#: sustained rates of element-wise work (facts 1.2, S8); "vf_alu" prices ALU instructions of a
#: vector function counted one by one from a kernel's source, 64 fp32 lanes per instruction
VECTOR_OP_CLASSES = ("simple", "div", "special", "vf_alu")


#: the most AI cores a chip file may have: 32x the 950DT's 32 (facts 1.1), room for any
#: what-if, and a bound on the per-core state a run holds (each core is a SimPy process)
MAX_AI_CORES = 1024


@dataclass(frozen=True)
class PathSpec:
    """One copy path: a copy costs base latency + bytes / bandwidth (facts 3.6)."""
    name: str
    bandwidth_B_per_cycle: float      #: streaming rate of one issuing pipe, bytes per AIC cycle
    base_latency_cycles: float        #: latency from issue to completion, beyond the streaming time
    min_issue_interval_cycles: float  #: smallest time between two issues on one pipe


@dataclass(frozen=True)
class BufferSpec:
    l0a_KiB: float   #: cube A input
    l0b_KiB: float   #: cube B input
    l0c_KiB: float   #: fp32 accumulator
    l1_KiB: float    #: AIC L1 (CBuf)
    ub_KiB: float    #: unified buffer, per AIV

    def capacity_bytes(self, name: str) -> int:
        return units.KiB_to_bytes(getattr(self, f"{name}_KiB"))


@dataclass(frozen=True)
class CubeSpec:
    macs_per_cycle: Mapping[str, int]   #: MMAD multiply-accumulates per AIC cycle, by input dtype
    mmad_latency_cycles: float          #: completion latency of one MMAD beyond its compute cycles
    saturating_m_rows: int              #: smallest MMAD m that reaches the full rate; smaller m costs as much

    def fractal_k(self, dtype: str) -> int:
        """K elements per 16x16 output fractal step: 16 bf16, 32 fp8, 64 fp4 (facts 1.3)."""
        return self.macs_per_cycle[dtype] // 256


@dataclass(frozen=True)
class VectorSpec:
    ops_per_cycle: Mapping[str, float]  #: sustained fp32 element-ops per cycle per AIV, by op class
    ub_bandwidth_B_per_cycle: float     #: vector register file <-> UB bytes per cycle per AIV
    fp4_decode_B_per_cycle: float       #: FP4 decode throughput per AIV


HBM_ARBITRATION = ("fcfs", "fair")


@dataclass(frozen=True)
class MemorySpec:
    l2_capacity_MiB: float
    l2_bandwidth_GBps: float
    hbm_capacity_GB: float
    hbm_bandwidth_GBps: float
    #: how HBM shares itself among overloading users: "fcfs" (in proportion to the load each
    #: offers) or "fair" (max-min: a small user keeps its demand). Used by the supernode flow
    #: model, where URMA meets the AIVs; a chip's cores offer alike, so both agree there.
    hbm_arbitration: str = "fair"

    @property
    def l2_capacity_bytes(self) -> int:
        return units.MiB_to_bytes(self.l2_capacity_MiB)


@dataclass(frozen=True)
class SyncSpec:
    pipe_events_per_pair: int         #: set/wait event ids per (src pipe, dst pipe) pair
    cross_core_flags: int             #: AIC<->AIV flag ids per AIV
    mte2_outstanding_per_aiv: int     #: issued-but-incomplete MTE2 requests per AIV
    mte2_outstanding_per_aic: int     #: the same limit on the AIC's MTE2


@dataclass(frozen=True)
class ChipSpec:
    name: str
    source: str                       #: file it was read from
    num_ai_cores: int                 #: AI cores (1 AIC + aiv_per_core AIVs each)
    aiv_per_core: int
    aic_freq_GHz: float
    aiv_freq_GHz: float
    scalar_cycles_per_instr: float
    cube: CubeSpec
    vector: VectorSpec
    buffers: BufferSpec
    paths: Mapping[str, PathSpec] = field(repr=False)
    memory: MemorySpec = None
    sync: SyncSpec = None

    def path(self, name: str) -> PathSpec:
        return self.paths[name]

    def peak_tflops(self, dtype: str) -> float:
        flop_per_ns = 2 * self.cube.macs_per_cycle[dtype] * self.aic_freq_GHz * self.num_ai_cores
        return units.tflops(flop_per_ns, 1.0)


def chip_from_mapping(data: dict, source: str) -> ChipSpec:
    """Validate a raw chip mapping (the ``chip:`` section of a topology file)."""
    r = Reader(data, source, "chip")
    name = r.string("name")
    num_ai_cores = r.integer("num_ai_cores", min_value=1, max_value=MAX_AI_CORES)
    aiv_per_core = r.integer("aiv_per_core", min_value=1, max_value=2)
    aic_freq = r.number("aic_freq_GHz", positive=True)
    aiv_freq = r.number("aiv_freq_GHz", positive=True)
    scalar = r.number("scalar_cycles_per_instr", positive=True)

    c = r.section("cube")
    m = c.section("macs_per_cycle")
    macs = {dt: m.integer(dt, min_value=1) for dt in DTYPES}
    for dt, n in macs.items():
        if n % 256:     # a 16 x 16 output fractal times whole K elements per step (facts 1.2)
            raise m.error(dt, n, "a multiple of 256 (16 x 16 outputs x K elements per cycle)")
    m.finish()
    cube = CubeSpec(MappingProxyType(macs), c.number("mmad_latency_cycles", min_value=0),
                    c.integer("saturating_m_rows", min_value=1))
    c.finish()

    v = r.section("vector")
    o = v.section("ops_per_cycle")
    ops = {k: o.number(k, positive=True) for k in VECTOR_OP_CLASSES}
    o.finish()
    vector = VectorSpec(MappingProxyType(ops), v.number("ub_bandwidth_B_per_cycle", positive=True),
                        v.number("fp4_decode_B_per_cycle", positive=True))
    v.finish()

    b = r.section("buffers")
    buffers = BufferSpec(**{f"{n}_KiB": b.number(f"{n}_KiB", positive=True)
                            for n in ("l0a", "l0b", "l0c", "l1", "ub")})
    b.finish()

    p = r.section("paths")
    paths = {}
    for pname in PATH_NAMES:
        s = p.section(pname)
        paths[pname] = PathSpec(pname, s.number("bandwidth_B_per_cycle", positive=True),
                                s.number("base_latency_cycles", min_value=0),
                                s.number("min_issue_interval_cycles", min_value=0, default=0))
        s.finish()
    p.finish()

    mem = r.section("memory")
    memory = MemorySpec(mem.number("l2_capacity_MiB", positive=True),
                        mem.number("l2_bandwidth_GBps", positive=True),
                        mem.number("hbm_capacity_GB", positive=True),
                        mem.number("hbm_bandwidth_GBps", positive=True),
                        mem.string("hbm_arbitration", choices=HBM_ARBITRATION, default="fair"))
    mem.finish()

    sy = r.section("sync")
    sync = SyncSpec(sy.integer("pipe_events_per_pair", min_value=1),
                    sy.integer("cross_core_flags", min_value=1),
                    sy.integer("mte2_outstanding_per_aiv", min_value=1),
                    sy.integer("mte2_outstanding_per_aic", min_value=1))
    sy.finish()
    r.finish()
    return ChipSpec(name, source, num_ai_cores, aiv_per_core, aic_freq, aiv_freq, scalar,
                    cube, vector, buffers, MappingProxyType(paths), memory, sync)


def load_chip(path: str | Path) -> ChipSpec:
    """Load a chip (single-chip topology) file: a mapping with a ``chip:`` section."""
    data = load_yaml(path)
    r = Reader(data, str(path))
    spec = chip_from_mapping(r.raw("chip"), str(path))
    r.finish()
    return spec
