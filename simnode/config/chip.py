"""Chip specification: the frozen record every hardware model reads.

``ChipSpec`` (cores, clocks, cube and vector rates, buffer capacities, copy paths,
L2, HBM, sync resources) is built by ``load_chip(path)`` or ``chip_from_mapping``. Each
field is declared once (``simnode.config.params``: type, unit, range, doc), and the
reader, the ``--set`` checks and ``simnode describe`` come from that declaration.
Numbers carry their unit in their name; per-cycle rates are in the AIC clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from simnode import units
from simnode.config.fields import Reader, load_yaml
from simnode.config.params import build, param, section

DTYPES = ("bf16", "fp16", "fp8", "fp4")
#: the cube's MMAD input modes: the dtypes, FP32 with HF32 off, and HF32 (FP32 operands
#: multiplied at reduced mantissa, SetHF32Mode; facts ascend950 1.2)
CUBE_DTYPES = DTYPES + ("fp32", "hf32")
DTYPE_BITS = MappingProxyType({"fp32": 32, "hf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "fp4": 4})

#: Copy paths of the AI core (facts 1.4); every chip file must give each of them.
PATH_NAMES = ("gm_to_l1", "gm_to_ub", "ub_to_gm", "ub_to_l1", "l1_to_l0", "l1_to_l0_scale",
              "l0c_to_ub", "l0c_to_ub_dual", "l0c_to_gm")
#: Paths that read or write global memory and so go through L2 (and HBM on a miss).
GM_PATHS = frozenset({"gm_to_l1", "gm_to_ub", "ub_to_gm", "l0c_to_gm"})
#: vector op classes, each a rate in fp32 element-ops per cycle: "simple", "div", "special" are
#: sustained rates of element-wise work (facts 1.2, S8); "vf_alu" is the rate of ONE execution
#: unit (EXU) of a SIMD vector function whose instructions are counted one by one from a
#: kernel's source (64 fp32 lanes per full-register instruction); ``VectorSpec.cycles`` prices
#: such a VF over its ``vf_issue_ports`` EXUs, its UB ports and its fixed start and drain
VECTOR_OP_CLASSES = ("simple", "div", "special", "vf_alu")
#: instruction kinds of a SIMD VF by latency (``VecOp.chain`` counts them along the VF's
#: longest chain of dependent instructions; ``VectorSpec.vf_<kind>_latency_cycles``)
VF_LATENCY_CLASSES = ("load", "store", "alu", "intlv", "reduce", "sfu")


#: the most AI cores a chip file may have: 32x the 950DT's 32 (facts 1.1), room for any
#: what-if, and a bound on the per-core state a run holds (each core is a SimPy process)
MAX_AI_CORES = 1024


@dataclass(frozen=True)
class PathSpec:
    """One copy path: a copy costs base latency + bytes / bandwidth (facts 3.6)."""
    name: str                         #: the path's key in ``chip.paths``
    bandwidth_B_per_cycle: float = param(
        doc="streaming rate of one issuing pipe, bytes per AIC cycle", positive=True, origin="")
    base_latency_cycles: float = param(
        doc="latency from issue to completion, beyond the streaming time", min=0, origin="")
    min_issue_interval_cycles: float = param(
        0, "smallest time between two issues on one pipe", min=0, origin="")


@dataclass(frozen=True)
class BufferSpec:
    """Capacities of an AI core's on-chip buffers: L0A, L0B, L0C, L1 and each AIV's UB."""
    l0a_KiB: float = param(doc="cube A input buffer (L0A)", positive=True, origin="")
    l0b_KiB: float = param(doc="cube B input buffer (L0B)", positive=True, origin="")
    l0c_KiB: float = param(doc="fp32 accumulator (L0C)", positive=True, origin="")
    l1_KiB: float = param(doc="AIC L1 (CBuf)", positive=True, origin="")
    ub_KiB: float = param(doc="unified buffer, per AIV", positive=True, origin="")

    def capacity_bytes(self, name: str) -> int:
        return units.KiB_to_bytes(getattr(self, f"{name}_KiB"))


def _multiple_of_256(n: int) -> str | None:
    # a 16 x 16 output fractal times whole K elements per step (facts 1.2)
    return "a multiple of 256 (16 x 16 outputs x K elements per cycle)" if n % 256 else None


@dataclass(frozen=True)
class CubeSpec:
    """The cube core's (AIC's) MMAD: MACs per cycle by input dtype, its latency and the m
    that saturates it."""
    macs_per_cycle: Mapping[str, int] = param(
        doc="MMAD multiply-accumulates per AIC cycle, by input dtype", unit="MAC/cycle", min=1,
        keys=CUBE_DTYPES, check=_multiple_of_256, origin="")
    mmad_latency_cycles: float = param(
        doc="completion latency of one MMAD beyond its compute cycles", min=0, origin="")
    saturating_m_rows: int = param(
        doc="smallest MMAD m that reaches the full rate; a smaller m costs as much", unit="rows",
        min=1, origin="")

    def fractal_k(self, dtype: str) -> int:
        """K elements per 16x16 output fractal step: 16 bf16, 32 fp8, 64 fp4 (facts 1.3); 1 fp32,
        2 hf32 (a 16 x 16 x 8 FP32 step every 8 or 4 cycles)."""
        return self.macs_per_cycle[dtype] // 256


@dataclass(frozen=True)
class VectorSpec:
    """A vector core's (AIV's) rates by op class, and what prices a SIMD VF (``cycles``)."""
    ops_per_cycle: Mapping[str, float] = param(
        doc="sustained fp32 element-ops per cycle per AIV, by op class", unit="ops/cycle",
        positive=True, keys=VECTOR_OP_CLASSES, origin="")
    ub_bandwidth_B_per_cycle: float = param(
        doc="vector register file <-> UB bytes per cycle per AIV", positive=True, origin="")
    fp4_decode_B_per_cycle: float = param(doc="FP4 decode throughput per AIV", positive=True, origin="")
    # A chip file may leave out the VF fields below: a VF is then priced by its rates alone
    # (one EXU, no fixed cost), the model for a chip whose VF mechanisms are not measured.
    vf_issue_ports: int = param(1, doc="execution units (EXUs) a SIMD VF issues compute instructions "
                                "to; two independent ones issue in the same cycle", unit="EXUs",
                                min=1, origin="")
    vf_issue_per_cycle: float = param(0, doc="compute instructions a SIMD VF issues per cycle as "
                                      "measured, at most vf_issue_ports (0 = vf_issue_ports)",
                                      unit="instructions/cycle", min=0, origin="")
    vf_sfu_interval_cycles: float = param(1, doc="cycles between two special-function instructions "
                                          "(exp, ln, div) on one EXU", min=1, origin="")
    vf_load_ports: int = param(2, doc="UB -> register load instructions a VF starts per cycle",
                               unit="ports", min=1, origin="")
    vf_store_ports: int = param(2, doc="register -> UB store instructions a VF starts per cycle",
                                unit="ports", min=1, origin="")
    vf_ub_slots: int = param(4, doc="loads and stores together a VF starts per cycle", unit="slots",
                             min=1, origin="")
    vf_startup_cycles: float = param(0, doc="fixed cycles from a VF call to its first instruction",
                                     min=0, origin="")
    vf_drain_cycles: float = param(0, doc="fixed cycles from a VF's last issue to its end", min=0,
                                   origin="")
    # Issue-to-result latencies of a VF's instruction kinds (VF_LATENCY_CLASSES): a chain of
    # dependent instructions takes their sum, however many EXUs are free (0 = not modeled)
    vf_load_latency_cycles: float = param(0, doc="UB -> register load latency", min=0, origin="")
    vf_store_latency_cycles: float = param(0, doc="register -> UB store latency", min=0, origin="")
    vf_alu_latency_cycles: float = param(0, doc="ALU instruction latency (add, mul, convert, "
                                         "compare, select, shift, logic)", min=0, origin="")
    vf_intlv_latency_cycles: float = param(0, doc="(de)interleave latency", min=0, origin="")
    vf_reduce_latency_cycles: float = param(0, doc="in-register reduction latency", min=0,
                                            origin="")
    vf_sfu_latency_cycles: float = param(0, doc="special-function latency (exp, ln, div)", min=0,
                                         origin="")

    def cycles(self, ins) -> float:
        """Cycles of one ``isa.VecOp`` (facts 3.6: the slowest stage sets the time).

        Element-wise work (``simple`` / ``div`` / ``special`` / ``fp4_decode``) streams at its
        class rate beside ``ub_bytes`` of UB traffic and the FP4 decoder. A SIMD VF counted
        instruction by instruction (``vf_alu``) is priced from its mechanisms: its compute
        instructions over ``vf_issue_ports`` EXUs at one per EXU per cycle (or at
        ``vf_issue_per_cycle`` if the chip file gives a lower measured rate), the EXU0-only
        ones (``exu0_ops``) on one EXU, its special functions (``sfu_ops``) one per
        ``vf_sfu_interval_cycles`` per EXU, its loads and stores on their ports, whichever is
        slowest or, if longer, its longest chain of dependent instructions (``chain``: a count
        per ``VF_LATENCY_CLASSES``), plus a fixed start and drain per call (``vf_calls``)."""
        stream = max(ins.ub_bytes / self.ub_bandwidth_B_per_cycle,
                     ins.decode_bytes / self.fp4_decode_B_per_cycle)
        if ins.op_class != "vf_alu":
            rate = self.fp4_decode_B_per_cycle if ins.op_class == "fp4_decode" \
                else self.ops_per_cycle[ins.op_class]
            return max(ins.ops / rate, stream)
        lane_rate = self.ops_per_cycle["vf_alu"]          # one EXU
        ports = self.vf_issue_ports
        if self.vf_issue_per_cycle:                       # the measured issue rate, if given
            ports = min(ports, self.vf_issue_per_cycle)
        return max(stream,
                   (ins.ops + ins.sfu_ops) / (lane_rate * ports),    # an issue slot each
                   ins.exu0_ops / lane_rate,                         # EXU0-only work
                   ins.sfu_ops * self.vf_sfu_interval_cycles / (lane_rate * ports),
                   ins.loads / self.vf_load_ports, ins.stores / self.vf_store_ports,
                   (ins.loads + ins.stores) / self.vf_ub_slots,
                   sum(n * getattr(self, f"vf_{c}_latency_cycles")      # its longest chain
                       for n, c in zip(ins.chain, VF_LATENCY_CLASSES))) \
            + ins.vf_calls * (self.vf_startup_cycles + self.vf_drain_cycles)


HBM_ARBITRATION = ("fcfs", "fair")


@dataclass(frozen=True)
class MemorySpec:
    """L2 and HBM: capacities, bandwidths and how HBM shares itself."""
    l2_capacity_MiB: float = param(doc="L2 cache capacity", positive=True, origin="")
    l2_bandwidth_GBps: float = param(doc="L2 bandwidth, all cores together", positive=True, origin="")
    hbm_capacity_GB: float = param(doc="HBM capacity", positive=True, origin="")
    hbm_bandwidth_GBps: float = param(doc="HBM bandwidth of the chip", positive=True, origin="")
    #: Used by the supernode flow model, where URMA meets the AIVs; a chip's cores offer
    #: alike, so both agree there.
    hbm_arbitration: str = param(
        "fair", "how HBM shares itself among overloading users: fcfs (in proportion to the "
        "load each offers) or fair (max-min: a small user keeps its demand)",
        choices=HBM_ARBITRATION, origin="")

    @property
    def l2_capacity_bytes(self) -> int:
        return units.MiB_to_bytes(self.l2_capacity_MiB)


@dataclass(frozen=True)
class SyncSpec:
    """Synchronization resources: event ids, cross-core flags, outstanding MTE2 requests."""
    pipe_events_per_pair: int = param(doc="set/wait event ids per (src pipe, dst pipe) pair",
                                      unit="ids", min=1, origin="")
    cross_core_flags: int = param(doc="AIC<->AIV flag ids per AIV", unit="ids", min=1, origin="")
    mte2_outstanding_per_aiv: int = param(doc="issued-but-incomplete MTE2 requests per AIV",
                                          unit="requests", min=1, origin="")
    mte2_outstanding_per_aic: int = param(doc="the same limit on the AIC's MTE2", unit="requests",
                                          min=1, origin="")


@dataclass(frozen=True)
class ChipSpec:
    """One chip as its file gives it: AI cores, clocks and the sections above."""
    name: str = param(doc="the chip's name", origin="")
    source: str                       #: file it was read from (not a parameter)
    num_ai_cores: int = param(doc="AI cores (1 AIC + aiv_per_core AIVs each)", unit="cores", min=1,
                              max=MAX_AI_CORES, origin="")
    aiv_per_core: int = param(doc="vector cores (AIVs) per AI core", unit="AIVs", min=1, max=2, origin="")
    aic_freq_GHz: float = param(doc="cube core (AIC) clock", positive=True, origin="")
    aiv_freq_GHz: float = param(doc="vector core (AIV) clock", positive=True, origin="")
    scalar_cycles_per_instr: float = param(doc="scalar pipe cost of one instruction",
                                           unit="cycles", positive=True, origin="")
    cube: CubeSpec = section(CubeSpec, "cube core rates")
    vector: VectorSpec = section(VectorSpec, "vector core rates")
    buffers: BufferSpec = section(BufferSpec, "on-chip buffer capacities")
    paths: Mapping[str, PathSpec] = section(PathSpec, "copy paths of the AI core (facts 1.4)",
                                            keys=PATH_NAMES, key_field="name", repr=False)
    memory: MemorySpec = section(MemorySpec, "L2 and HBM")
    sync: SyncSpec = section(SyncSpec, "synchronization resources")

    def path(self, name: str) -> PathSpec:
        return self.paths[name]

    def peak_tflops(self, dtype: str) -> float:
        flop_per_ns = 2 * self.cube.macs_per_cycle[dtype] * self.aic_freq_GHz * self.num_ai_cores
        return units.tflops(flop_per_ns, 1.0)


def chip_from_mapping(data: dict, source: str) -> ChipSpec:
    """Validate a raw chip mapping (the ``chip:`` section of a topology file)."""
    return build(ChipSpec, Reader(data, source, "chip"), source=source)


def load_chip(path: str | Path) -> ChipSpec:
    """Load a chip (single-chip topology) file: a mapping with a ``chip:`` section."""
    data = load_yaml(path)
    r = Reader(data, str(path))
    spec = chip_from_mapping(r.raw("chip"), str(path))
    r.finish()
    return spec
