"""Sparse MLA attention schedule after FlashMLA's Ascend 1C2V kernel (facts 3.4, S1/S2).

``SparseMlaParams`` describes a prefill (``n_q`` queries over one KV of ``kv_len``
tokens), a decode (``batch x s_q`` queries over a main and an extra cache, each
with its own top-k, length and dtype) or DeepSeek-V4's decode op on the 950 (mode
``v4``: each query over its window and its compressed entries, tiled by the op's metadata;
module ``v4``). ``sparse_mla_schedule(chip, params)`` deals the work items (one query x
one block of ``heads_per_core`` heads) to the AI cores and builds each core's program
(``blocks.programs``, ``core.core_program``); ``sparse_mla_roofline`` gives the lower
bounds. Pure functions: no SimPy.

Modeling assumptions a reader could doubt:

- D = 512 for both QK and V (facts 2.2, S8 FLOP formula d_qk = d_v = 512): the MLA
  latent is 512 wide and K and V are the same gathered row; rope dims are not
  modeled separately (the published FLOP count has none), so a KV row is the 512
  latent values (1024 B BF16, 528 B FP8, 288 B FP4 with their scales, facts 2.2; the
  950's V4 C8 entry 640 B, ``plan.KV_ROW_BYTES``).
- Selected tokens: each query's top-k indices are drawn uniformly at random without
  replacement over the cache length (seeded). Each token row is its own L2 region
  (``gm_key``), so queries that select the same token re-read it from L2: the L2
  hit rate follows from topk / kv_len and the 128 MiB L2, not from a parameter.
- Skip-scale (facts 3.4): a block needs an O rescale only when its row max rises by
  more than ``skip_scale_threshold`` (nats). Scores are not simulated, so the share
  of such blocks is the parameter ``rescale_share`` (no source gives it; 5% is an
  assumption, stated before any run). Threshold 0 means skip-scale off: every block
  after an item's first rescales, the case S1's 1C1V FixPipe bound assumes.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np

from simnode.config.chip import ChipSpec
from simnode.config.params import param
from simnode.errors import ScheduleError
from simnode.kernels import builds_records, num_cores_param
from simnode.instr.schedule import KernelSchedule, lockstep_groups
from simnode.kernels.sparse_mla import v4
from simnode.kernels.sparse_mla.blocks import Block, cache_blocks, drain_flags, programs
from simnode.kernels.sparse_mla.plan import KV_ROW_BYTES, choose_plan

KV_DTYPES = ("bf16", "fp8", "fp4", "c8")
V4_LAYERS = v4.LAYERS
DEFAULT_RESCALE_SHARE = 0.05     # assumption (see module docstring): blocks whose max jumps > threshold
KERNEL_LAUNCH_NS = 1900.0        # facts 1.2, S6: kernel launch + InitSocState ~1.9 us (M)
# The per-launch time beyond the launch: a recorded CALIBRATION, not a sourced value.
# S8 times each launch after an 8 GB L2 flush, and a line through its decode rows against the
# batch leaves ~12.4 us (FP8) / ~10.6 us (FP4) per launch where the model has ~3.5 (launch,
# first gathers from HBM, pipeline fill and drain). The likely rest is the cold instruction
# side: 16 KB VECTOR and 8 KB SIMD VF i-caches (facts 1.2, S1), code fetched in 2 KB units
# (CANN Ascend C guide, "Compute Units", atlas_ascendc_10_0009), and S2's commented-out
# "VF warmup ... cache-miss-like behaviour when we call one VF for the first time". No
# source gives the kernel's code size or a fetch-miss latency, so the value is fitted:
# `simnode calibrate topologies/ascend950dt.yaml validation/published.yaml --only
# 'sparse-mla-decode-fp8-b64' --fit cold_start_ns=0:20000` gave 10685.7 ns with the VFs at
# one issue per cycle (validation/published.yaml records that case as its fit; issue 22
# stays open on it). 0 is the what-if of warm caches.
COLD_START_NS = 10686.0
# The cold start inside a graph replay: REASONED, not measured. The calibrated value above is
# the per-launch time S8 sees after an 8 GB L2 flush, most likely the instruction side
# fetching its code from HBM into cold i-caches (docs/sparse-mla-vf.md, "The cold start").
# V4's decode runs as one captured graph replayed per step (npugraph_ex, facts v4-decode 2):
# nothing flushes L2 between its tasks, and V4's attention op preloads its i-cache before its
# main loop (SAS Process(): ICachePreLoad(6); FlashMLA's S2 kernel has its VF warm-up
# commented out), so the fetches the calibration stands for are issued at once, from L2, under
# the launch. 0 leaves the launch (kernel_launch_ns) as the per-launch time. The other bound
# is cold_start_ns: a layer's other kernels stream more than the 128 MiB L2 between two
# launches of this op (V4-Flash's routed experts alone are ~142 MB per layer), so its code
# may have left L2 by the next layer.
REPLAY_COLD_START_NS = 0.0
# The prefill's lock-step reduced form (simnode.hardware.lockstep): its default resolution is
# the fewest groups measured within 0.1% of the detailed makespan at every n_q from 128 to 4096
# at the published kv_len 8192 (+0.05 to +0.09%; 4 groups: +0.87% at 2048; 16: within 0.02%
# but 1.4x rather than 2.1x faster; benchmarks/README.md, "Lock-step prefill, round 7"). Its
# bias grows with the cold phase: at kv_len 32768 (each KV row read 80 times, not 320) 8 groups
# are +0.20%, 16 groups -0.005%. With fewer than LOCKSTEP_MIN_ITEMS items per core the cold
# phase dominates (8 groups: -0.13% at n_q 64) and every core runs; such runs take a second
# or two in full.
LOCKSTEP_GROUPS = 8
LOCKSTEP_MIN_ITEMS = 4
# S2 run(): decode allocates its KV in L2 only when a small cache is read again and again
SMALL_CACHE_BYTES = 8 * 1024 * 1024     # S2 SMALL_CACHE_BYTES
MIN_CACHE_REUSE = 4                     # S2 MIN_CACHE_REUSE: token reads per cached token


@dataclass(frozen=True)
class SparseMlaParams:
    """The ``sparse_mla`` workload's fields: each declared once here (``simnode.config.params``)."""
    mode: str = param("prefill", "prefill, decode (FlashMLA's main + extra caches) or v4 (DeepSeek-V4's "
                      "decode op on the 950: window + compressed caches, module v4)",
                      choices=("prefill", "decode", "v4"))
    n_q: int = param(4096, "prefill queries", unit="queries", min=1)
    kv_len: int = param(8192, "prefill KV length", unit="tokens", min=1)
    topk: int = param(640, "prefill selected KV entries per query (tokens of its cache)", unit="entries", min=1)
    kv_dtype: str = param("bf16", "prefill KV cache dtype", choices=KV_DTYPES)
    batch: int = param(64, "decode sequences", unit="sequences", min=1)
    s_q: int = param(4, "decode queries per sequence", unit="queries", min=1)
    topk_main: int = param(128, "decode main-cache top-k", unit="tokens", min=1)
    topk_extra: int = param(512, "decode extra-cache top-k (v4: the CSA layer's indexer top-k)",
                            unit="tokens", min=1)
    main_len: int = param(256, "decode main-cache length", unit="tokens", min=1)
    extra_len: int = param(2048, "decode extra-cache length", unit="tokens", min=1)
    main_dtype: str = param("fp8", "decode main-cache dtype (v4: the window cache's; c8 = the 950's "
                            "640-B entry)", choices=KV_DTYPES)
    extra_dtype: str = param("fp8", "decode extra-cache dtype (v4: the compressed cache's)",
                             choices=KV_DTYPES)
    heads: int = param(64, "query heads H", unit="heads", min=1)
    d_qk: int = param(512, "QK head dim: the MLA latent, a multiple of the 128-wide L0 tiles",
                      unit="elements", min=1)
    d_v: int = param(512, "V head dim: the same latent as d_qk (K and V are one gathered row), so "
                     "equal to it", unit="elements", min=1)
    heads_per_core: int = param(64, "query heads one AI core handles per item", unit="heads", min=1)
    b_topk: int = param(64, "selected tokens per pipeline step (facts 3.4)", unit="tokens", min=1)
    vector_cores_per_cube: int = param(2, "AIVs per cube: 2 = 1C2V (FlashMLA), 1 = 1C1V", unit="AIVs",
                                       min=1)
    gather2: bool = param(True, "one MTE2 descriptor fetches two tokens (facts 3.4)")
    skip_scale_threshold: float = param(6.0, "skip-scale threshold after sm_scale (facts 3.4); 0 = off",
                                        unit="nats", min=0)
    rescale_share: float = param(DEFAULT_RESCALE_SHARE, "share of non-first blocks needing an O "
                                 "rescale with skip-scale on (an assumption: module docstring)",
                                 unit="fraction", min=0, max=1, origin="reasoned")
    sinks: bool = param(True, "attention sinks in the softmax denominator")
    seed: int = param(0, "seed of the uniform top-k token selection", unit="1", min=0)
    num_cores: int = num_cores_param()
    lockstep_groups: int = param(LOCKSTEP_GROUPS, "prefill: lock-step groups its cores are dealt "
                                 "into, each simulated as one representative core "
                                 "(simnode.hardware.lockstep; 8 keep the makespan within 0.1% of "
                                 "every core's from n_q 128 to 4096 at kv_len 8192); 0 = every core",
                                 unit="groups", min=0, origin="reasoned")
    kernel_launch_ns: float = param(KERNEL_LAUNCH_NS, "kernel launch + InitSocState (facts 1.2, S6)",
                                    unit="ns", min=0, origin="sourced")
    cold_start_ns: float = param(COLD_START_NS, "per-launch cold-start cost beyond the launch, "
                                 "calibrated on S8's FP8 batch-64 decode (no source gives it; 0 = warm)",
                                 unit="ns", min=0, origin="calibrated")
    graph_replay: bool = param(False, "the launch is one task of a replayed graph (npugraph_ex), not "
                               "an eager launch after an L2 flush: its cold start is "
                               "replay_cold_start_ns instead of cold_start_ns")
    replay_cold_start_ns: float = param(REPLAY_COLD_START_NS, "per-launch cold-start cost beyond the "
                                        "launch inside a graph replay (reasoned: REPLAY_COLD_START_NS)",
                                        unit="ns", min=0, origin="reasoned")
    layer: str = param("csa", "v4: the layer's attention: csa (window + the indexer's top-k of the "
                       "x csa_ratio compressed cache), hca (window + every x hca_ratio compressed "
                       "entry) or window (window alone)", choices=V4_LAYERS)
    context_len: int = param(8192, "tokens in each sequence's KV cache at the step", unit="tokens",
                             min=1)
    window: int = param(128, "v4: each query's sliding window, itself included (facts v4-decode 1; "
                        "the op's ori_win_left 127)", unit="tokens", min=1, origin="sourced")
    csa_ratio: int = param(4, "v4: tokens per entry of a CSA layer's compressed cache (facts "
                           "v4-decode 1)", unit="tokens", min=1, origin="sourced")
    hca_ratio: int = param(128, "v4: tokens per entry of an HCA layer's compressed cache (facts "
                           "v4-decode 1)", unit="tokens", min=1, origin="sourced")
    split_kv: bool = param(False, "v4: the metadata op splits a query's blocks over cores and vector "
                           "cores combine the parts (its flash-decode path; off in the published "
                           "op, supportFd = false: a what-if)")
    sync_all_ns: float = param(1000, "SyncAll: every AIV of the die waits for all (a hardware "
                               "cross-core barrier); v4 with 128 heads meets one per block",
                               min=0, origin="reasoned",
                               cite="no figure published; a cross-core flag round over the die's "
                                    "AI cores, about two GM round trips (as simnode.ep's)")


def _err(p: SparseMlaParams, what: str) -> ScheduleError:
    return ScheduleError(f"sparse MLA ({p.mode}): {what}")


def validate(p: SparseMlaParams, chip: ChipSpec) -> None:
    if p.mode not in ("prefill", "decode", "v4"):
        raise _err(p, f"mode '{p.mode}': expected prefill, decode or v4.")
    if p.d_qk != p.d_v or p.d_qk % 128:
        raise _err(p, f"d_qk = {p.d_qk}, d_v = {p.d_v}: the MLA latent is shared by K and V, "
                      f"so expected equal sizes that are multiples of the 128-wide L0 tiles.")
    if p.heads_per_core <= 0 or p.heads_per_core % 16 or p.heads % p.heads_per_core:
        raise _err(p, f"heads_per_core = {p.heads_per_core}: expected a multiple of 16 that "
                      f"divides heads = {p.heads}.")
    if p.b_topk <= 0 or p.b_topk % 16:
        raise _err(p, f"b_topk = {p.b_topk}: expected a positive multiple of 16 (cube fractal).")
    if p.vector_cores_per_cube not in (1, 2) or p.vector_cores_per_cube > chip.aiv_per_core:
        raise _err(p, f"vector_cores_per_cube = {p.vector_cores_per_cube}: expected 1 or "
                      f"{chip.aiv_per_core} (AIVs per AI core of '{chip.name}').")
    if (p.heads_per_core // p.vector_cores_per_cube) % 16:
        raise _err(p, f"heads_per_core = {p.heads_per_core} over {p.vector_cores_per_cube} "
                      f"vector cores: each AIV's share of heads must be a multiple of 16.")
    if p.skip_scale_threshold < 0 or not 0 <= p.rescale_share <= 1:
        raise _err(p, f"skip_scale_threshold = {p.skip_scale_threshold}, rescale_share = "
                      f"{p.rescale_share}: expected a threshold >= 0 and a share in [0, 1].")
    wrong = v4.problem(p, chip) if p.mode == "v4" else None
    if wrong:
        raise _err(p, wrong)
    for name, k, n, dt in _caches(p):
        if dt not in KV_ROW_BYTES:
            raise _err(p, f"{name} dtype '{dt}': expected one of {', '.join(KV_ROW_BYTES)}.")
        if not 0 < k <= n:
            raise _err(p, f"{name} top-k {k} over length {n}: expected 0 < top-k <= length "
                          f"(top-k selects distinct tokens).")
    if p.num_cores < 0 or p.num_cores > chip.num_ai_cores:
        raise _err(p, f"num_cores = {p.num_cores}: expected 0..{chip.num_ai_cores}.")


def _caches(p: SparseMlaParams) -> list[tuple[str, int, int, str]]:
    """(name, top-k, length, dtype) of every cache a FlashMLA query attends to (none in v4,
    whose queries each have their own: module v4)."""
    if p.mode == "v4":
        return []
    if p.mode == "prefill":
        return [("kv", p.topk, p.kv_len, p.kv_dtype)]
    return [("main", p.topk_main, p.main_len, p.main_dtype),
            ("extra", p.topk_extra, p.extra_len, p.extra_dtype)]


def num_queries(p: SparseMlaParams) -> int:
    return p.n_q if p.mode == "prefill" else p.batch * p.s_q


def flops(p: SparseMlaParams) -> float:
    """facts 2.2: 2 * queries * H * topk * (d_qk + d_v)."""
    if p.mode == "v4":
        return v4.flops(p)
    topk = sum(k for _, k, _, _ in _caches(p))
    return 2.0 * num_queries(p) * p.heads * topk * (p.d_qk + p.d_v)


def kv_l2_hint(p: SparseMlaParams) -> str:
    """L2 hint of the KV gathers, S2's rule: prefill reads with NORMAL_LAST_VICTIM; decode
    too if the caches take at most 8 MiB and are read at least 4x per token, else with
    NOTALLOC_CLEAN (the rows bypass L2 allocation, so every gather reads HBM)."""
    if p.mode == "prefill":
        return "normal"
    caches = _caches(p)
    kv_bytes = sum(p.batch * n * KV_ROW_BYTES[dt] for _, _, n, dt in caches)
    kv_tokens = sum(p.batch * n for _, _, n, _ in caches)
    token_reads = num_queries(p) * sum(k for _, k, _, _ in caches)
    small = kv_bytes <= SMALL_CACHE_BYTES and token_reads >= MIN_CACHE_REUSE * kv_tokens
    return "normal" if small else "notalloc"


def select_tokens(p: SparseMlaParams) -> dict:
    """(query, cache) -> sorted selected token ids, uniform without replacement, seeded."""
    rng = np.random.default_rng(p.seed)
    out = {}
    for q in range(num_queries(p)):
        for name, k, n, _ in _caches(p):
            out[(q, name)] = tuple(np.sort(rng.choice(n, k, replace=False)).tolist())
    return out


def item_blocks(p: SparseMlaParams, item: int, q: int, sel: dict) -> list[Block]:
    """The blocks of FlashMLA's item ``item`` (query ``q``): each cache through its top-k
    index list."""
    seq = 0 if p.mode == "prefill" else q // p.s_q
    return cache_blocks(p.b_topk, item, seq, [(name, sel[(q, name)], dt, True)
                                              for name, _, _, dt in _caches(p)])


@builds_records
def sparse_mla_schedule(chip: ChipSpec, p: SparseMlaParams) -> KernelSchedule:
    """Per-core programs of one sparse MLA call; ScheduleError if the buffers overflow."""
    validate(p, chip)
    if p.mode == "v4":
        sched = v4.schedule(chip, p)
        gc.freeze()                 # (as below)
        return sched
    ncores = p.num_cores or chip.num_ai_cores
    plan = choose_plan(chip, p, [dt for _, _, _, dt in _caches(p)])
    sel = select_tokens(p)
    hint = kv_l2_hint(p)
    head_blocks = p.heads // p.heads_per_core
    per_core = [[] for _ in range(ncores)]
    for q in range(num_queries(p)):
        for hb in range(head_blocks):
            item = q * head_blocks + hb
            per_core[item % ncores].extend(item_blocks(p, item, q, sel))
    cores, shapes = programs(chip, p, plan, per_core, hint)
    items = min(sum(b.first for b in blocks) for blocks in per_core if blocks)
    groups = lockstep_groups(shapes, p.lockstep_groups) \
        if p.mode == "prefill" and p.lockstep_groups and items >= LOCKSTEP_MIN_ITEMS else []
    meta = {"kind": "sparse_mla", "mode": p.mode, "queries": num_queries(p),
            "heads_per_core": p.heads_per_core, "b_topk": p.b_topk,
            "vector_cores_per_cube": p.vector_cores_per_cube, "gather2": p.gather2,
            "orientation": "tokens-as-M" if plan.transposed else "heads-as-M",
            "kv_l1_stages": plan.kv_l1_stages, "l0_slots": plan.l0_slots,
            "chunk_tokens": plan.chunk_tokens, "gather_ub_chunks": plan.gather_chunks,
            "o_fragments": plan.fragments, "items": num_queries(p) * head_blocks,
            "kv_l2_hint": hint,
            "blocks_per_core_max": max(len(b) for b in per_core)}
    if groups:
        meta["lockstep_groups"] = len(groups)      # a reduced form runs: the result says so
    sched = KernelSchedule(f"sparse_mla_{p.mode}", cores, flops(p), meta, groups)
    # the collector's permanent generation takes what was just built (millions of records and
    # tuples, no reference cycles): else its first pass once ``builds_records`` turns it on
    # again walks them all (0.6 s at n_q 4096, for nothing). ``ChipSim.run`` freezes them
    # anyway and unfreezes everything when it ends; unrun, they still go by reference count
    gc.freeze()
    return sched


def sparse_mla_roofline(chip: ChipSpec, p: SparseMlaParams) -> dict:
    """Lower bounds in ns: cube at peak on the useful FLOPs, every gathered KV byte through
    L2, and the distinct KV rows once through HBM (expected count under uniform selection)."""
    if p.mode == "v4":
        return v4.roofline(chip, p)
    peak_flop_per_ns = 2 * chip.cube.macs_per_cycle["bf16"] * chip.aic_freq_GHz * chip.num_ai_cores
    items_per_query = p.heads // p.heads_per_core
    gathered = hbm = 0.0
    for name, k, n, dt in _caches(p):
        gathered += num_queries(p) * items_per_query * k * KV_ROW_BYTES[dt]
        readers = num_queries(p) if p.mode == "prefill" else p.s_q
        seqs = 1 if p.mode == "prefill" else p.batch
        hbm += seqs * n * (1.0 - (1.0 - k / n) ** readers) * KV_ROW_BYTES[dt]
    compute_ns = flops(p) / peak_flop_per_ns
    l2_ns = gathered / chip.memory.l2_bandwidth_GBps
    hbm_ns = hbm / chip.memory.hbm_bandwidth_GBps
    return {"compute_ns": compute_ns, "l2_ns": l2_ns, "hbm_ns": hbm_ns,
            "gathered_bytes": gathered, "bound_ns": max(compute_ns, l2_ns, hbm_ns)}
