"""Chip specification: the frozen record every hardware model reads.

``ChipSpec`` (cores, clocks, cube rates, the vector unit (``config.vector``), buffer
capacities, copy paths, L2, HBM, sync resources) is built by ``load_chip(path)`` or ``chip_from_mapping``. Each
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
from simnode.config.vector import (VECTOR_OP_CLASSES, VF_FAMILIES,  # noqa: F401 (re-exported)
                                   VF_LATENCY_CLASSES, VectorSpec)

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
