"""The vector unit: an AIV's rates and the one issue model that prices every SIMD VF.

``VectorSpec`` is the ``chip.vector`` section. A vector function (VF) is the instruction
stream it issues (``isa.VecOp`` of class ``vf_alu``): a count per opcode family
(``VF_FAMILIES``), its UB loads and stores, the bytes they move, the FP4 bytes it decodes,
its calls and its longest chain of dependent instructions. ``VectorSpec.cycles`` prices it:

- the issue stage starts at most ``vf_issue_per_cycle`` compute instructions per cycle, at
  most ``vf_issue_ports`` (the two EXUs); loads and stores take issue slots only if
  ``vf_ldst_issue_slots``;
- each family ``f`` issues to ``vf_<f>_exus`` EXUs (2: either EXU, so two may pair in one
  cycle; 1: EXU0 only), one per ``vf_<f>_interval_cycles`` on each (its initiation interval);
  EXU0 hosts every single-EXU family's instructions; with ``vf_interval_blocks_issue`` a
  family's interval also holds the issue stage (nothing else issues in its gaps), otherwise
  other instructions fill them;
- loads and stores start on their ports (``vf_load_ports``, ``vf_store_ports``, together
  ``vf_ub_slots``), the UB moves ``ub_bandwidth_B_per_cycle``, the FP4 decoder its rate;
- a chain of dependent instructions takes the sum of their latencies (``vf_<kind>_latency_
  cycles``, ``VF_LATENCY_CLASSES``), however many EXUs are free;

whichever is slowest, plus a fixed start and drain per call. Element-wise work not counted
as instructions (classes ``simple`` / ``div`` / ``special``: sustained element-op rates of
TileLang's cost model, facts 1.2, S8) streams at its class rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from simnode.config.params import param

#: vector op classes, each a rate in fp32 element-ops per cycle: "simple", "div", "special" are
#: sustained rates of element-wise work (facts 1.2, S8); "vf_alu" is the rate of ONE execution
#: unit (EXU) of a SIMD vector function whose instructions are counted one by one (64 fp32
#: lanes per full-register instruction); ``VectorSpec.cycles`` prices such a VF
VECTOR_OP_CLASSES = ("simple", "div", "special", "vf_alu")
#: opcode families of a SIMD VF by how they issue (``VecOp.mix`` counts instructions in this
#: order): full-rate ALU (float add/sub/mul/madd/min/max, compare, select, shift, logic, the
#: f16/bf16 <-> f32 converts), half-rate ALU (other converts: fp8/fp4/int; integer add/mul),
#: (de)interleave, reductions and VDUP, special functions (exp, exp-of-difference, ln, div, sqrt)
VF_FAMILIES = ("alu", "cvt", "intlv", "reduce", "sfu")
#: instruction kinds of a SIMD VF by latency (``VecOp.chain`` counts them along the VF's
#: longest chain of dependent instructions; ``VectorSpec.vf_<kind>_latency_cycles``)
VF_LATENCY_CLASSES = ("load", "store", "alu", "intlv", "reduce", "sfu", "cvt")
#: fp32 lanes of one 256 B vector register: ``VecOp`` element-ops per full-register instruction
REG_LANES = 64


def _exus(what: str, default: int, doc: str):
    return param(default, doc=f"EXUs a {what} instruction issues to: 2 = either (two pair in "
                 f"one cycle), 1 = EXU0 only ({doc})", unit="EXUs", min=1, max=2, origin="")


def _interval(what: str, doc: str):
    return param(1, doc=f"cycles between two {what} instructions on one EXU ({doc})", min=1,
                 origin="")


@dataclass(frozen=True)
class VectorSpec:
    """A vector core's (AIV's) rates by op class, and the issue model of a SIMD VF (``cycles``)."""
    ops_per_cycle: Mapping[str, float] = param(
        doc="sustained fp32 element-ops per cycle per AIV, by op class", unit="ops/cycle",
        positive=True, keys=VECTOR_OP_CLASSES, origin="")
    ub_bandwidth_B_per_cycle: float = param(
        doc="vector register file <-> UB bytes per cycle per AIV", positive=True, origin="")
    fp4_decode_B_per_cycle: float = param(doc="FP4 decode throughput per AIV", positive=True, origin="")
    # A chip file may leave out the VF fields below: a VF is then priced by its rates alone
    # (one EXU, one instruction per cycle each, no fixed cost), the model for a chip whose VF
    # mechanisms are not measured.
    vf_issue_ports: int = param(1, doc="execution units (EXUs) a SIMD VF issues compute instructions "
                                "to; two independent ones issue in the same cycle", unit="EXUs",
                                min=1, origin="")
    vf_issue_per_cycle: float = param(0, doc="compute instructions a SIMD VF issues per cycle as "
                                      "measured, at most vf_issue_ports (0 = vf_issue_ports)",
                                      unit="instructions/cycle", min=0, origin="")
    vf_ldst_issue_slots: bool = param(False, doc="loads and stores take the compute issue slots "
                                      "(false: they start on their own ports)", origin="")
    vf_interval_blocks_issue: bool = param(False, doc="a family's initiation interval holds the "
                                           "issue stage (false: other instructions fill its gaps)",
                                           origin="")
    vf_alu_exus: int = _exus("full-rate ALU", 2, "float add/mul/min/max, compare, select, logic")
    vf_cvt_exus: int = _exus("half-rate ALU", 2, "fp8/fp4/int converts, integer add/mul")
    vf_intlv_exus: int = _exus("(de)interleave", 1, "VINTLV, VDINTLV")
    vf_reduce_exus: int = _exus("reduction", 1, "VCADD, VCMAX, pair reduce, VDUP")
    vf_sfu_exus: int = _exus("special-function", 2, "exp, ln, div, sqrt")
    vf_alu_interval_cycles: float = _interval("full-rate ALU", "float add/mul/min/max, compare")
    vf_cvt_interval_cycles: float = _interval("half-rate ALU", "fp8/fp4/int converts, integer add/mul")
    vf_intlv_interval_cycles: float = _interval("(de)interleave", "VINTLV, VDINTLV")
    vf_reduce_interval_cycles: float = _interval("reduction", "VCADD, VCMAX, VDUP")
    vf_sfu_interval_cycles: float = _interval("special-function", "exp, ln, div, sqrt")
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
    vf_alu_latency_cycles: float = param(0, doc="full-rate ALU instruction latency (add, mul, "
                                         "f32<->bf16 convert, compare, select, shift, logic)",
                                         min=0, origin="")
    vf_cvt_latency_cycles: float = param(0, doc="half-rate ALU instruction latency (fp8/fp4/int "
                                         "converts)", min=0, origin="")
    vf_intlv_latency_cycles: float = param(0, doc="(de)interleave latency", min=0, origin="")
    vf_reduce_latency_cycles: float = param(0, doc="in-register reduction latency", min=0,
                                            origin="")
    vf_sfu_latency_cycles: float = param(0, doc="special-function latency (exp, ln, div)", min=0,
                                         origin="")

    def issue_rate(self) -> float:
        """Compute instructions the issue stage starts per cycle."""
        ports = self.vf_issue_ports
        return min(ports, self.vf_issue_per_cycle) if self.vf_issue_per_cycle else ports

    def family_cycles(self, mix) -> tuple[float, float]:
        """(issue-stage cycles, slowest EXU constraint) of ``mix`` instructions per
        ``VF_FAMILIES``, in instruction slots at one instruction per EXU per cycle."""
        rate = self.issue_rate()
        ports = self.vf_issue_ports
        issue = 0.0
        busiest = exu0 = 0.0
        for n, fam in zip(mix, VF_FAMILIES):
            if not n:
                continue
            exus = min(getattr(self, f"vf_{fam}_exus"), ports)
            interval = getattr(self, f"vf_{fam}_interval_cycles")
            own = n * interval / exus                 # the family on its EXUs alone
            busiest = max(busiest, own)
            if exus == 1:
                exu0 += n * interval
            # held issue: each instruction (or pair) keeps the stage for its interval
            issue += own if self.vf_interval_blocks_issue else n / rate
        if self.vf_interval_blocks_issue:
            issue = max(issue, sum(mix) / rate)
        return issue, max(busiest, exu0)

    def cycles(self, ins) -> float:
        """Cycles of one ``isa.VecOp`` (facts 3.6: the slowest stage sets the time).

        Element-wise work (``simple`` / ``div`` / ``special`` / ``fp4_decode``) streams at its
        class rate beside ``ub_bytes`` of UB traffic and the FP4 decoder. A SIMD VF
        (``vf_alu``) is priced by the issue model of this module's docstring; a record without
        ``mix`` gives its compute as element-ops (``ops``, of which ``exu0_ops`` EXU0-only,
        and ``sfu_ops`` beside them), read as full-rate ALU, reduction and special-function
        instructions of ``REG_LANES`` each."""
        stream = max(ins.ub_bytes / self.ub_bandwidth_B_per_cycle,
                     ins.decode_bytes / self.fp4_decode_B_per_cycle)
        if ins.op_class != "vf_alu":
            rate = self.fp4_decode_B_per_cycle if ins.op_class == "fp4_decode" \
                else self.ops_per_cycle[ins.op_class]
            return max(ins.ops / rate, stream)
        mix = ins.mix or ((ins.ops - ins.exu0_ops) / REG_LANES, 0, 0, ins.exu0_ops / REG_LANES,
                          ins.sfu_ops / REG_LANES)
        per_instr = REG_LANES / self.ops_per_cycle["vf_alu"]     # cycles of one EXU per slot
        issue, exus = self.family_cycles(mix)
        ldst = ins.loads + ins.stores
        if self.vf_ldst_issue_slots:
            issue += ldst / self.issue_rate()
        return max(stream, issue * per_instr, exus * per_instr,
                   ins.loads / self.vf_load_ports, ins.stores / self.vf_store_ports,
                   ldst / self.vf_ub_slots,
                   sum(n * getattr(self, f"vf_{c}_latency_cycles")      # its longest chain
                       for n, c in zip(ins.chain, VF_LATENCY_CLASSES))) \
            + ins.vf_calls * (self.vf_startup_cycles + self.vf_drain_cycles)
