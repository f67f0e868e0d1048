"""The buffer plan of one AI core's sparse MLA program (facts 1.3, 3.4; S2 config.h).

``choose_plan(chip, params, dtypes)`` picks the tile depths that fit the chip's buffers for
KV caches of those dtypes and returns a ``Plan``; ``buffer_plan`` lists the buffers it
claims, which ``KernelSchedule.check`` holds against the capacities. The constants are
FlashMLA's tile sizes and buffer counts (facts 3.4). Pure functions: no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.instr.schedule import BufferUse

#: KV row bytes per token by cache dtype (facts 2.2, S2 kv_cache_format.h).
KV_ROW_BYTES = {"bf16": 1024, "fp8": 528, "fp4": 288}
INDEX_BYTES = 4           # int32 token indices (S2 index tensor)
INDEX_BLOCK_TOKENS = 640  # facts 3.4: indices fetched in groups of 640 (INDEX_BLOCK_SIZE)
TOKENS_PER_CHUNK = 32     # facts 3.4: 32 selected tokens per AIV per step
GATHER_UB_CHUNKS = 3      # facts 3.4: UB holds gathered KV x 3
KV_L1_STAGES = 4          # facts 3.4: L1 holds KV x 4
Q_L1_SLOTS = 2            # facts 3.4: L1 holds Q x 2
L0_SLOTS = 4              # facts 3.4: 4 L0A / L0B slots
L0_TILE = 128             # facts 3.4: K split into 128-wide L1->L0 tiles
INDEX_UB_BUFFERS = 4      # facts 3.4: index buffers x 4
FRAG_BUFFERS = 2          # facts 3.4: 2 output-fragment buffers
STATS_PER_ROW = 4         # running max, sum, scale, sink logit (fp32) per row


@dataclass(frozen=True)
class Plan:
    n_aiv: int
    rows: int                 #: softmax / O rows (heads) per AIV
    transposed: bool          #: tokens as MMAD M when heads are below the saturating M
    chunk_tokens: int
    gather_chunks: int        #: UB gather slots, in chunks
    fragments: int            #: fp32 fragments per O drain
    frag_cols: int
    kv_l1_stages: int
    l0_slots: int
    ub_rows: tuple            #: (dtype, gathered row in UB padded to 32 B) per KV format (facts 1.3)
    o_regions: int            #: L0C regions of O n-tiles (= d / 128: O sits at one place, S2)


def ub_row(dtype: str) -> int:
    """A gathered token's row in UB: the GM record padded to 32 B (S2 config.h
    FP8_UB_TOKEN_BYTES / FP4_UB_TOKEN_BYTES: MTE2 destination rows are 32 B aligned)."""
    return -(-KV_ROW_BYTES[dtype] // 32) * 32


def _ub_parts(p, rows, chunk, gslots, frag_cols, ub_rows) -> list[tuple[str, int]]:
    d = p.d_v
    # one set of gather slots per KV row format: S2 keeps FP4's raw rows in slots of their
    # own beside the FP8 ones (config.h gathered_kv_fp4), each with a bf16 scale scratch
    parts = [(f"gathered KV {dt} x {gslots} chunks of {chunk} tokens", gslots * chunk * row)
             for dt, row in ub_rows]
    parts += [(f"{dt} scales bf16 scratch", chunk * (d // gran) * 2)
              for dt, gran in (("fp8", 32), ("fp4", 16)) if dt in dict(ub_rows)]
    return parts + [
            ("NZ KV chunk bf16", chunk * d * 2),
            (f"O accumulator {rows}x{d} fp32", rows * d * 4),
            (f"O fragments x {FRAG_BUFFERS} of {rows}x{frag_cols} fp32",
             FRAG_BUFFERS * rows * frag_cols * 4),
            (f"P/S {rows}x{p.b_topk} fp32", rows * p.b_topk * 4),
            ("softmax stats", rows * STATS_PER_ROW * 4),
            (f"index buffers x {INDEX_UB_BUFFERS}", INDEX_UB_BUFFERS * INDEX_BLOCK_TOKENS * INDEX_BYTES)]


def choose_plan(chip, p, dtypes) -> Plan:
    """The facts 3.4 plan for KV caches of ``dtypes`` when it fits; else (1C1V: one UB holds
    all 64 rows of O) smaller chunks, 2 gather slots and 64-wide fragments. If nothing fits,
    the facts plan is kept so that the buffer check names the overflowing buffer."""
    n_aiv = p.vector_cores_per_cube
    rows = p.heads_per_core // n_aiv
    row_pad = tuple((dt, ub_row(dt)) for dt in sorted(set(dtypes)))
    ub = chip.buffers.capacity_bytes("ub")
    options = [(TOKENS_PER_CHUNK, GATHER_UB_CHUNKS, L0_TILE), (16, 2, 64)]
    chosen = options[0]
    for opt in options:
        if sum(b for _, b in _ub_parts(p, rows, *opt, row_pad)) <= ub:
            chosen = opt
            break
    chunk, gslots, frag_cols = chosen
    hpc, d, bt = p.heads_per_core, p.d_qk, p.b_topk
    l1_fixed = Q_L1_SLOTS * hpc * d * 2 + hpc * bt * 2
    kv_stages = max(2, min(KV_L1_STAGES, (chip.buffers.capacity_bytes("l1") - l1_fixed) // (bt * d * 2)))
    transposed = hpc < chip.cube.saturating_m_rows
    a_slot = max(hpc * L0_TILE, hpc * bt) * 2
    b_slot = bt * L0_TILE * 2
    if transposed:
        a_slot, b_slot = b_slot, a_slot
    l0 = max(2, min(L0_SLOTS, chip.buffers.capacity_bytes("l0a") // a_slot,
                    chip.buffers.capacity_bytes("l0b") // b_slot))
    # L0C holds O (d / 128 n-tiles of hpc x 128 fp32) and one P beside it, nothing else
    # (facts 3.4; S2 kernel_body.h: l0c_out_buf at 0, l0c_p_buf = l0c_out_buf + MMA_M * D_VO)
    o_regions = d // L0_TILE
    return Plan(n_aiv, rows, transposed, chunk, gslots, d // frag_cols, frag_cols, kv_stages,
                l0, row_pad, o_regions)


def buffer_plan(p, plan: Plan) -> list[BufferUse]:
    hpc, d, bt = p.heads_per_core, p.d_qk, p.b_topk
    a_slot = max(hpc * L0_TILE, hpc * bt) * 2
    b_slot = bt * L0_TILE * 2
    if plan.transposed:
        a_slot, b_slot = b_slot, a_slot
    out = [BufferUse("aic", "l1", f"Q x {Q_L1_SLOTS}", Q_L1_SLOTS * hpc * d * 2),
           BufferUse("aic", "l1", f"KV x {plan.kv_l1_stages} stages of {bt} tokens",
                     plan.kv_l1_stages * bt * d * 2),
           BufferUse("aic", "l1", "S x 1", hpc * bt * 2),
           BufferUse("aic", "l0a", f"Q/S tiles x {plan.l0_slots}", plan.l0_slots * a_slot),
           BufferUse("aic", "l0b", f"K/V tiles x {plan.l0_slots}", plan.l0_slots * b_slot),
           BufferUse("aic", "l0c", f"O {hpc}x{d} fp32", hpc * d * 4),
           BufferUse("aic", "l0c", f"P {hpc}x{bt} fp32", hpc * bt * 4)]
    for v in range(plan.n_aiv):
        for label, size in _ub_parts(p, plan.rows, plan.chunk_tokens, plan.gather_chunks,
                                     plan.frag_cols, plan.ub_rows):
            out.append(BufferUse(f"aiv{v}", "ub", label, size))
    return out


def gather_slot_bytes(p, plan: Plan) -> list[int]:
    """Bytes of one AIV's UB gather slots, per KV row format (cleared at kernel start)."""
    return [plan.gather_chunks * plan.chunk_tokens * row for _, row in plan.ub_rows]
