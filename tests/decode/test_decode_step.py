"""A decode step on one clock: its program, dedup of kernel shapes, stream overlap as an
outcome, gaps as lines, the memory refusal, determinism and the kind on the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simnode.decode import kernels as K
from simnode.decode import moe as MO
from simnode.decode import program as P
from simnode.decode import simulate as SIM
from simnode.decode import step as S
from simnode.decode import timing as T
from simnode.errors import ConfigError
from simnode.workloads.loader import load_inputs

TOPOLOGY = "topologies/atlas950-supernode.yaml"
FLASH = "workloads/v4-flash-decode.yaml"
#: four layers (window hash x 2, CSA hash, HCA), one MTP draft, 4 chips: every layer type, fast
SMALL = {"num_layers": 4, "chips": 4, "attn_dp": 4, "moe_ep": 4, "global_batch": 4, "next_n": 1,
         "accepted_tokens": 0.5}


def _spec(repo_root, **sets):
    run = load_inputs(repo_root / TOPOLOGY, repo_root / FLASH, {**SMALL, **sets})
    from simnode.workloads.kinds.decode_step import check, spec_of
    return spec_of(run.params), check(run.topology, run.params), run


def _outcome(repo_root, **sets) -> SIM.StepOutcome:
    spec, topology, _ = _spec(repo_root, **sets)
    return SIM.simulate(spec, topology)


# -- the program ------------------------------------------------------------------------------

def test_the_program_forks_and_joins_side_streams_where_cr_records_and_waits(repo_root):
    spec, _, _ = _spec(repo_root)
    prog = P.build_program(spec.model, spec.deployment, spec.gaps)
    ops = prog.ops
    streams = dict(prog.streams)
    assert set(streams) == {"main", "kv", "indexer", "shared", "metadata"}
    for side, (fork, join) in K.STREAM_EDGES.items():
        firsts = [i for i in streams[side] if ops[i].after]
        assert firsts and all(ops[ops[i].after[0]].name == fork for i in firsts)
        joins = [i for i in streams["main"] if any(ops[a].stream == side for a in ops[i].after)]
        assert {ops[i].name for i in joins} == {join}
        assert len(firsts) == len(joins)                 # one fork and one join per layer
    # the metadata is built at the start and waited for by the first sparse attention only
    waits = [i for i in streams["main"] if any(ops[a].kind == P.METADATA for a in ops[i].after)]
    assert [ops[i].name for i in waits] == ["sparse_attn"]
    # one MoE block per layer (4 + the MTP layer), one host turn per forward
    assert sum(op.kind == P.MOE for op in ops) == 5
    assert sum(op.kind == P.HOST for op in ops) == prog.forwards() == 2


def test_without_side_streams_every_kernel_runs_on_main(repo_root):
    spec, _, _ = _spec(repo_root, kv_stream=False, indexer_stream=False, shared_expert="inline",
                       metadata_stream=False)
    prog = P.build_program(spec.model, spec.deployment, spec.gaps)
    assert [s for s, _ in prog.streams] == ["main"]
    assert not any(op.after for op in prog.ops)


# -- the clock --------------------------------------------------------------------------------

def _toy(aic_a: int, aic_b: int, chip):
    """A 1-rank program: kernel a on main, kernel b on the shared stream beside it, joined at c."""
    call = K.gemm("x", 4, 512, 4096, "mxfp8")
    ops = (P.Op("main", P.KERNEL, "gate", call, 0, ()),
           P.Op("shared", P.KERNEL, "b", call, 0, (0,)),
           P.Op("main", P.KERNEL, "a", call, 0, ()),
           P.Op("main", P.KERNEL, "add_shared", call, 0, (1,)))
    prog = P.Program(ops, (K.Segment("layer", 1, ()),), (("main", (0, 2, 3)), ("shared", (1,))))
    prof = lambda ns, aic: T.Profile(ns, 0.0, aic, 0, "cube", T.PIPE, "toy")  # noqa: E731
    profiles = {0: prof(1000.0, 32), 1: prof(4000.0, aic_b), 2: prof(4000.0, aic_a), 3: prof(1000.0, 32)}
    return S.run_step(chip, prog, profiles, {}, P.Gaps(launch_gap_ns=0.0, metadata_builds=0))


def test_two_streams_that_fit_the_cores_overlap_and_two_that_do_not_share_them(chip):
    # 16 + 16 cubes of 32: b hides behind a, the step is 1 + 4 + 1 us
    fit = _toy(16, 16, chip)
    assert fit.step_ns == pytest.approx(6000.0)
    # 32 + 32 cubes: max-min fair halves each, both take 8 us: the same work as back to back
    full = _toy(32, 32, chip)
    assert full.step_ns == pytest.approx(10000.0)
    assert full.end[0, 1] == pytest.approx(9000.0) and full.end[0, 2] == pytest.approx(9000.0)


def test_one_stream_without_gaps_takes_the_sum_of_its_kernels_alone(repo_root):
    """The replay is exact: with every kernel on the main stream and no gaps, nothing shares
    a core or the HBM, so the step is each kernel's time alone plus each MoE phase's."""
    out = _outcome(repo_root, kv_stream=False, indexer_stream=False, shared_expert="inline",
                   metadata_stream=False, launch_gap_ns=0)
    run = out.run
    kernels = sum(p.ns for p in run.profiles.values())
    moe = sum(p.ns for i in run.moe_index for p in run.phases_of(0, i))
    assert run.step_ns == pytest.approx(kernels + moe, rel=1e-9)
    assert all(r.time_ns == pytest.approx(r.alone_ns, rel=1e-9) for r in out.breakdown.kernels)


def test_the_shared_expert_hides_on_its_stream_unless_its_core_split_starves_it(repo_root):
    # EP64: 4 local experts per chip, so the routed experts are short beside the shared one
    ep64 = {"chips": 64, "attn_dp": 64, "moe_ep": 64, "global_batch": 64}
    hidden = _outcome(repo_root, **ep64).breakdown
    assert hidden.critical.get("wait_shared", 0.0) == 0.0
    assert hidden.stream_busy["shared"] > 0
    starved = _outcome(repo_root, **ep64, shared_expert_aic=1, shared_expert_aiv=2).breakdown
    assert starved.critical["wait_shared"] > 0
    assert starved.step_ns > hidden.step_ns
    inline = _outcome(repo_root, **ep64, shared_expert="inline").breakdown
    assert "shared" not in inline.stream_busy and inline.step_ns > hidden.step_ns


def test_the_critical_lines_add_up_to_the_step_and_gaps_are_lines_of_their_own(repo_root):
    out = _outcome(repo_root, launch_gap_ns=1000, host_gap_ns=30000, metadata_ns=50000)
    b = out.breakdown
    assert sum(b.critical.values()) == pytest.approx(b.step_ns, rel=1e-9)
    prog = out.run.program
    main_kernels = sum(op.kind == P.KERNEL and op.stream == "main" for op in prog.ops)
    moe_compute = 3 * sum(op.kind == P.MOE for op in prog.ops)           # gmm_w13, swiglu, gmm_w2
    assert b.critical["launch_gaps"] == pytest.approx(1000.0 * (main_kernels + moe_compute))
    assert b.critical["host_gaps"] == pytest.approx(30000.0 * prog.forwards())
    # four metadata builds beside the embedding: the first sparse attention waits for the rest
    first = next(i for i, op in enumerate(prog.ops) if op.name == "sparse_attn")
    assert b.critical["wait_metadata"] == pytest.approx(4 * 50000.0 - out.run.reach[0, first])
    assert 0 < out.run.reach[0, first] < 4 * 50000.0


def test_each_distinct_kernel_shape_is_timed_once(repo_root, monkeypatch):
    spec, topology, _ = _spec(repo_root)
    runs = []
    real = T.run_schedule
    monkeypatch.setattr(T, "run_schedule", lambda chip, sched: runs.append(sched.name) or real(chip, sched))
    monkeypatch.setattr(T, "CACHE", {})
    out = SIM.simulate(spec, topology)
    launches = sum(op.kind == P.KERNEL for op in out.run.program.ops)
    keys = {op.call.key for op in out.run.program.ops if op.kind == P.KERNEL}
    assert out.distinct_kernels == len(T.CACHE) == len(keys) < launches / 4
    assert len(runs) == sum(1 for p in T.CACHE.values() if p.model != T.ROOFLINE)
    SIM.simulate(spec, topology)                          # a second step times nothing again
    assert len(runs) == sum(1 for p in T.CACHE.values() if p.model != T.ROOFLINE)


def test_balanced_routing_runs_every_rank_as_one_group_and_skew_makes_a_straggler(repo_root):
    even = _outcome(repo_root).run
    # balanced routing: every rank's MoE block alike to within the order its peers' writes land
    # (a rank's dispatch and its first GEMM trade ~0.2 us), so a group or two, not one per rank
    assert len(even.groups) <= 2 and sum(map(len, even.groups)) == 4
    for k in range(len(even.moe.phases[0])):
        times = [even.moe.phases[r][k].ns for r in range(4)]
        assert max(times) - min(times) <= 0.01 * max(times) + 250.0
    routes = MO.forced_eplb(4, 8, 256, 6)
    counts = [len(set(r.ravel() // 64)) for r in routes]
    assert counts == [4] * 4 and all(len(set(row)) == 6 for r in routes for row in r.tolist())
    # 3 of the first layers route by the token-id table, the other 7 hot
    skew = _outcome(repo_root, forced_eplb=False, routing="hot", hot_experts=4, hot_share=0.6, num_layers=10,
                    global_batch=16)
    b = skew.breakdown
    assert len(skew.run.groups) > 1
    assert b.slowest_rank == 0 and "x the mean" in b.reason            # experts 0..3 live on rank 0
    # the straggler waits only for the others' combine tails (its rows reach them last)
    others = [g for g in range(len(skew.run.groups)) if 0 not in skew.run.groups[g]]
    assert all(skew.run.barrier_wait_ns(g) > 1.5 * b.critical["imbalance_wait"] for g in others)


def test_every_kernel_row_says_how_it_is_modeled(repo_root):
    b = _outcome(repo_root).breakdown
    models = {r.name: r.model for r in b.kernels}
    assert models["dispatch"] == models["combine"] == MO.FLOW
    assert models["win_kv_epilog"] == T.ROOFLINE and models["hc_head"] == T.PROXY
    assert models["lightning_indexer"] == models["hc_post_attn"] == models["wq_b"] == T.PIPE
    assert models["sparse_attn_window"] == T.PIPE and models["attn_norm"] == T.PROXY
    assert {"sparse_attn_window", "sparse_attn_csa", "sparse_attn_hca"} <= set(models)
    assert set(models.values()) <= set(T.MODELS) | {MO.FLOW}


def test_a_timing_entry_switches_one_operation(repo_root, monkeypatch):
    """The table is the one place a kernel's model is chosen: one entry moves the lightning
    indexer to another (here: stand-in) pipe-level model, and the step follows."""
    def indexer_as_gemm(chip, call):              # logits of every head as one FP8 GEMM
        from simnode.kernels.gemm import GemmParams, gemm_schedule
        s = call.dims()
        keys = s["context"] // s["ratio"]
        return gemm_schedule(chip, GemmParams(s["batch"] * s["s_q"] * s["heads"], keys, s["dim"], "fp8"))
    before = {r.name: r for r in _outcome(repo_root).breakdown.kernels}["lightning_indexer"]
    assert before.source == "lightning_indexer"
    monkeypatch.setattr(T, "TIMINGS", {**T.TIMINGS, "lightning_indexer": T.pipe(indexer_as_gemm, "stand-in")})
    after = {r.name: r for r in _outcome(repo_root).breakdown.kernels}["lightning_indexer"]
    assert (after.model, after.source) == (T.PIPE, "stand-in")
    assert after.alone_ns != before.alone_ns and after.launches == before.launches


# -- refusals, determinism, the CLI ----------------------------------------------------------

def test_a_batch_that_does_not_fit_is_refused_with_the_largest_that_does(repo_root):
    with pytest.raises(ConfigError) as exc:
        _spec(repo_root, global_batch=64000, context_len=65536)
    msg = str(exc.value)
    assert "global_batch" in msg and "HBM footprint" in msg and "The largest global batch that fits" in msg


def test_tensor_parallel_deployments_are_refused_until_modeled(repo_root):
    with pytest.raises(ConfigError, match="not modeled yet"):
        _spec(repo_root, attn_dp=2, global_batch=4)


def test_the_kind_on_the_cli_and_same_seed_same_bytes(cli, repo_root):
    args = ["run", repo_root / TOPOLOGY, repo_root / FLASH, "--json"]
    for k, v in {**SMALL, "forced_eplb": "false", "routing": "zipf"}.items():
        args += ["--set", f"{k}={v}"]
    first, second = cli(*args), cli(*args)
    assert first.code == 0, first.err
    assert first.out == second.out
    d = json.loads(first.out)
    assert d["kind"] == "decode_step" and d["makespan_ns"] == pytest.approx(1e3 * d["step_us"])
    assert d["tpot_ms"] == pytest.approx(d["step_us"] / 1e3 / 1.5, rel=1e-5)
    assert d["tokens_per_s_per_chip"] == pytest.approx(1 / (d["tpot_ms"] / 1e3), rel=1e-5)
    assert 0 < d["hbm_capacity_frac"] < 1
    assert d["dispatch_model"] == "flow-level" and "low-latency dispatch" in d["moe_note"]
    assert sum(d["critical_us"].values()) == pytest.approx(d["step_us"], rel=1e-6)
    other = cli(*args[:-2], "--set", "seed=1", "--set", "routing=zipf")
    assert other.code == 0 and other.out != first.out


def test_the_cli_refuses_a_step_that_does_not_fit(cli, repo_root):
    res = cli("run", repo_root / TOPOLOGY, repo_root / FLASH, "--set", "global_batch=160000")
    assert res.code == 2
    assert "largest global batch that fits" in res.err and "Traceback" not in res.err


def test_trace_has_a_process_per_rank_and_a_thread_per_stream(cli, repo_root, tmp_path):
    path = tmp_path / "t.json"
    args = ["run", repo_root / TOPOLOGY, repo_root / FLASH, "--trace", path]
    for k, v in SMALL.items():
        args += ["--set", f"{k}={v}"]
    assert cli(*args).code == 0
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {f"rank{r:03d}" for r in range(4)}
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"rank002.main", "rank002.kv", "rank002.indexer", "rank002.shared"} <= threads
    spans = {e["name"] for e in events if e["ph"] == "X"}
    assert {"dispatch", "gmm_w13", "sparse_attn", "sh_w13", "lm_head"} <= spans


def test_a_truncated_model_keeps_its_first_layers():
    from simnode.decode.model import preset
    m = SIM.truncated(preset("v4-flash"), 4)
    assert m.layer_types == ("window", "window", "csa", "hca") and m.hash_layers == 3
    assert SIM.truncated(m, 0) is m and replace(m) == m


def test_a_batch_past_the_low_latency_api_is_refused_with_the_largest_that_runs(cli, repo_root):
    # 3200 sequences on 16 chips x (1 + 3) query tokens = 800 tokens per rank > the API's 512
    out = cli("run", repo_root / TOPOLOGY, repo_root / FLASH, "--set", "global_batch=3200")
    assert out.code == 2 and "Traceback" not in out.err
    assert "global_batch = 3200" in out.err and "800" in out.err and "512" in out.err
    assert "largest global batch is 2048" in out.err
    ok = cli("run", repo_root / TOPOLOGY, repo_root / FLASH, "--set", "global_batch=2048",
             "--set", "num_layers=1", "--set", "next_n=3", "--json")
    assert ok.code == 0, ok.err


def test_the_normal_moe_layer_stays_a_what_if(repo_root):
    fast = _outcome(repo_root).run.moe
    normal = _outcome(repo_root, moe_model="layer_sim").run.moe
    assert "low-latency" in fast.note and "NORMAL DeepEP" in normal.note
    # the normal kernels' barriers, histograms and padded experts cost more at decode sizes
    assert sum(p.ns for p in normal.phases[0]) > sum(p.ns for p in fast.phases[0])


def test_ranks_alike_within_the_tolerance_replay_as_one_group_as_the_exact_form_does(repo_root):
    spec, topology, _ = _spec(repo_root, num_layers=3)
    out = SIM.simulate(spec, topology)
    exact = S.run_step(topology.chip, out.run.program, out.run.profiles, out.run.moe_of(), spec.gaps, tol=0.0)
    assert len(out.run.groups) < len(exact.groups)          # the peers' write order splits them
    assert out.run.step_ns == pytest.approx(exact.step_ns, rel=1e-3)
    assert out.run.step_ns >= exact.step_ns - 1e-6          # a group replays its slowest member


def test_hash_routed_layers_route_by_the_table_unless_forced(repo_root):
    forced = _outcome(repo_root).run
    assert len(forced.moes) == 1                         # forced EPLB routes every layer alike
    zipf = _outcome(repo_root, forced_eplb=False, routing="zipf").run
    assert len(zipf.moes) == 2
    hashed = {i for i, op in enumerate(zipf.program.ops)
              if op.kind == P.MOE and MO.hash_routed(zipf.program.segments[op.segment])}
    assert hashed and len({zipf.moe_index[i] for i in hashed}) == 1
    assert all(zipf.moe_index[i] != zipf.moe_index[min(hashed)] for i in zipf.moe_index if i not in hashed)
    assert zipf.moes[0].routed_rows != zipf.moes[1].routed_rows     # zipf vs the token-id table
    table = _outcome(repo_root, forced_eplb=False, routing="hash").run
    assert len(table.moes) == 1
