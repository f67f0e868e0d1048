"""Sparse MLA schedule generator: structure, FLOPs, buffer plans and user errors (no SimPy)."""

from __future__ import annotations

import dataclasses

import pytest

from simnode.errors import ScheduleError
from simnode.instr import isa
from simnode.instr.schedule import to_records
from simnode.kernels.sparse_mla import core, gathers, vf
from simnode.kernels.sparse_mla.plan import choose_plan
from simnode.kernels.sparse_mla import (KV_ROW_BYTES, SparseMlaParams, drain_flags, flops,
                                        item_blocks, select_tokens, sparse_mla_schedule)

SMALL = dict(n_q=64, kv_len=1024, topk=256)


def _sched(chip, **kw):
    return sparse_mla_schedule(chip, SparseMlaParams(**{**SMALL, **kw}))


def test_flops_follow_the_published_formula():
    p = SparseMlaParams(n_q=4096, topk=640)
    assert flops(p) == 2.0 * 4096 * 64 * 640 * (512 + 512)
    d = SparseMlaParams(mode="decode", batch=64, s_q=4, topk_main=128, topk_extra=512)
    assert flops(d) == 2.0 * 256 * 64 * 640 * 1024


@pytest.mark.parametrize("kw", [{}, {"kv_dtype": "fp8"}, {"kv_dtype": "fp4"},
                                {"heads_per_core": 32}, {"vector_cores_per_cube": 1},
                                {"vector_cores_per_cube": 1, "b_topk": 128}, {"b_topk": 128},
                                {"mode": "decode", "batch": 4, "extra_dtype": "fp4"}])
def test_shipped_variants_pass_the_950dt_buffer_check(chip, kw):
    _sched(chip, **kw).check(chip)


def test_oversized_b_topk_is_rejected_naming_the_buffer(chip):
    with pytest.raises(ScheduleError, match=r"L0B of aic overflows: demand 131072 B \(K/V tiles x 2 131072 B\) exceeds the capacity 65536 B"):
        _sched(chip, b_topk=256).check(chip)


@pytest.mark.parametrize("kw, msg", [
    ({"vector_cores_per_cube": 3}, "vector_cores_per_cube = 3: expected 1 or 2"),
    ({"heads_per_core": 48}, "heads_per_core = 48: expected a multiple of 16 that divides heads = 64"),
    ({"b_topk": 40}, "b_topk = 40: expected a positive multiple of 16"),
    ({"topk": 2048}, "kv top-k 2048 over length 1024: expected 0 < top-k <= length"),
    ({"kv_dtype": "int8"}, "kv dtype 'int8': expected one of bf16, fp8, fp4"),
    ({"d_qk": 576}, "d_qk = 576, d_v = 512: the MLA latent is shared by K and V"),
])
def test_bad_parameters_get_a_clear_message(chip, kw, msg):
    with pytest.raises(ScheduleError, match=msg.replace("(", r"\(")):
        _sched(chip, **kw)


def test_each_block_gathers_its_tokens_two_rows_per_request_each_its_own_l2_region(chip):
    s = _sched(chip, n_q=32)
    copies = [i for prog in s.cores for (u, pp), ins in prog.pipes.items() if pp == "mte2" and u != "aic"
              for i in ins if type(i) is isa.Copy and i.label.startswith("KV gather")]
    # gather2 (facts 3.4): one request per 2 tokens, each token its own L2 region
    assert len(copies) == 32 * 256 // 2
    assert {(c.size_bytes, len(c.regions)) for c in copies} == {(2048, 2)}
    assert len({k for c in copies for k in c.regions}) <= 1024
    single = [i for prog in _sched(chip, n_q=32, gather2=False).cores
              for (u, pp), ins in prog.pipes.items() if pp == "mte2" and u != "aic"
              for i in ins if type(i) is isa.Copy and i.label.startswith("KV gather")]
    assert len(single) == 32 * 256 and {c.size_bytes for c in single} == {1024}


def test_gather2_keeps_32_tokens_within_the_16_entry_queue(chip):
    def stalls(g2):
        s = _sched(chip, n_q=32, gather2=g2)
        prog = s.cores[0]
        return sum(1 for i in prog.pipes[("aiv0", "mte2")]
                   if type(i) is isa.SetFlag and i.dst == "v" and i.event == 2)
    assert stalls(True) == 0
    assert stalls(False) == len(item_blocks(SparseMlaParams(**SMALL), 0, 0,
                                            select_tokens(SparseMlaParams(**SMALL))))


def test_skip_scale_off_drains_every_later_block_and_on_drains_the_share(chip):
    p = SparseMlaParams(**SMALL)
    blocks = [b for q in range(8) for b in item_blocks(p, q, q, select_tokens(p))]
    off = drain_flags(SparseMlaParams(**SMALL, skip_scale_threshold=0), blocks)
    assert off == [i > 0 for i in range(len(blocks))]
    on = drain_flags(SparseMlaParams(**SMALL, rescale_share=0.25), blocks)
    firsts = sum(b.first for b in blocks) - 1
    assert sum(on) - firsts == (len(blocks) - firsts - 1) // 4


def test_heads_below_the_saturating_m_put_tokens_on_the_mmad_m(chip):
    s = _sched(chip, n_q=8, heads_per_core=32)
    mm = [i for i in s.cores[0].pipes[("aic", "m")] if type(i) is isa.Mmad]
    assert all(i.m >= chip.cube.saturating_m_rows for i in mm)
    assert s.meta["orientation"] == "tokens-as-M"


def test_generation_is_deterministic(chip):
    assert to_records(_sched(chip, n_q=8)) == to_records(_sched(chip, n_q=8))
    assert to_records(_sched(chip, n_q=8, seed=1)) != to_records(_sched(chip, n_q=8))


def test_l0c_holds_one_o_and_one_p_and_fixpipe_follows_the_kernels_order(chip):
    """S2 kernel_body.h: l0c_p_buf = l0c_out_buf + MMA_M * D_VO (one O, one P, no spare
    regions); FIX copies P[g], then the rescale drain before O[g-1], then the O of an item
    ending at g-1; a rescale drain holds the whole O += S V back (L0C_O_EMPTY), an item's
    first O += S V waits n-tile by n-tile (unit_flag)."""
    nq = chip.num_ai_cores + 1                 # core 0 runs items 0 and num_ai_cores
    s = _sched(chip, n_q=nq, rescale_share=0.5)
    prog = s.cores[0]
    l0c = [b for b in prog.buffers if b.unit == "aic" and b.buffer == "l0c"]
    assert sorted(b.size_bytes for b in l0c) == [64 * 64 * 4, 64 * 512 * 4]
    fix = [("P" if i.label == "P -> UB" else "O") for i in prog.pipes[("aic", "fix")]
           if type(i) is isa.Fixpipe]
    p = SparseMlaParams(**{**SMALL, "n_q": nq, "rescale_share": 0.5})
    blocks = [b for q in (0, nq - 1) for b in item_blocks(p, q, q, select_tokens(p))]
    drain = drain_flags(p, blocks)
    expect = []
    n = len(blocks)
    for g in range(n + 1):
        expect += ["P"] if g < n else []
        expect += ["O"] * 4 if g >= 1 and drain[g - 1] and not blocks[g - 1].first else []
        expect += ["O"] * 4 if g >= 1 and (g == n or blocks[g].first) else []
    assert fix == expect
    # M: every P after the first waits for the previous P's copy-out (event 0); an O += S V
    # after a rescale drain waits for all four O n-tiles before its first MMAD
    m = prog.pipes[("aic", "m")]
    waits_p = [i for i in m if type(i) is isa.WaitFlag and i.src == "fix" and i.event == 0]
    assert len(waits_p) == n - 1
    rescales = sum(1 for b, d in zip(blocks, drain) if d and not b.first)
    assert rescales >= 1
    runs, cur = [], 0
    for i in m:
        if type(i) is isa.WaitFlag and i.src == "fix" and i.event >= 1:
            cur += 1
        elif type(i) is isa.Mmad:
            if cur:
                runs.append(cur)
            cur = 0
    assert runs.count(4) == rescales and runs.count(1) == 4 and set(runs) <= {1, 4}


@pytest.mark.parametrize("vpc", [2, 1])
def test_the_aiv_preprocesses_each_index_group_after_softmax_as_the_kernel_orders_its_vector_work(
        chip, vpc):
    """facts 3.4, S2: the vector step s is ND2NZ(s+a), softmax(s+1), index preprocessing(s+g),
    O scale(s); run_process_index works once per group of 640 indices (S2 returns early on
    the group's other blocks). With one AIV per cube the gather lead g shrinks to the ND2NZ
    lead a, and the preprocessing of block b must come before ND2NZ(b) (which needs the
    gather it releases), so it moves in front of the step's ND2NZ and follows softmax(s) of
    the step before."""
    p = SparseMlaParams(**{**SMALL, "vector_cores_per_cube": vpc})
    a, g = core.leads(p, choose_plan(chip, p, ["bf16"]))
    assert (g > a) is (vpc == 2)
    labels = [i.label for i in sparse_mla_schedule(chip, p).cores[0].pipes[("aiv0", "v")]
              if type(i) is isa.VecOp]
    pre = [k for k, lab in enumerate(labels) if lab == "index preprocess"]
    softmax = [k for k, lab in enumerate(labels) if lab == "softmax"]
    # core 0 runs items 0 and 32, 4 blocks each, one index group (256 < 640 indices) each
    starts = [b for b, blk in enumerate(item_blocks(p, 0, 0, select_tokens(p))
                                        + item_blocks(p, 32, 32, select_tokens(p)))
              if blk.index_group >= 0]
    assert starts == [0, 4] and len(pre) == len(starts) and len(softmax) == 8
    for b, k in zip(starts, pre):
        before = [i for i, s in enumerate(softmax) if s < k]        # blocks of earlier softmaxes
        want = b - g + 1 if g > a else b - g
        assert (before[-1] if before else -1) == max(want, -1)


def test_vector_functions_cost_s2s_instructions(chip):
    """The AIV's VFs are S2's instructions (sparse_mla.vf): FP8 dequant takes 22 ALU
    instructions per token (2 scale interleaves on EXU0, then per 128 elements 2 FP8 -> fp32
    conversions, shift, or, scale multiply), 6 loads and 4 vsstb stores, after a scale
    prologue (4 set-up + 2 per 8 tokens); FP4 takes 8 (per 128 elements the decoder
    conversion and the multiply) and its 32 tokens decode to 32 KiB of bf16, 512 cycles at
    the decoder's 64 B/cycle."""
    pro8, fp8 = vf.dequant("fp8", 32, 544)
    pro4, fp4 = vf.dequant("fp4", 32, 288)
    assert (fp8.ops, fp8.exu0_ops, fp8.loads, fp8.stores) == (32 * 22 * 64, 32 * 2 * 64, 32 * 6, 32 * 4)
    assert pro8.ops == (4 + 4 * 2) * 64 and (pro8.vf_calls, fp8.vf_calls) == (1, 0)
    assert fp8.op_class == pro8.op_class == "vf_alu"
    assert fp4.ops == 32 * 8 * 64 and pro4.ops == (4 + 8 * 4) * 64 and fp4.decode_bytes == 32 * 512 * 2
    assert fp4.decode_bytes / chip.vector.fp4_decode_B_per_cycle == 512
    # at the calibrated one instruction per cycle (vf_issue_per_cycle) FP8's 704 instructions
    # take 704 cycles; on the hardware's 2 EXUs (the sourced what-if) 352, its 128 stores on
    # one port fewer. The FP4 body is paced by its decoder either way
    v = chip.vector
    assert v.cycles(fp8) == pytest.approx(32 * 22)
    assert v.cycles(fp4) == pytest.approx(512)
    dual = dataclasses.replace(v, vf_issue_per_cycle=0)
    assert dual.cycles(fp8) == pytest.approx(32 * 22 / 2)
    assert dual.cycles(fp4) == pytest.approx(512)
    # softmax of a later block in its 4 phases between barriers; 32 exps (one per register)
    phases = vf.softmax(32, 64, first=False)
    assert len(phases) == 4 and sum(ph.sfu_ops for ph in phases) == (32 + 1) * 64
    assert [ph.vf_calls for ph in phases] == [1, 0, 0, 0]
    assert len(vf.softmax(32, 64, first=True)) == 3
    # decode walks its group's indices (128: one pair of registers), prefill all 640
    assert vf.process_index("decode", 128)[0].ops == (7 + 28) * 64
    assert vf.process_index("decode", 512)[0].ops == (7 + 4 * 28) * 64
    assert vf.process_index("prefill", 300)[0].ops == (4 + 5 * 10) * 64
    # the final output adds the accumulator only if a rescale drain left one
    assert vf.final_output(32, 128, True)[0].ops > vf.final_output(32, 128, False)[0].ops


def test_a_vf_is_priced_by_its_exus_ports_chain_and_fixed_start(chip):
    """VectorSpec.cycles (topologies/ascend950dt.yaml, VfSimulator / CANN dual-issue): 2 EXUs
    at one instruction each per cycle; EXU0-only work on one; special functions every 4
    cycles per EXU; 2 load ports, 1 store port, 2 UB slots; the longest dependent chain if
    longer; 23 + 12 cycles per call. (The sourced mechanisms, without the calibrated issue
    rate: the next test.)"""
    v = dataclasses.replace(chip.vector, vf_issue_per_cycle=0)
    fixed = v.vf_startup_cycles + v.vf_drain_cycles
    assert (v.vf_issue_ports, v.ops_per_cycle["vf_alu"], fixed) == (2, 64, 35)

    def cyc(**kw):
        return v.cycles(isa.VecOp(kw.pop("alu", 0) * 64, "vf_alu", **kw))
    assert cyc(alu=100) == 50                                  # dual issue
    assert cyc(alu=100, exu0_ops=80 * 64) == 80                # EXU0-only share binds
    assert cyc(alu=100, exu0_ops=40 * 64) == 50
    assert cyc(sfu_ops=10 * 64) == 20                          # one exp per 4 cycles per EXU
    assert cyc(alu=30, sfu_ops=10 * 64) == 20
    assert cyc(alu=60, sfu_ops=10 * 64) == 35                  # issue slots: (60 + 10) / 2
    assert cyc(loads=40) == 20 and cyc(stores=40) == 40 and cyc(loads=40, stores=20) == 30
    assert cyc(alu=2, chain=(1, 1, 3, 1, 1, 1)) == 9 + 9 + 3 * 7 + 11 + 16 + 18   # latency-bound
    assert cyc(alu=100, vf_calls=1) == 50 + fixed
    # the element-wise classes keep their rates, and a VF without EXU data keeps its old price
    assert v.cycles(isa.VecOp(51 * 10, "simple", 256)) == 10


def test_the_calibrated_issue_rate_caps_compute_issue_and_nothing_else(chip):
    """vf_issue_per_cycle (calibrated, 1 on the 950DT) caps the issue stage; each family's own
    rate (exps a pair every 4 cycles), loads, stores, chains and the call cost keep their
    prices, and a rate above the EXU count changes nothing."""
    v = chip.vector
    assert (v.vf_issue_ports, v.vf_issue_per_cycle) == (2, 1)

    def cyc(spec, **kw):
        return spec.cycles(isa.VecOp(kw.pop("alu", 0) * 64, "vf_alu", **kw))
    assert cyc(v, alu=100) == 100
    assert cyc(v, sfu_ops=10 * 64) == 20                       # the SFUs still pair every 4
    assert cyc(v, alu=10, loads=40) == 20 and cyc(v, alu=10, stores=40) == 40
    assert cyc(v, alu=2, chain=(1, 0, 2, 0, 0, 0)) == 9 + 2 * 7
    dual = dataclasses.replace(v, vf_issue_per_cycle=0)
    assert cyc(dataclasses.replace(v, vf_issue_per_cycle=3), alu=100) == cyc(dual, alu=100) == 50


def test_a_chip_file_without_vf_fields_prices_a_vf_by_its_rate_alone(repo_root):
    """The VF fields have defaults that leave a chip file written before them (ascend910c)
    as it was: one EXU, no fixed cost, no chain."""
    from simnode.config.chip import load_chip
    v = load_chip(repo_root / "topologies/ascend910c.yaml").vector
    op = isa.VecOp(64 * 10, "vf_alu", 0, "x", vf_calls=1, chain=(1, 1, 1, 1, 1, 1))
    assert v.cycles(op) == pytest.approx(64 * 10 / v.ops_per_cycle["vf_alu"])


def test_decode_kv_bypasses_l2_unless_the_cache_is_small_and_reused_as_s2_decides(chip):
    """S2 run(): NORMAL_LAST_VICTIM only for caches of <= 8 MiB read >= 4x per token, else
    NOTALLOC_CLEAN; prefill always allocates."""
    def hints(**kw):
        s = _sched(chip, **kw)
        return {i.l2_hint for prog in s.cores for (u, pp), ins in prog.pipes.items()
                if u != "aic" and pp == "mte2" for i in ins
                if type(i) is isa.Copy and i.label.startswith("KV gather")}, s.meta["kv_l2_hint"]
    decode = dict(mode="decode", topk_main=128, topk_extra=512)
    assert hints(**decode, batch=64, s_q=4, main_len=256, extra_len=2048) == ({"notalloc"}, "notalloc")
    # the "prefill-as-decode" shape: one sequence of 4096 + 4096 tokens (4.3 MB), 4096 queries
    assert hints(**decode, batch=1, s_q=64, main_len=4096, extra_len=4096) == ({"normal"}, "normal")
    assert hints() == ({"normal"}, "normal")


def test_every_pipe_starts_after_the_launch_and_the_cold_start(chip):
    """facts 1.2, S6: kernel launch + InitSocState (1.9 us), then a cold start if one is set
    (calibrated by default, 0 for warm caches), on each unit's scalar pipe; every other pipe
    waits for them."""
    prog = _sched(chip, n_q=8, kernel_launch_ns=1900, cold_start_ns=500).cores[0]
    for (unit, pipe), ins in prog.pipes.items():
        if pipe == "s":
            assert [i.time_ns for i in ins if type(i) is isa.Delay] == [1900, 500]
        else:
            assert ins[0] == isa.WaitFlag("s", pipe, 0)
    bare = _sched(chip, n_q=8, kernel_launch_ns=0, cold_start_ns=0).cores[0]
    assert ("aic", "s") not in bare.pipes


def test_each_item_writes_its_lse_and_prefill_its_max_logits(chip):
    def written(**kw):
        prog = _sched(chip, **kw).cores[0]
        return sorted(i.gm_key[0] for i in prog.pipes[("aiv0", "mte3")]
                      if type(i) is isa.Copy and i.path == "ub_to_gm" and i.gm_key[0] != "o")
    assert written(n_q=32) == ["lse", "max_logits"]            # core 0: one item
    assert written(mode="decode", batch=8, s_q=4) == ["lse"]


def test_cli_rejects_a_negative_vf_issue_rate_naming_the_key(cli, topology_path, repo_root,
                                                             user_error):
    res = cli("run", topology_path, repo_root / "workloads" / "sparse-mla-decode.yaml",
              "--set", "topology.chip.vector.vf_issue_per_cycle=-1")
    user_error(res, "ascend950dt.yaml (with --set overrides)",
               "chip.vector.vf_issue_per_cycle = -1", "expected a number >= 0", nothing_ran=True)


def test_gathers_made_by_filling_slots_equal_isa_copys_own_records(chip):
    # ``_new_copies`` skips the frozen dataclass's __init__: its records must be the ones
    # isa.Copy builds (every field, equality, hash), and the schedule's gathers such records
    for args in (("gm_to_ub", 1152, ("kv", "kv", 0, 7), "normal", "KV gather", ()),
                 ("gm_to_ub", 2304, None, "notalloc", "KV gather2",
                  (("kv", "kv", 0, 1), ("kv", "kv", 0, 9)))):
        # a list field gives each record its own value
        made = gathers._new_copies(2, args[:2] + ([args[2], ("kv", "kv", 1, 3)],) + args[3:])
        for fast, own in zip(made, (isa.Copy(*args), isa.Copy(*args[:2], ("kv", "kv", 1, 3), *args[3:]))):
            assert type(fast) is isa.Copy and fast == own and hash(fast) == hash(own)
            assert [getattr(fast, f) for f in isa.Copy.__slots__] == \
                [getattr(own, f) for f in isa.Copy.__slots__]
    made = [i for c in _sched(chip).cores for i in c.pipes[("aiv0", "mte2")]
            if type(i) is isa.Copy and i.label.startswith("KV gather")]
    assert made and all(i == isa.Copy(i.path, i.size_bytes, i.gm_key, i.l2_hint, i.label,
                                      i.regions) for i in made)


def test_gather_records_follow_each_chunks_tokens_in_any_order(chip):
    # gather_chunks codes descriptors as integers over all blocks at once: each chunk's records
    # must still name its own tokens, two per gather2 descriptor, whatever their order
    p = SparseMlaParams(**SMALL)
    plan = choose_plan(chip, p, ["bf16"])
    sel = select_tokens(p)
    blocks = [b for q in range(4) for b in item_blocks(p, q, q, sel)]
    blocks = [dataclasses.replace(b, tokens=b.tokens[::-1]) if i % 2 else b for i, b in enumerate(blocks)]
    per_aiv = gathers.gather_chunks(p, plan, [blocks], "normal")[0]
    for b, blk in enumerate(blocks):
        toks = [t for v in range(plan.n_aiv) for n, recs in per_aiv[v][b] for r in recs
                for t in (k[3] for k in r.regions)]
        assert sorted(toks) == sorted(blk.tokens)
        for v in range(plan.n_aiv):
            for n, recs in per_aiv[v][b]:
                assert len(recs) == n // 2 and all(r.size_bytes == 2048 for r in recs)
    chunk0 = per_aiv[0][1][0][1]            # block 1 (reversed): its first chunk's first pair
    assert chunk0[0].regions == (("kv", "kv", 0, blocks[1].tokens[0]), ("kv", "kv", 0, blocks[1].tokens[1]))


def test_the_built_schedule_is_left_to_the_collectors_permanent_generation(chip):
    import gc
    gc.unfreeze()
    try:
        s = _sched(chip)
        gens = gc.get_objects(0) + gc.get_objects(1) + gc.get_objects(2)
        tracked = {id(o) for o in gens}
        # the records (tracked containers) are frozen: none is left for the next pass to walk
        assert gc.get_freeze_count() > 0
        assert not any(id(prog) in tracked or id(ins) in tracked
                       for prog in s.cores for instrs in prog.pipes.values() for ins in instrs[:50])
        assert gc.get_count()[0] < 10
    finally:
        gc.unfreeze()
