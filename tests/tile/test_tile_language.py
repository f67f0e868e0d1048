"""The tile language, built and lowered without running anything: copy paths and pipes,
buffer capacities, regions, the exact flags inserted for a small producer/consumer chain,
multi-buffering, stages, vector costs, gemm staging, and every program mistake named with
its file and line."""

from __future__ import annotations

import re

import pytest

from simnode.errors import ConfigError, ScheduleError
from simnode.instr import isa
from simnode.tile import program

HEAD = "import simnode.tile.lang as T\n\n\n@T.program\n"


def _pipes(sched, core=0):
    return sched.cores[core].pipes


def _kinds(instrs):
    out = []
    for i in instrs:
        t = type(i)
        if t is isa.Copy:
            out.append(i.path)
        elif t is isa.Fixpipe:
            out.append(f"fix->{i.dst}")
        elif t is isa.SetFlag:
            out.append(f"set {i.src}->{i.dst} {i.event}")
        elif t is isa.WaitFlag:
            out.append(f"wait {i.src}->{i.dst} {i.event}")
        elif t is isa.CrossSet:
            out.append(f"xset ->{i.to_unit} {i.flag}")
        elif t is isa.CrossWait:
            out.append(f"xwait {i.from_unit}-> {i.flag}")
        else:
            out.append(t.__name__)
    return out


# -- paths, pipes and flags --------------------------------------------------------------

def test_one_tile_through_every_path_gets_the_right_pipes_and_flags(build, lower):
    """GM -> L1 -> L0A/L0B -> cube -> L0C -> both UBs -> vector -> GM: every copy on the pipe
    of its scopes (facts 3.1), each hand-off ordered by one flag, cross-core ones between
    the AIC and each AIV."""
    src = HEAD + """
def k():
    A = T.tensor("A", (128, 64), "bf16")
    B = T.tensor("B", (64, 128), "bf16")
    C = T.tensor("C", (128, 128), "fp32")
    for bx in T.Kernel(1):
        a1 = T.alloc_l1((128, 64), "bf16")
        b1 = T.alloc_l1((64, 128), "bf16")
        a0 = T.alloc_l0a((128, 64), "bf16")
        b0 = T.alloc_l0b((64, 128), "bf16")
        c0 = T.alloc_l0c((128, 128), "fp32")
        u = T.alloc_ub((64, 128), "fp32")
        T.copy(A, a1)
        T.copy(B, b1)
        T.copy(a1, a0)
        T.copy(b1, b0)
        T.gemm(a0, b0, c0, clear_accum=True)
        T.dual_copy(c0, u)
        T.mul(u, u, 2.0)
        T.dual_copy(u, C)
"""
    s = lower(build(src))
    p = _pipes(s)
    assert _kinds(p[("aic", "mte2")]) == ["gm_to_l1", "gm_to_l1", "set mte2->mte1 0"]
    assert _kinds(p[("aic", "mte1")]) == ["wait mte2->mte1 0", "l1_to_l0", "l1_to_l0", "set mte1->m 0"]
    assert _kinds(p[("aic", "m")]) == ["wait mte1->m 0", "Mmad", "set m->fix 0"]
    assert _kinds(p[("aic", "fix")]) == ["wait m->fix 0", "fix->ub_dual", "xset ->aiv0 0", "xset ->aiv1 0"]
    for u in ("aiv0", "aiv1"):
        assert _kinds(p[(u, "v")]) == ["xwait aic-> 0", "VecOp", "set v->mte3 0"]
        assert _kinds(p[(u, "mte3")]) == ["wait v->mte3 0", "ub_to_gm"]
    assert s.flops == 2.0 * 128 * 128 * 64
    halves = [i for u in ("aiv0", "aiv1") for i in p[(u, "mte3")] if type(i) is isa.Copy]
    assert [h.gm_key for h in halves] == [("C", (0, 0), (64, 128)), ("C", (64, 0), (64, 128))]


@pytest.mark.parametrize("src_scope,dst_scope", [("l1", "ub"), ("ub", "l0a"), ("gm", "l0c"), ("l0c", "l1")])
def test_a_copy_without_a_path_names_the_line(build, src_scope, dst_scope):
    src = HEAD + f"""
def k():
    for bx in T.Kernel(1):
        a = T.alloc("{src_scope}", (16, 16), "fp32") if "{src_scope}" != "gm" else T.tensor("g", (16, 16), "fp32")
        b = T.alloc("{dst_scope}", (16, 16), "fp32")
        T.copy(a, b)
"""
    with pytest.raises(ScheduleError) as info:
        build(src)
    msg = str(info.value)
    assert re.search(r"prog\.py:10: no copy path from " + src_scope.upper() + r" \(.*\) to "
                     + dst_scope.upper(), msg), msg


def test_a_buffer_over_capacity_names_the_line_and_every_buffer(build):
    src = HEAD + """
def k():
    for bx in T.Kernel(1, vector=True):
        a = T.alloc_ub((32, 1024), "fp32")
        b = T.alloc_ub((32, 1024), "fp32", versions=2)
"""
    with pytest.raises(ScheduleError) as info:
        build(src)
    msg = str(info.value)
    assert "prog.py:9: UB of aiv0 overflows: demand 393216 B (a 131072 B x 1 (line 8); " \
           "b 131072 B x 2 (line 9)) exceeds the capacity 262144 B (256 KiB)" in msg


def test_a_region_outside_its_tensor_is_a_shape_that_does_not_tile(build):
    src = HEAD + """
def k(n: int = 100):
    x = T.tensor("x", (n, 64), "fp32")
    for bx in T.Kernel(1, vector=True):
        u = T.alloc_ub((32, 64), "fp32")
        for t in range(4):
            T.copy(x[t * 32:(t + 1) * 32], u)
"""
    with pytest.raises(ScheduleError, match=r"prog\.py:11: x\[\.\.\. 96:128 \.\.\.\] on dimension 0 lies "
                                            r"outside its shape \[100, 64\]: a shape that does not tile"):
        build(src)


@pytest.mark.parametrize("body,fragment", [
    ("T.copy(x[0:16], u)", "only FixPipe converts on the path"),
    ("T.add(l1, u, u)", "is in L1: vector ops read and write UB tiles"),
    ("T.copy(x[0:8], l1)", "sizes differ"),
    ("T.gemm(l1, l1, l1)", "gemm C l1[0:16, 0:16]: expected an fp32 L0C tile"),
    ("T.set_flag('mte2', 'v', 0)", "flags are inserted for you"),
    ("T.annotate_buffer_versions({u: 0})", "versions of 'u' = 0: expected an integer >= 1"),
])
def test_misuse_is_named_with_its_line(build, body, fragment):
    src = HEAD + f"""
def k():
    x = T.tensor("x", (16, 16), "bf16")
    for bx in T.Kernel(1):
        u = T.alloc_ub((16, 16), "fp32")
        l1 = T.alloc_l1((16, 16), "bf16")
        {body}
"""
    with pytest.raises(ScheduleError) as info:
        build(src)
    assert "prog.py:11: " in str(info.value)
    assert fragment in str(info.value)


def test_python_errors_in_a_program_name_its_line(build):
    src = HEAD + """
def k(n: int = 4):
    for bx in T.Kernel(1, vector=True):
        blocks = n // 0
"""
    with pytest.raises(ScheduleError, match=r"prog\.py:8: ZeroDivisionError: integer division or modulo by zero"):
        build(src)


@pytest.mark.parametrize("source,fragment", [
    ("import simnode.tile.lang as T\n\ndef k(:\n    pass\n", "prog.py:3: invalid syntax)"),
    ("import simnode.tile.lang as T\n\ndef k():\n    pass\n", "exactly one @T.program function (found: none)"),
    (HEAD + "def k(n):\n    pass\n", "a type for every parameter"),
    (HEAD + "def k(kind: str = 'x'):\n    pass\n", "no parameter named kind"),
])
def test_program_files_that_cannot_run_are_config_errors(program_file, source, fragment):
    path = program_file(source)
    with pytest.raises(ConfigError) as info:
        program.load(path, "work.yaml")
    assert info.value.source == "work.yaml" and info.value.key_path == "program"
    assert fragment in str(info.value)


def test_parameters_come_from_the_signature(program_file):
    path = program_file(HEAD + """
def k(m: int, dtype: str = T.param("bf16", "input type", ("bf16", "fp8")), scale: float = 2,
      on: bool = True):
    pass
""")
    spec = program.load(path, "w")
    fields = {f.name: f for f in spec.fields()}
    assert list(fields) == ["m", "dtype", "scale", "on"]
    assert (fields["m"].type, fields["dtype"].choices, fields["dtype"].doc) == ("int", ("bf16", "fp8"), "input type")
    assert fields["scale"].type == "number" and fields["scale"].default == 2.0
    assert fields["on"].type == "bool"


# -- synchronization -----------------------------------------------------------------------

def _vector_loop(stages: int, tiles: int = 12, versions: str = "") -> str:
    return HEAD + f"""
def k():
    x = T.tensor("x", ({tiles} * 1024,), "fp32")
    y = T.tensor("y", ({tiles} * 1024,), "fp32")
    for core in T.Kernel(1, vector=True):
        a = T.alloc_ub((1024,), "fp32")
        c = T.alloc_ub((1024,), "fp32"{versions})
        for t in T.Pipelined({tiles}, num_stages={stages}):
            T.copy(x[t * 1024:(t + 1) * 1024], a)
            T.mul(c, a, 2.0)
            T.copy(c, y[t * 1024:(t + 1) * 1024])
"""


def test_a_pipelined_loop_multibuffers_its_gm_staging_buffers(build, lower):
    s = lower(build(_vector_loop(3)))
    plan = {b.label.split()[0]: b.label for b in s.cores[0].buffers}
    assert plan["a"].endswith("x 3") and plan["c"].endswith("x 3")
    mte2 = _kinds(s.cores[0].pipes[("aiv0", "mte2")])
    # three loads before the first wait for a free slot: the load runs three tiles ahead
    assert mte2[:7] == ["gm_to_ub", "set mte2->v 0", "gm_to_ub", "set mte2->v 1", "gm_to_ub",
                        "set mte2->v 2", "wait v->mte2 0"]


@pytest.mark.parametrize("stages", [1, 2, 4, 8])
def test_auto_flags_stay_within_the_hardware_limits_and_verify(build, lower, stages):
    """Every automatically inserted program is free of deadlocks and races (the token game
    of simnode.tile.verify), and no event id leaves 0..7 (facts 3.2)."""
    from simnode.tile import verify
    b = build(_vector_loop(stages), keep_meta=True)
    verify.check(b)
    s = lower(b)
    events = {i.event for prog in s.cores for instrs in prog.pipes.values() for i in instrs
              if type(i) in (isa.SetFlag, isa.WaitFlag)}
    assert events and max(events) < 8 and len(events) <= stages + 1


def test_more_pending_flags_than_event_ids_is_named(build):
    with pytest.raises(ScheduleError) as info:
        build(_vector_loop(9, tiles=20))
    msg = str(info.value)
    assert "prog.py:14: needs one more flag from aiv0.mte2 to aiv0.v while all 8 event ids of " \
           "the pipe pair aiv0.mte2 -> aiv0.v (facts 3.2: 8 per pair) are pending" in msg


STAGED = HEAD + """
def k(alpha_versions: int = 3):
    x = T.tensor("x", (8 * 64,), "fp32")
    y = T.tensor("y", (8 * 64,), "fp32")
    for core in T.Kernel(1, vector=True):
        a = T.alloc_ub((64,), "fp32")
        al = T.alloc_ub((64,), "fp32")
        o = T.alloc_ub((64,), "fp32")
        T.annotate_buffer_versions({a: 2, al: alpha_versions})
        for t in T.Pipelined(8, num_stages=2):
            with T.stage(0):
                T.copy(x[t * 64:(t + 1) * 64], a)
            with T.stage(1):
                T.exp(al, a)
            with T.stage(3):
                T.add(o, o, al)
        T.copy(o, y[0:64])
"""


def test_stages_issue_older_iterations_first(build, lower):
    s = lower(build(STAGED))
    v = [i.label for i in s.cores[0].pipes[("aiv0", "v")] if type(i) is isa.VecOp]
    # step t issues stage 3 of t-3, then stage 1 of t-1: exp(0) exp(1) add(0) exp(2) add(1) ...
    assert [lab.split()[0] for lab in v[:6]] == ["exp", "exp", "add", "exp", "add", "exp"]
    assert len(v) == 16


def test_too_few_versions_for_the_stages_is_named_with_both_lines(build):
    with pytest.raises(ScheduleError) as info:
        build(STAGED, alpha_versions=1)
    assert re.search(r"prog\.py:20: reads 'al' after a later write \(.*prog\.py:18\) reused its slot: "
                     r"give 'al' more versions \(T\.annotate_buffer_versions, now 1\)", str(info.value))


# -- costs -------------------------------------------------------------------------------

def test_vector_costs_follow_the_chip_rates(build, lower, chip):
    src = HEAD + """
def k():
    for core in T.Kernel(1, vector=True):
        a = T.alloc_ub((1024,), "fp32")
        h = T.alloc_ub((1024,), "bf16")
        q = T.alloc_ub((1024,), "fp8")
        r = T.alloc_reg((1024,), "fp32")
        T.add(a, a, a)
        T.add(h, h, h)
        T.exp(a, a)
        T.cast(q, h)
        with T.vf("fused"):
            T.cast(r, h)
            T.exp(r, r)
            T.div(r, r, a)
            T.cast(q, r)
"""
    ops = [i for i in lower(build(src)).cores[0].pipes[("aiv0", "v")] if type(i) is isa.VecOp]
    # each op alone is a VF of its own: (alu, cvt, intlv, reduce, sfu) per 256 B register,
    # one load per register read and one store per register written, one call
    assert all(o.op_class == "vf_alu" and o.vf_calls == 1 for o in ops)
    assert [(o.mix, o.loads, o.stores) for o in ops[:4]] == [
        ((16, 0, 0, 0, 0), 16, 16),          # fp32 add: 64 lanes per register
        ((8, 0, 0, 0, 0), 8, 8),             # bf16 add: 128 lanes per register
        ((0, 0, 0, 0, 16), 16, 16),          # exp: special-function instructions
        ((4, 32, 0, 0, 0), 8, 4)]            # bf16 -> fp8: 2 half-rate converts via fp32, a pack
    fused = ops[4]
    # bf16 -> fp32 (full rate), exp, div, fp32 -> fp8 (half rate) and its pack; h and a
    # read, q written, r in registers
    assert (fused.mix, fused.loads, fused.stores) == ((20, 16, 0, 0, 32), 8 + 16, 4)
    assert fused.chain == (1, 1, 2, 0, 0, 2, 1)
    assert fused.ub_bytes == 2048 + 4096
    # a short VF: its dependent chain (load, 2 ALU, exp, div, convert, store) sets its time
    assert chip.vector.cycles(fused) == 9 + 2 * 7 + 2 * 18 + 8 + 9 + 35


def test_gemm_from_l1_stages_k_steps_through_half_of_l0(build, lower, chip):
    src = HEAD + """
def k():
    for bx in T.Kernel(1):
        a = T.alloc_l1((256, 512), "bf16")
        b = T.alloc_l1((512, 256), "bf16")
        c = T.alloc_l0c((256, 256), "fp32")
        T.gemm(a, b, c, clear_accum=True)
"""
    s = lower(build(src))
    m = [i for i in s.cores[0].pipes[("aic", "m")] if type(i) is isa.Mmad]
    mte1 = [i for i in s.cores[0].pipes[("aic", "mte1")] if type(i) is isa.Copy]
    # 256 x 64 bf16 = 32 KiB fills half of L0A: K steps of 64, ping-pong in the two halves
    assert [(i.m, i.n, i.k) for i in m] == [(256, 256, 64)] * 8
    assert all(c.size_bytes == 32768 for c in mte1) and len(mte1) == 16
    plan = {b.buffer: b.size_bytes for b in s.cores[0].buffers if b.buffer in ("l0a", "l0b")}
    assert plan == {"l0a": chip.buffers.capacity_bytes("l0a"), "l0b": chip.buffers.capacity_bytes("l0b")}


def test_more_blocks_than_cores_reuse_each_cores_buffers(build, lower, chip):
    """Block b runs on core b mod 32 after block b - 32, in the same physical buffers (the
    plan counts them once) and the same pipe streams."""
    src = HEAD + """
def k(blocks: int = 64):
    x = T.tensor("x", (blocks, 64, 128), "bf16")
    for bx in T.Kernel(blocks):
        a = T.alloc_l1((64, 128), "bf16")
        T.copy(x[bx], a)
"""
    one, two = lower(build(src, blocks=32)), lower(build(src, blocks=64))
    assert len(two.cores) == 32
    assert two.cores[0].buffers == one.cores[0].buffers
    loads = [i.gm_key[1][0] for i in two.cores[3].pipes[("aic", "mte2")] if type(i) is isa.Copy]
    assert loads == [3, 35]


def test_vector_scope_runs_statements_per_aiv(build, lower):
    src = HEAD + """
def k():
    x = T.tensor("x", (2, 64, 64), "fp32")
    for bx in T.Kernel(1):
        p = T.alloc_l1((128, 64), "fp32")
        u = T.alloc_ub((64, 64), "fp32")
        for sid in T.Vector():
            T.copy(x[sid], u)
        T.dual_copy(u, p)
"""
    s = lower(build(src))
    p = s.cores[0].pipes
    assert [i.gm_key[1][0] for u in ("aiv0", "aiv1") for i in p[(u, "mte2")] if type(i) is isa.Copy] == [0, 1]
    for u in ("aiv0", "aiv1"):
        assert _kinds(p[(u, "mte3")]) == ["wait mte2->mte3 0", "ub_to_l1"]
        assert [i.size_bytes for i in p[(u, "mte3")] if type(i) is isa.Copy] == [64 * 64 * 4]
