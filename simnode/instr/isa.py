"""Instruction records of an AI-core schedule (facts 3.1, 3.2, 3.6).

A schedule is data: each pipe of each unit holds a list of these frozen records,
executed in order by the engine. Units are ``aic``, ``aiv0``, ``aiv1``; pipes are
``s``, ``mte2``, ``mte1``, ``m``, ``fix`` on the AIC and ``s``, ``mte2``, ``v``,
``mte3`` on an AIV.

- ``Copy``: a move along a named path (``gm_to_l1`` ...), ``size_bytes``; for GM
  reads ``gm_key`` names the region for the L2 model and ``l2_hint`` its policy.
- ``Mmad``: cube multiply-accumulate m x n x k of ``dtype`` inputs into L0C.
- ``Fixpipe``: L0C -> UB / both UBs / GM of an m x n tile converted to ``out_dtype``.
- ``VecOp``: vector work: ``ops`` fp32 element-ops of ``op_class`` touching ``ub_bytes``
  (class ``fp4_decode``: ``ops`` FP4 bytes through the decoder); ``decode_bytes`` FP4
  bytes decoded inside the same VF, pipelined with its ALU work and UB traffic; a VF
  counted by instructions (``vf_alu``) also gives its EXU0-only and special-function
  work or its instructions per opcode family (``mix``), its load and store instructions, its
  calls and its longest dependent chain (priced by ``config.vector.VectorSpec.cycles``).
- ``Scalar``: scalar work, in cycles. ``Delay``: a fixed cost in ns (kernel launch).
- ``SetFlag`` / ``WaitFlag``: intra-unit pipe-to-pipe events (8 ids per pipe pair).
- ``CrossSet`` / ``CrossWait``: AIC <-> AIV flags (16 ids per AIV).
- ``Barrier``: the pipe waits until all its earlier instructions have completed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

AIC_PIPES = ("s", "mte2", "mte1", "m", "fix")
AIV_PIPES = ("s", "mte2", "v", "mte3")
UNITS = ("aic", "aiv0", "aiv1")
L2_HINTS = ("normal", "notalloc")

#: Which pipe issues each copy path, and on which unit kind (facts 3.1).
PATH_PIPE = {
    "gm_to_l1": ("aic", "mte2"),
    "l1_to_l0": ("aic", "mte1"),
    "l1_to_l0_scale": ("aic", "mte1"),
    "l0c_to_ub": ("aic", "fix"),
    "l0c_to_ub_dual": ("aic", "fix"),
    "l0c_to_gm": ("aic", "fix"),
    "gm_to_ub": ("aiv", "mte2"),
    "ub_to_gm": ("aiv", "mte3"),
    "ub_to_l1": ("aiv", "mte3"),
}


#: how results name each pipe kind ("aic.m" -> "cube (aic.m)")
PIPE_NAMES = {"aic.m": "cube (aic.m)", "aic.mte2": "AIC MTE2 (GM->L1)", "aic.mte1": "MTE1 (L1->L0)",
              "aic.fix": "FixPipe (aic.fix)", "aic.s": "AIC scalar", "aiv.mte2": "AIV MTE2 (GM->UB)",
              "aiv.v": "vector (aiv.v)", "aiv.mte3": "AIV MTE3 (UB->GM/L1)", "aiv.s": "AIV scalar"}


def unit_kind(unit: str) -> str:
    return "aic" if unit == "aic" else "aiv"


def pipes_of(unit: str) -> tuple[str, ...]:
    return AIC_PIPES if unit == "aic" else AIV_PIPES


@dataclass(frozen=True, slots=True)
class Copy:
    path: str
    size_bytes: int
    gm_key: Hashable = None    #: identity of the GM region (L2 hit/miss); None = not cached
    l2_hint: str = "normal"    #: "normal" allocates in L2; "notalloc" bypasses it
    label: str = ""
    #: a multi-region descriptor (e.g. FlashMLA's gather2, burst_count=2, facts 3.4): the bytes
    #: split equally over these GM regions, each hit or missed in L2 on its own; one request slot
    regions: tuple = ()


@dataclass(frozen=True, slots=True)
class Mmad:
    m: int
    n: int
    k: int
    dtype: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class Fixpipe:
    m: int
    n: int
    out_dtype: str
    dst: str = "gm"            #: "gm", "ub" (one AIV) or "ub_dual" (both AIVs)
    gm_key: Hashable = None
    l2_hint: str = "normal"
    label: str = ""

    @property
    def path(self) -> str:
        return {"gm": "l0c_to_gm", "ub": "l0c_to_ub", "ub_dual": "l0c_to_ub_dual"}[self.dst]


@dataclass(frozen=True, slots=True)
class VecOp:
    ops: float                 #: fp32 element-operations
    op_class: str = "simple"   #: "simple", "div", "special" (facts 1.2), or "fp4_decode":
                               #: then ``ops`` counts FP4 bytes decoded at fp4_decode_B_per_cycle
    ub_bytes: int = 0          #: bytes read + written between UB and the vector registers
    label: str = ""
    decode_bytes: int = 0      #: FP4 bytes through the decoder in this VF (its own unit)
    #: class ``vf_alu`` only (a SIMD VF counted instruction by instruction, priced by
    #: ``config.vector.VectorSpec.cycles``): the part of ``ops`` only EXU0 issues, the
    #: special-function element-ops (exp, ln, div; beside ``ops``), load and store
    #: instructions, and VF calls
    exu0_ops: float = 0
    sfu_ops: float = 0
    loads: int = 0
    stores: int = 0
    vf_calls: int = 0
    #: its longest chain of dependent instructions: a count per kind of
    #: ``config.vector.VF_LATENCY_CLASSES`` (load, store, alu, intlv, reduce, sfu, cvt)
    chain: tuple = ()
    #: its compute instructions per opcode family of ``config.vector.VF_FAMILIES`` (alu, cvt,
    #: intlv, reduce, sfu); given, it replaces the element-op reading of ``ops`` / ``exu0_ops``
    #: / ``sfu_ops`` in the price (``ops`` then only reports the work)
    mix: tuple = ()


@dataclass(frozen=True, slots=True)
class Scalar:
    cycles: float
    label: str = ""


@dataclass(frozen=True, slots=True)
class Delay:
    time_ns: float
    label: str = ""


@dataclass(frozen=True, slots=True)
class SetFlag:
    src: str                   #: pipe that sets (the one executing this record)
    dst: str                   #: pipe that waits
    event: int


@dataclass(frozen=True, slots=True)
class WaitFlag:
    src: str
    dst: str                   #: pipe that waits (the one executing this record)
    event: int


@dataclass(frozen=True, slots=True)
class CrossSet:
    to_unit: str               #: "aic", "aiv0" or "aiv1"
    flag: int


@dataclass(frozen=True, slots=True)
class CrossWait:
    from_unit: str
    flag: int


@dataclass(frozen=True, slots=True)
class Barrier:
    label: str = ""


INSTRUCTION_TYPES = (Copy, Mmad, Fixpipe, VecOp, Scalar, Delay, SetFlag, WaitFlag,
                     CrossSet, CrossWait, Barrier)
