"""Low-latency dispatch and combine: the constants and the time of each step on one AIV.

``LowLatencyCosts`` declares the kernels' own constants once (``simnode.config.params``:
type, unit, range, default, doc, origin) on top of the family's (``simnode.ep.fields``:
``EPCosts``' launch, remote store and reduction ops; ``AivWindowCosts``' INT8 quantization,
remote write cost and what-ifs, the same constants the A3's normal kernels use); everything
else comes from the chip (``AivRates.from_chip``: the AIV's MTE2 / MTE3 copy paths and
vector rate). ``StepTimes`` prices each step of ``simnode.ep.lowlatency_plan``'s plan on one
AIV, in ns, following the published kernels (moe_distribute_{dispatch,combine}_v2.h; facts
v4-decode 3):

- ``stage_ns``: one (token, k) pair before its write: the slot count (five vector calls over
  the source's earlier pairs: Duplicate, Sub, Abs, Mins, ReduceSum), the BF16 row's MTE2
  read and the quantization in UB. AIV busy time; it overlaps the previous pair's write.
- ``write_ns``: one write into a window, split into what the AIV's MTE3 streams (busy time,
  bytes on the path) and, for a remote window, the wait for completion: ``remote_write_ns``
  (the per-write cost of a remote store on the path, beyond its bytes) plus the round trip
  (plus the what-if stalls). The next pair's triple waits for it (FillTriple's MTE3->S sync),
  so one AIV's remote writes do not overlap each other.
- ``status_count_ns`` / ``status_issue_ns``: the source's per-expert counts (the same vector
  calls over all its pairs) and its 32-B status writes, issued back to back and waited once;
  a status block is a small remote store (``remote_store_ns``, as the normal kernels' flags):
  ``status_land_ns`` / ``status_wait_ns``.
- ``poll_ns``: one round of a receiver AIV's polling: MTE2 of its status blocks, a ReduceSum.
- ``copy_row_ns``: one row window -> UB -> output (MTE2 of the record; MTE3 of the row, its
  scale and its triple); the next row's read overlaps (two UB buffers).
- ``combine_stage_ns`` / ``reduce_token_ns``: combine's read of an expert output row, and a
  source token's weighted sum of its k rows (a scalar GM read of each expert id, the row's
  MTE2 overlapping the last row's Cast, Muls, Add; the BF16 cast and MTE3 out).
- ``update_counts_ns``: the last AIV's per-expert count words (scalar GM reads and writes).
- ``post_ns``: the URMA what-if's posting of one write: the record to a local send buffer
  (dispatch; combine's rows are read from GM by the engine) and one WQE basic block.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.params import param
from simnode.ep.fields import AivWindowCosts
from simnode.ep.lowlatency_plan import MX_BLOCK, STATUS_BYTES, TRIPLE_BYTES, LLShape

_SRC = "sgl-kernel-npu moe_distribute_dispatch_v2.h / moe_distribute_combine_v2.h (facts v4-decode 3, SGLK)"


@dataclass(frozen=True)
class LowLatencyCosts(AivWindowCosts):
    """The low-latency kernels' costs (a workload's fields): the family's, then their own."""
    sync_all_ns: float = param(
        1000, "SyncAll: every AIV of the die waits for all (a hardware cross-core barrier)",
        min=0, origin="reasoned",
        cite="no figure published; a cross-core flag round over the die's AI cores, about two GM "
             "round trips")
    vector_call_cycles: float = param(
        35, "fixed cycles of one vector API call with its pipe barrier, beside its element work",
        min=0, origin="reasoned",
        cite="the 950DT's SIMD VF start 23 + drain 12 cycles (topologies/ascend950dt.yaml); no A3 figure")
    scalar_gm_ns: float = param(
        100, "one scalar read or write of a GM word with its cache clean/invalidate", min=0,
        origin="reasoned", cite="about the AIV's GM->UB base latency (facts 1.4, S8: 90 cycles) twice")
    int8_quant_calls: float = param(
        9, "vector API calls of one INT8 quantization", min=0, unit="calls", origin="sourced",
        cite=_SRC + " QuantProcess (ReduceMax is two: Max over repeats, WholeReduceMax)")
    mx_quant_ops_per_element: float = param(
        4, "vector ops per element of MXFP8 / MXFP4 quantization (max exponent per 32, scale, "
        "convert)", min=0, unit="ops/element", origin="reasoned",
        cite="moe_distribute_dispatch_v2_a5.h QuantDynamicMx: three SIMD VFs (ComputeMaxExp, "
             "ComputeScale, ComputeFp8Data), about 4 fp32 element-ops per element together")
    mx_quant_calls: float = param(
        3, "vector calls of one MX quantization", min=0, unit="calls", origin="sourced",
        cite="moe_distribute_dispatch_v2_a5.h QuantDynamicMx")
    slot_count_calls: float = param(
        5, "vector calls that count a pair's slot (over the source's earlier pairs)", min=0,
        unit="calls", origin="sourced",
        cite=_SRC + " CalTokenSendExpertCnt: Duplicate, Sub, Abs, Mins, ReduceSum")


@dataclass(frozen=True)
class AivRates:
    """One AIV's copy and vector rates, from the chip (B/ns = GB/s, ns)."""
    mte2_GBps: float
    mte2_base_ns: float
    mte3_GBps: float
    mte3_base_ns: float
    vector_ops_per_ns: float
    freq_GHz: float

    @classmethod
    def from_chip(cls, chip) -> "AivRates":
        """The AIV paths of a ``ChipSpec`` (per-cycle rates are in the AIC clock)."""
        f = chip.aic_freq_GHz
        g2u, u2g = chip.paths["gm_to_ub"], chip.paths["ub_to_gm"]
        return cls(g2u.bandwidth_B_per_cycle * f, g2u.base_latency_cycles / f,
                   u2g.bandwidth_B_per_cycle * f, u2g.base_latency_cycles / f,
                   chip.vector.ops_per_cycle["simple"] * chip.aiv_freq_GHz, chip.aiv_freq_GHz)


@dataclass(frozen=True)
class StepTimes:
    """Each step's time on one AIV (ns); see the module docstring."""
    costs: LowLatencyCosts
    rates: AivRates
    shape: LLShape

    # -- building blocks ----------------------------------------------------------------
    def mte2_ns(self, nbytes: float) -> float:
        """A GM -> UB copy: base latency + bytes / rate."""
        return self.rates.mte2_base_ns + nbytes / self.rates.mte2_GBps

    def mte3_ns(self, nbytes: float) -> float:
        """A UB -> GM copy (local): base latency + bytes / rate."""
        return self.rates.mte3_base_ns + nbytes / self.rates.mte3_GBps

    def vector_ns(self, elements_ops: float, calls: float) -> float:
        """Vector work: ``calls`` API calls doing ``elements_ops`` element-ops in all."""
        return calls * self.costs.vector_call_cycles / self.rates.freq_GHz \
            + elements_ops / self.rates.vector_ops_per_ns

    # -- dispatch -------------------------------------------------------------------------
    def slot_count_ns(self, earlier_pairs: int) -> float:
        """Counting a pair's slot over the source's ``earlier_pairs`` pairs (none for the
        first token's pairs: the kernel skips it)."""
        if earlier_pairs <= 0:
            return 0.0
        c = self.costs.slot_count_calls
        return self.vector_ns(c * earlier_pairs, c)

    def quant_ns(self) -> float:
        """Quantizing one BF16 row in UB (0 for BF16 records)."""
        c, h, dt = self.costs, self.shape.hidden, self.shape.dispatch_dtype
        if dt == "int8":
            return self.vector_ns(c.quant_ops_per_element * h, c.int8_quant_calls)
        if dt in ("mxfp8", "mxfp4"):
            return self.vector_ns(c.mx_quant_ops_per_element * h, c.mx_quant_calls)
        return 0.0

    def stage_ns(self, earlier_pairs: int) -> float:
        """One pair before its write: slot count, the row's MTE2 read, quantization."""
        return self.slot_count_ns(earlier_pairs) + self.mte2_ns(2 * self.shape.hidden) + self.quant_ns()

    def write_ns(self, nbytes: float, one_way_ns: float, remote: bool,
                 peers: int = 0) -> tuple[float, float]:
        """(AIV MTE3 streaming time, wait after it until the write is seen complete) of one
        window write of ``nbytes``; ``one_way_ns``: the path's latency to the window;
        ``peers``: the peers the rank writes to (the what-if stalls)."""
        stream = self.mte3_ns(nbytes)
        if not remote:
            return stream, 0.0
        return stream, self.costs.remote_write_ns + self.costs.stall_ns(peers, True) + 2 * one_way_ns

    def status_land_ns(self, one_way_ns: float, remote: bool) -> float:
        """From a status block's issue to its landing in the owner's state window."""
        return self.costs.remote_store_ns + one_way_ns if remote else 0.0

    def status_wait_ns(self, one_way_ns: float, remote: bool) -> float:
        """From a status block's issue until its writer sees it complete."""
        return self.costs.remote_store_ns + 2 * one_way_ns if remote else 0.0

    def post_ns(self, record_bytes: float, wqe_bytes: float) -> float:
        """URMA what-if: the AIV posts one write: ``record_bytes`` to a local send buffer (0:
        the engine reads the row where it lies) and one WQE of ``wqe_bytes``."""
        return (self.mte3_ns(record_bytes) if record_bytes else 0.0) + self.mte3_ns(wqe_bytes)

    def status_count_ns(self, experts: int) -> float:
        """A source AIV's counts for its ``experts`` statuses (slot-count calls over all pairs)."""
        pairs = self.shape.tokens_per_rank * self.shape.top_k
        c = self.costs.slot_count_calls
        return experts * self.vector_ns(c * pairs, c)

    def status_issue_ns(self, blocks: int) -> float:
        """MTE3 time of ``blocks`` 32-B status writes issued back to back."""
        return self.rates.mte3_base_ns + blocks * STATUS_BYTES / self.rates.mte3_GBps if blocks else 0.0

    def poll_ns(self, blocks: int) -> float:
        """One polling round over ``blocks`` status blocks: MTE2, ReduceSum, compare."""
        return self.mte2_ns(blocks * STATUS_BYTES) + self.vector_ns(8 * blocks, 1)

    def _out_parts(self) -> tuple:
        """Bytes of a received row's row, scales and triple as the copy writes them out."""
        h, dt = self.shape.hidden, self.shape.dispatch_dtype
        row = {"int8": h, "mxfp8": h, "mxfp4": -(-h // 2), "bf16": 2 * h}[dt]
        scale = {"int8": 4, "bf16": 0}.get(dt, 2 * (-(-h // (2 * MX_BLOCK))))
        return row, scale, TRIPLE_BYTES

    def copy_out_bytes(self) -> int:
        """Bytes the copy writes to the output per received row."""
        return sum(self._out_parts())

    def copy_row_ns(self) -> float:
        """One received row window -> UB -> output (the row, its scales, its triple); the
        next row's read overlaps the writes."""
        row, scale, triple = self._out_parts()
        out = self.mte3_ns(row) + self.mte3_ns(triple) + (self.mte3_ns(scale) if scale else 0.0)
        return max(self.mte2_ns(self.shape.record_bytes), out)

    def update_counts_ns(self) -> float:
        """The last AIV's per-local-expert count words (UpdateTokenNumsOut: per expert two
        scalar GM reads and a write)."""
        return 3 * self.shape.experts_per_rank * self.costs.scalar_gm_ns

    # -- combine --------------------------------------------------------------------------
    def combine_stage_ns(self) -> float:
        """Reading one expert output row (BF16) before writing it back."""
        return self.mte2_ns(self.shape.combine_row_bytes)

    def reduce_row_ns(self) -> float:
        """One of a token's rows: its expert id (scalar GM read), then the row's MTE2
        overlapping the last row's Cast, Muls, Add."""
        h = self.shape.hidden
        c = self.costs
        return c.scalar_gm_ns + max(self.mte2_ns(self.shape.combine_row_bytes),
                                    self.vector_ns(c.reduce_ops_per_element * h, 3))

    def reduce_token_ns(self, rows: int) -> float:
        """A source token's weighted sum over ``rows`` rows once they have arrived: zero the
        FP32 sum, the rows, cast to BF16, MTE3 out, and the status clear."""
        h = self.shape.hidden
        return self.vector_ns(h, 1) + rows * self.reduce_row_ns() + self.vector_ns(h, 1) \
            + self.mte3_ns(self.shape.combine_row_bytes) + self.mte3_ns(rows * STATUS_BYTES)
