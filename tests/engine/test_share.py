"""``Share``: max-min fair sharing, checked against hand-computed completion times
(progressive filling by hand, to 1e-6 ns) and byte conservation; its three ways to start
transfers (an event, a callback, a group) and its compiled form give the same times."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from simnode.engine.share import Share


def _start(env, share, times, name, size, resources, cap=float("inf")):
    ev = share.start(size, resources, cap=cap)
    ev.callbacks.append(lambda _e: times.__setitem__(name, env.now))
    return ev


def test_one_transfer_takes_bytes_over_capacity():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 250.0, (link,))
    env.run()
    assert times["a"] == pytest.approx(25.0, abs=1e-6)
    assert share.bytes_by_resource[link] == pytest.approx(250.0)
    assert share.busy_ns[link] == pytest.approx(25.0)


def test_cap_limits_a_lone_transfer():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 100.0, (link,), cap=4.0)
    env.run()
    assert times["a"] == pytest.approx(25.0, abs=1e-6)


def test_two_equal_flows_each_get_half():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 100.0, (link,))
    _start(env, share, times, "b", 100.0, (link,))
    env.run()
    # each at 5 B/ns: 100 / 5
    assert times == pytest.approx({"a": 20.0, "b": 20.0}, abs=1e-6)
    assert share.bytes_by_resource[link] == pytest.approx(200.0)


def test_unequal_flows_rebalance_when_one_ends():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 50.0, (link,))
    _start(env, share, times, "b", 150.0, (link,))
    env.run()
    # both at 5 until a is done at 10 (b has 100 left), then b alone at 10: 10 more ns
    assert times == pytest.approx({"a": 10.0, "b": 20.0}, abs=1e-6)


def test_capped_flow_frees_bandwidth_for_the_other():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "capped", 100.0, (link,), cap=2.0)
    _start(env, share, times, "free", 800.0, (link,))
    env.run(until=1e-9)
    assert share.current_rate.tolist() == pytest.approx([10.0])     # 2 + 8: the link stays full
    env.run()
    # capped at 2 -> done at 50; free gets 8 (not 5) meanwhile: 400 B by t=50,
    # then the whole 10 B/ns for the remaining 400 B: done at 90.
    assert times == pytest.approx({"capped": 50.0, "free": 90.0}, abs=1e-6)
    assert share.bytes_by_resource[link] == pytest.approx(900.0)


def test_late_arrival_splits_the_remaining_bandwidth():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}

    def later():
        yield env.timeout(4.0)
        _start(env, share, times, "b", 30.0, (link,))

    _start(env, share, times, "a", 100.0, (link,))
    env.process(later())
    env.run()
    # a alone: 40 B by t=4; then 5 each: b's 30 B take 6 ns (t=10), a has 30 left at 10 B/ns
    assert times == pytest.approx({"a": 13.0, "b": 10.0}, abs=1e-6)


def test_three_classes_on_two_resources():
    """X on R1; Y on R1 and R2; Z on R2 capped at 1. R1 = 10, R2 = 4 B/ns.

    Progressive filling: level 1 freezes Z (cap); R2 leaves 3 for Y alone, so Y
    freezes at 3; X takes R1's remaining 7. Z (5 B) ends at t=5; then Y gets R2's
    4 and X R1's remaining 6: X's last 35 B take 35/6 ns; Y's 45 B take 45/4 ns.
    """
    env = simpy.Environment()
    share = Share(env)
    r1 = share.add_resource("r1", 10.0)
    r2 = share.add_resource("r2", 4.0)
    times = {}
    _start(env, share, times, "X", 70.0, (r1,))
    _start(env, share, times, "Y", 60.0, (r1, r2))
    _start(env, share, times, "Z", 5.0, (r2,), cap=1.0)
    env.run(until=1e-9)
    assert share.current_rate.tolist() == pytest.approx([7.0 + 3.0, 3.0 + 1.0])
    env.run()
    assert times["Z"] == pytest.approx(5.0, abs=1e-6)
    assert times["X"] == pytest.approx(5.0 + 35.0 / 6.0, abs=1e-6)
    assert times["Y"] == pytest.approx(5.0 + 45.0 / 4.0, abs=1e-6)
    assert share.bytes_by_resource[r1] == pytest.approx(130.0)
    assert share.bytes_by_resource[r2] == pytest.approx(65.0)
    assert share.current_rate.tolist() == [0.0, 0.0]


def test_many_members_of_one_class_finish_in_size_order():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 12.0)
    times = {}
    for i, size in enumerate((10.0, 20.0, 30.0)):
        _start(env, share, times, i, size, (link,))
    env.run()
    # 4 B/ns each until t=2.5 (10 B); 6 each until 20 B (t=2.5+10/6); 12 alone for the last 10 B
    t0 = 2.5
    t1 = t0 + 10.0 / 6.0
    t2 = t1 + 10.0 / 12.0
    assert times == pytest.approx({0: t0, 1: t1, 2: t2}, abs=1e-6)


def test_zero_size_completes_immediately():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 1.0)
    ev = share.start(0, (link,))
    env.run()
    assert ev.processed and env.now == 0.0


# -- the other ways to start transfers, policies, batching, the compiled form -----------------
def test_callbacks_and_groups_share_like_events():
    """Three transfers on one link, started three ways: each gets a third."""
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 9.0)
    got = []
    share.start_cb(30.0, (link,), None, float("inf"), lambda t, a: got.append((a, t)), "cb")
    ev = share.start(30.0, (link,))
    group = share.start_group([30.0, 60.0], [[link], [link]], [[1.0], [1.0]], [float("inf")] * 2,
                              [0.0, 5.0])
    env.run()
    # 3 B/ns each while four run: the 30 B ones end at 30 / (9/4) = 13.33; then 60 alone
    t1 = 30.0 / (9.0 / 4.0)
    assert got == [("cb", pytest.approx(t1))]
    assert ev.processed and group.served_ns.tolist() == pytest.approx([t1, t1 + 30.0 / 9.0])
    # the group's event fires once its last member has arrived (served + its latency)
    assert env.now == pytest.approx(t1 + 30.0 / 9.0 + 5.0)


def test_fcfs_resource_serves_in_proportion_to_offered_load():
    """HBM (FCFS, 10) under a copy capped at 30 and a send capped at 10: 40 offered, so the
    copy gets 3/4 and the send 1/4 (max-min would give 5 each)."""
    for policy, expect in (("fcfs", (7.5, 2.5)), ("fair", (5.0, 5.0))):
        env = simpy.Environment()
        share = Share(env)
        hbm = share.add_resource("hbm", 10.0, policy)
        share.start(1000.0, (hbm,), cap=30.0)
        share.start(1000.0, (hbm,), cap=10.0)
        env.run(until=1e-9)
        assert sorted(share.table.crate, reverse=True) == pytest.approx(list(expect))


def test_batch_window_delays_a_start_by_at_most_the_window_and_never_overuses():
    env = simpy.Environment()
    share = Share(env, batch_window_ns=4.0)
    link = share.add_resource("link", 10.0)
    times = {}

    def later():
        yield env.timeout(1.0)
        _start(env, share, times, "b", 100.0, (link,))

    _start(env, share, times, "a", 100.0, (link,))
    env.process(later())
    env.run()
    # b waits for the next solve at t = 0 + 4 (the window): a alone 40 B by then, then 5 each:
    # a's 60 B left take 12 ns (t=16), b has 40 left at 10 B/ns: t=20
    assert times == pytest.approx({"a": 16.0, "b": 20.0})
    assert share.bytes_by_resource[link] == pytest.approx(200.0)


def test_group_members_and_zero_sizes():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    g = share.start_group([0.0, 50.0], [[link], [link]], [[1.0], [1.0]], [float("inf")] * 2, 0.0)
    env.run()
    assert g.served_ns.tolist() == pytest.approx([0.0, 5.0]) and env.now == pytest.approx(5.0)


def _random_run(compiled: bool, seed: int):
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env, batch_window_ns=float(rng.choice([0.0, 3.0])))
    res = share.add_resources([f"r{i}" for i in range(5)], rng.integers(5, 50, 5))
    hbm = share.add_resource("hbm", 40.0, "fcfs")
    if compiled:
        share.compile_now()
        if not share.compiled:
            pytest.skip("numba is not installed")
    done = []

    def src(i):
        for k in range(6):
            yield env.timeout(float(rng.integers(0, 20)))
            rows = [list(rng.choice(res, size=2, replace=False)) + [hbm] for _ in range(3)]
            g = share.start_group(rng.integers(10, 400, 3).astype(float), rows,
                                  rng.uniform(0.5, 2.0, (3, 3)), [30.0, float("inf"), 60.0], 1.0)
            tr = share.start(float(rng.integers(10, 300)), (res[i % 5], hbm), cap=25.0)
            yield env.all_of([g, tr])
            done.append((i, k, env.now))

    for i in range(4):
        env.process(src(i))
    env.run()
    share.sync()
    return done, share.bytes_by_resource.tolist()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compiled_share_gives_the_same_times(seed):
    a = _random_run(False, seed)
    b = _random_run(True, seed)
    assert a[0] == b[0]
    assert a[1] == pytest.approx(b[1], rel=1e-12)


def _shared_class_run(as_group: bool, compiled: bool, seed: int):
    """Transfers on a few resource sets, so that many share a class, started at fixed times
    either as groups (each with a repeated row: its members join keyed classes, placed in
    order with single starts) or one by one; returns every transfer's served time and the
    bytes served per resource."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env, batch_window_ns=float(rng.choice([0.0, 3.0])))
    res = share.add_resources([f"r{i}" for i in range(4)], rng.integers(5, 50, 4))
    hbm = share.add_resource("hbm", 40.0, "fcfs")
    if compiled:
        share.compile_now()
        if not share.compiled:
            pytest.skip("numba is not installed")
    pool = [(int(res[0]), hbm), (int(res[1]), int(res[2])), (int(res[3]), int(res[0]))]
    served = {}

    def src(i):
        for k in range(5):
            yield env.timeout(float(rng.integers(0, 30)))
            m = int(rng.integers(2, 6))
            rows = [pool[j] for j in rng.integers(0, len(pool), m)]
            sizes = rng.integers(10, 300, m).astype(float)
            w = rng.uniform(0.5, 2.0, (m, 2))
            caps = rng.choice([30.0, float("inf")], m)
            rows[1], caps[1] = rows[0], caps[0]     # a repeat: the group's classes are keyed
            if as_group:
                g = share.start_group(sizes, rows, w, caps, 1.0)
                g.callbacks.append(lambda _e, g=g, i=i, k=k: served.update(
                    {(i, k, j): t for j, t in enumerate(g.served_ns.tolist())}))
            else:
                for j in range(m):
                    tr = share.start(sizes[j], rows[j], tuple(w[j]), caps[j], 1.0)
                    tr.callbacks.append(lambda _e, tr=tr, key=(i, k, j): served.update(
                        {key: tr.served_ns}))
            tr = share.start(float(rng.integers(10, 300)), pool[i % len(pool)], (1.0, 1.5))
            tr.callbacks.append(lambda _e, tr=tr, key=(i, k, "x"): served.update({key: tr.served_ns}))

    for i in range(3):
        env.process(src(i))
    env.run()
    share.sync()
    return served, share.bytes_by_resource.tolist()


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_group_members_in_shared_classes_are_served_as_single_transfers(seed):
    """A group's members with the same resources and cap join one class as arrays; they are
    served exactly as the same transfers started one by one (bit for bit, both forms)."""
    for compiled in (False, True):
        a = _shared_class_run(True, compiled, seed)
        b = _shared_class_run(False, compiled, seed)
        assert a == b


def _pipes_run(seed: int, fast: bool):
    """Pipes issuing chains of copies over a few resources (as a chip's pipes against its
    L2 and HBM): each copy starts when the pipe's previous one is served, some after a
    gap; the load moves between uncontended and contended. Returns the served times, the
    share and how many solves it ran."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env)
    share.fast_path = fast
    nres = int(rng.integers(2, 5))
    res = share.add_resources([f"r{i}" for i in range(nres)], rng.uniform(50.0, 200.0, nres))
    served = {}
    npipes = int(rng.integers(3, 12))

    def issue(p, k):
        if k == 12:
            return
        m = int(rng.integers(1, nres + 1))
        rs = tuple(sorted(rng.choice(res, m, replace=False).tolist()))
        ws = tuple(rng.choice([1.0, 0.5, 2.0], m).tolist())
        cap = float(rng.choice([10.0, 25.0, 40.0, 80.0]))
        size = float(rng.uniform(100.0, 5000.0))
        gap = float(rng.choice([0.0, 0.0, 50.0, 400.0]))

        def go(_e=None):
            if k % 3 == 2:                      # an event transfer
                ev = share.start(size, rs, ws, cap=cap)
                ev.callbacks.append(lambda _e: (served.__setitem__((p, k), env.now),
                                                issue(p, k + 1)))
            else:
                share.start_cb(size, rs, ws, cap,
                               lambda t, a: (served.__setitem__(a, t), issue(a[0], a[1] + 1)),
                               (p, k))
        if gap:
            env.timeout(gap).callbacks.append(go)
        else:
            go()

    for p in range(npipes):
        issue(p, 0)
    env.run()
    return served, share


@pytest.mark.parametrize("seed", range(8))
def test_uncontended_fast_path_gives_the_solver_times(seed):
    """The fast path (no solve while every transfer runs at its cap) gives the completion
    times of solving at every start and end, to 1e-9 relative, with the same bytes served."""
    fast, sf = _pipes_run(seed, True)
    full, sl = _pipes_run(seed, False)
    assert fast.keys() == full.keys()
    for key, t in full.items():
        assert fast[key] == pytest.approx(t, rel=1e-9, abs=1e-9), key
    assert sf.bytes_by_resource == pytest.approx(sl.bytes_by_resource, rel=1e-9)
    assert sf.busy_ns == pytest.approx(sl.busy_ns, rel=1e-9)
    assert sf.recomputes <= sl.recomputes


def test_fast_path_is_used_and_left_when_a_start_contends():
    env = simpy.Environment()
    share = Share(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 100.0, (link,), cap=4.0)      # 4 of 10: uncontended
    env.run(until=1.0)
    assert share.fast.on
    _start(env, share, times, "b", 100.0, (link,), cap=4.0)      # 8 of 10: still
    env.run(until=2.0)
    assert share.fast.on
    _start(env, share, times, "c", 100.0, (link,), cap=4.0)      # 12 of 10: contended
    env.run()
    # a has 92 B left at t = 2, b 96: all three at 10/3 B/ns until a ends, then b and c
    # at 4 (8 of 10: uncontended again)
    t_a = 2.0 + 92.0 / (10.0 / 3)
    assert times["a"] == pytest.approx(t_a, rel=1e-12)
    assert times["b"] == pytest.approx(t_a + 4.0 / 4.0, rel=1e-12)
    assert times["c"] == pytest.approx(t_a + 8.0 / 4.0, rel=1e-12)
    assert share.bytes_by_resource[link] == pytest.approx(300.0)


def _all_to_all(ranks, seed):
    """Served times of an all-to-all of groups over per-rank links and FCFS HBMs."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env)
    up = share.add_resources([f"up{r}" for r in range(ranks)], rng.uniform(40, 60, ranks))
    down = share.add_resources([f"down{r}" for r in range(ranks)], rng.uniform(40, 60, ranks))
    hbm = share.add_resources([f"hbm{r}" for r in range(ranks)], [300.0] * ranks, "fcfs")
    groups = []
    for s in range(ranks):
        dst = [d for d in range(ranks) if d != s]
        rows = [(up[s], down[d], hbm[s], hbm[d]) for d in dst]
        w = np.tile([1.0, 1.0, 1.0, 2.5], (len(dst), 1))
        caps = rng.choice([2.0, float("inf")], len(dst))
        groups.append(share.start_group(rng.uniform(100, 1000, len(dst)), rows, w, caps, 1.0))
    env.run()
    return np.concatenate([g.served_ns for g in groups]), share.recomputes


def test_a_large_interpreted_solve_in_numpy_matches_the_sequential_fill(monkeypatch):
    """An interpreted solve of at least ``VECTOR_SOLVE`` incidences runs in numpy
    (``maxmin.vector_rates``): the same served times to 1e-12 as the sequential fill."""
    from simnode.engine.share import solve
    monkeypatch.setattr(solve, "COMPILE_AFTER", float("inf"))
    monkeypatch.setattr(solve, "VECTOR_SOLVE", 1)
    vec, n = _all_to_all(24, 1)
    monkeypatch.setattr(solve, "VECTOR_SOLVE", float("inf"))
    seq, m = _all_to_all(24, 1)
    assert n == m and n > 2
    assert vec == pytest.approx(seq, rel=1e-12, abs=0.0)


def _solo_group_run(compiled: bool, seed: int, window: float):
    """Groups whose members all have rows of their own (solo classes, released as arrays)
    mixed with single transfers (keyed classes) that end in the same completion groups,
    with a series; returns served times, bytes per resource and the series' bins."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env, batch_window_ns=window, series_bins=16, series_bin_ns=20.0)
    res = share.add_resources([f"r{i}" for i in range(6)], rng.integers(5, 50, 6))
    if compiled:
        share.compile_now()
        if not share.compiled:
            pytest.skip("numba is not installed")
    served = {}

    def src(i):
        for k in range(5):
            yield env.timeout(float(rng.integers(0, 15)))
            m = int(rng.integers(3, 7))
            rows = [list(rng.choice(res, size=int(rng.integers(1, 4)), replace=False)) for _ in range(m)]
            width = max(len(r) for r in rows)
            rows = [r + [-1] * (width - len(r)) for r in rows]
            g = share.start_group(rng.integers(10, 200, m).astype(float), rows,
                                  rng.uniform(0.5, 2.0, (m, width)), rng.choice([20.0, np.inf], m), 1.0)
            g.callbacks.append(lambda _e, g=g, i=i, k=k: served.update(
                {(i, k, j): t for j, t in enumerate(g.served_ns.tolist())}))
            tr = share.start(float(rng.integers(10, 200)), (int(res[i % 6]), int(res[(i + 1) % 6])))
            tr.callbacks.append(lambda _e, tr=tr, key=(i, k): served.update({key: tr.served_ns}))
            yield g

    for i in range(4):
        env.process(src(i))
    env.run()
    share.sync()
    return served, share.bytes_by_resource.tolist(), share.series.bytes.copy()


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("window", [0.0, 4.0])
def test_solo_group_members_release_alike_interpreted_and_compiled(seed, window):
    """Group members in classes of their own are committed and released as arrays in both
    forms (interpreted: from the class lists): the same served times, bytes and series."""
    a = _solo_group_run(False, seed, window)
    b = _solo_group_run(True, seed, window)
    assert a[0] == b[0]
    assert a[1] == pytest.approx(b[1], rel=1e-12)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-9)


def testhas_repeats_is_exact_even_when_hashes_meet():
    """``has_repeats`` answers as ``np.unique`` does: for random rows, and for rows made to
    meet in the hash while they differ (with and without a real repeat among them)."""
    from simnode.engine.share.groups import HASH, has_repeats
    rng = np.random.default_rng(3)
    for _ in range(200):
        n, width = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        key = rng.integers(-1, 6, (n, width)).astype(np.int64)
        assert has_repeats(key) == (np.unique(key, axis=0).shape[0] < n)
    m0, m1 = int(HASH[0]), int(HASH[1])
    a = np.array([[5, 7]], dtype=np.int64)
    twin = np.array([[5 + m1, 7 - m0]], dtype=np.int64)   # same hash (mod 2^64), another row
    assert ((a * HASH[:2]).sum(axis=1) == (twin * HASH[:2]).sum(axis=1)).all()
    assert not has_repeats(np.vstack([a, twin]))
    assert has_repeats(np.vstack([a, twin, a]))
    assert has_repeats(np.vstack([twin, a, np.array([[1, 2]]), twin]))


def test_group_of_members_without_resources_is_served_at_its_caps():
    """Rows with no resource at all (zero columns): each member is served at size / cap."""
    env = simpy.Environment()
    share = Share(env)
    share.add_resource("a", 10.0)
    g = share.start_group([10.0, 20.0], np.zeros((2, 0), dtype=np.int64), np.zeros((2, 0)),
                          [5.0, 4.0], 0.0)
    env.run()
    assert g.served_ns.tolist() == [2.0, 5.0]


def _waves_run(seed: int, window: float, compile_after: float, inside_starts: str):
    """Waves of one all-pairs group (every member a row of its own) over per-rank links and
    HBMs, single transfers and a second, smaller group started while a wave runs (they reuse
    the rows the previous wave freed), with a series; returns every served time, the bytes
    per resource, the series' bins, the solves and whether the run compiled."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    share = Share(env, batch_window_ns=window, series_bins=16, series_bin_ns=200.0)
    R = 6
    up = share.add_resources([f"up{r}" for r in range(R)], rng.uniform(40, 60, R))
    down = share.add_resources([f"down{r}" for r in range(R)], rng.uniform(40, 60, R))
    hbm = share.add_resources([f"hbm{r}" for r in range(R)], [150.0] * R, "fcfs")
    pairs = [(s, d) for s in range(R) for d in range(R) if s != d]
    served = {}

    def waves():
        for k in range(4):
            rows = [(up[s], down[d], hbm[s], hbm[d]) for s, d in pairs]
            w = np.tile([1.0, 1.0, 1.0, 2.5], (len(pairs), 1))
            caps = rng.choice([2.0, float("inf")], len(pairs))
            g = share.start_group(rng.uniform(100, 1000, len(pairs)), rows, w, caps, 1.0)
            g.callbacks.append(lambda _e, g=g, k=k: served.update(
                {(k, j): t for j, t in enumerate(g.served_ns.tolist())}))
            g.on_served = lambda ks, t, k=k: inside(k)
            yield g

    def inside(k):
        # at the first members' completion, inside the wake that releases them: a transfer
        # and/or a group that take rows those members free, before anything else is solved
        if ("in", k) in served:
            return
        served[("in", k)] = env.now
        if inside_starts != "group":
            tr = share.start(float(rng.integers(50, 300)), (int(down[k % R]), int(hbm[k % R])))
            tr.callbacks.append(lambda _e, tr=tr, k=k: served.update({("in-x", k): tr.served_ns}))
        if inside_starts == "transfer":
            return
        g = share.start_group(rng.uniform(20, 200, 3), [(int(up[j]), int(down[j + 1])) for j in range(3)],
                              rng.uniform(0.5, 2.0, (3, 2)), [np.inf] * 3, 0.0)
        g.callbacks.append(lambda _e, g=g, k=k: served.update(
            {("in-g", k, j): t for j, t in enumerate(g.served_ns.tolist())}))

    def extra():
        for k in range(6):
            yield env.timeout(float(rng.integers(5, 60)))
            tr = share.start(float(rng.integers(50, 300)), (int(up[k % R]), int(hbm[k % R])))
            tr.callbacks.append(lambda _e, tr=tr, k=k: served.update({("x", k): tr.served_ns}))
            m = int(rng.integers(2, 5))
            g = share.start_group(rng.uniform(20, 200, m),
                                  [(int(up[(k + j) % R]), int(down[j % R])) for j in range(m)],
                                  rng.uniform(0.5, 2.0, (m, 2)), [np.inf] * m, 0.0)
            g.callbacks.append(lambda _e, g=g, k=k: served.update(
                {("g", k, j): t for j, t in enumerate(g.served_ns.tolist())}))

    env.process(waves())
    env.process(extra())
    env.run()
    share.sync()
    return served, share.bytes_by_resource.tolist(), share.series.bytes.copy(), \
        share.recomputes, share.compiled


@pytest.mark.parametrize("seed", [21, 22])
@pytest.mark.parametrize("window", [0.0, 4.0])
@pytest.mark.parametrize("compile_after,inside_starts", [(float("inf"), "transfer"),
                                                         (float("inf"), "group"),
                                                         (float("inf"), "both"), (3000, "both")])
def test_group_rows_kept_as_arrays_give_the_results_of_lists(monkeypatch, seed, window,
                                                             compile_after, inside_starts):
    """Interpreted, a group's new rows stay arrays until a reader needs lists (the vector
    solve reads the arrays): bit for bit the results of making them lists at once (forced
    here), through waves that reuse freed rows, a vector solve of
    exactly one group's rows, solves of mixed rows, series and a switch to compiled loops."""
    from simnode.engine import maxmin
    from simnode.engine.share import solve
    from simnode.engine.share.lists import ListTable
    monkeypatch.setattr(solve, "VECTOR_SOLVE", 1)
    monkeypatch.setattr(solve, "COMPILE_AFTER", compile_after)
    blocks = []
    vector = maxmin.vector_rates

    def counting(*args):
        blocks.append(args[-1] is not None)
        return vector(*args)
    monkeypatch.setattr(maxmin, "vector_rates", counting)
    lazy = _waves_run(seed, window, compile_after, inside_starts)
    place = ListTable.place_solo

    def eager(self, *args):
        place(self, *args)
        self.materialize()                      # lists at once
    monkeypatch.setattr(ListTable, "place_solo", eager)
    used = list(blocks)
    blocks.clear()
    listed = _waves_run(seed, window, compile_after, inside_starts)
    assert any(used) and not any(blocks)        # both forms of the solve ran
    if compile_after < float("inf") and not lazy[4]:
        pytest.skip("numba is not installed")
    assert lazy[0] == listed[0] and lazy[1] == listed[1] and lazy[3:] == listed[3:]
    assert np.array_equal(lazy[2], listed[2])


def test_a_group_s_arrays_serve_a_solve_of_exactly_its_rows():
    """``ListTable.lazy_block``: the arrays of the one block still held as arrays, only when the
    solve's classes are exactly its rows (not a part of them, not more)."""
    env = simpy.Environment()
    share = Share(env)
    a, b = share.add_resources(["a", "b"], [10.0, 10.0])
    share.start_group([10.0] * 5, [[a, b]] * 4 + [[b, a]], np.ones((5, 2)), [1.0, 2.0, 3.0, 4.0, 5.0], 0.0)
    share._place()
    table = share.table
    assert len(table.lazy) == 1 and table.links[:5] == [None] * 5
    rows, w = table.lazy_block([0, 1, 2, 3, 4])
    assert rows.tolist() == [[a, b]] * 4 + [[b, a]] and w.tolist() == [[1.0, 1.0]] * 5
    assert table.lazy_block([0, 1, 2, 3]) is None and table.lazy_block([1, 2, 3, 4]) is None
    table.links.append(None)
    assert table.lazy_block([0, 1, 2, 3, 4, 5]) is None
    table.links.pop()
    table.materialize()
    assert table.lazy == [] and table.links[:5] == [(a, b)] * 4 + [(b, a)]
    assert table.w[:5] == [[1.0, 1.0]] * 5


@pytest.mark.parametrize("seed", range(8))
def test_loops_for_many_classes_in_numpy_equal_the_plain_loops(seed):
    """``advance_vec``, ``due_vec`` and ``next_finish_vec`` (interpreted wakes with many active
    classes) give the plain loops' results bit for bit: active classes as a range and
    not, stopped classes, classes without a finish (inf), due and not due."""
    import math
    from simnode.engine.share import loops
    from simnode.engine.share.loops import EPS_REL, EPS_UNITS, INF
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 300))
    V = rng.uniform(0, 1e6, rows).tolist()
    crate = np.where(rng.random(rows) < 0.2, 0.0, rng.uniform(0, 50, rows)).tolist()
    top = [v + float(x) for v, x in zip(V, rng.choice([0.0, 1e-9, 3.0, 1e4, np.inf], rows))]
    # and classes on the edge of due at window 2.5: due by the loop's sum, not by the same
    # terms added in another order (so the test sees the order)
    for v, r in zip(rng.uniform(1e-7, 1e-5, 2000).tolist(), rng.uniform(0, 1e-6, 2000).tolist()):
        a = r * 2.5 + EPS_UNITS + EPS_REL * v
        b = r * 2.5 + (EPS_UNITS + EPS_REL * v)
        for t in (v + a, v + b, math.nextafter(v + a, -INF), math.nextafter(v + b, -INF)):
            if (t - v <= a) != (t - v <= b):
                V.append(v)
                crate.append(r)
                top.append(t)
                break
    rows = len(V)
    lo = int(rng.integers(0, rows))
    for act in (list(range(lo, rows)), sorted(rng.choice(rows, int(rng.integers(1, rows + 1)),
                                                         replace=False).tolist())):
        for window in (0.0, 1e-9, 2.5):
            a, b = [0] * len(act), [0] * len(act)
            k = loops.due(act, top, V, crate, window, a)
            assert loops.due_vec(act, top, V, crate, window, b) == k and a[:k] == b[:k]
        assert loops.next_finish_vec(act, top, V, crate) == loops.next_finish(act, top, V, crate)
        v1, v2 = list(V), list(V)
        dt = float(rng.uniform(0, 100))
        loops.advance(act, v1, crate, dt)
        loops.advance_vec(act, v2, crate, dt)
        assert v1 == v2
    one = ([0], [np.inf], [np.inf], [1.0])
    assert loops.next_finish_vec(*one) == loops.next_finish(*one)


@pytest.mark.parametrize("seed", [21, 22])
def test_wakes_with_numpy_loops_give_the_plain_loops_results(monkeypatch, seed):
    """A share whose wakes all run the numpy loops (``VECTOR_LOOPS`` = 1) against one that
    never does: the same served times, bytes, series and solves, bit for bit."""
    from simnode.engine.share import lists
    got = []
    for limit in (1, float("inf")):
        monkeypatch.setattr(lists, "VECTOR_LOOPS", limit)
        got.append((_waves_run(seed, 4.0, float("inf"), "both"), _solo_group_run(False, seed, 4.0)))
    (a, c), (b, d) = got
    assert a[0] == b[0] and a[1] == b[1] and a[3:] == b[3:] and np.array_equal(a[2], b[2])
    assert c[0] == d[0] and c[1] == d[1] and np.array_equal(c[2], d[2])
