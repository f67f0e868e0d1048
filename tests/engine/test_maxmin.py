"""The one max-min solver: closed forms, against an exact rational reference, first come
first served, covered resources, and the compiled form bit-equal to the interpreted one."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.engine import maxmin
from simnode.engine.maxmin import index
from simnode.engine.maxmin import max_min

INF = float("inf")


def exact_max_min(links, capacity, caps, weights):
    """Reference progressive filling in exact rationals (slow; a test oracle only)."""
    n = len(links)
    flows = [[l for l in row if l >= 0] for row in links]
    w = [[Fraction(weights[f][j]) for j, l in enumerate(links[f]) if l >= 0] for f in range(n)]
    cap = [None if caps[f] == INF else Fraction(caps[f]) for f in range(n)]
    capacity = [Fraction(c) for c in capacity]
    rate: list = [None] * n
    for f in range(n):
        if not flows[f]:
            rate[f] = cap[f] if cap[f] is not None else INF
    while any(r is None for r in rate):
        active = [f for f in range(n) if rate[f] is None]
        used = [Fraction(0)] * len(capacity)
        demand = [Fraction(0)] * len(capacity)
        for f in range(n):
            for l, wl in zip(flows[f], w[f]):
                if rate[f] is None:
                    demand[l] += wl
                else:
                    used[l] += wl * rate[f]
        shares = {l: (capacity[l] - used[l]) / demand[l] for l in range(len(capacity)) if demand[l]}
        level = min(list(shares.values()) + [cap[f] for f in active if cap[f] is not None])
        for f in active:
            if (cap[f] is not None and cap[f] == level) or any(shares.get(l) == level for l in flows[f]):
                rate[f] = level
    return rate


def test_one_flow_gets_the_resource():
    assert max_min([[0]], [100.0]) == [100.0]


def test_two_equal_flows_split_a_resource():
    assert max_min([[0], [0]], [100.0]) == [50.0, 50.0]


def test_capped_flow_frees_bandwidth_for_the_other():
    assert max_min([[0], [0]], [100.0], [10.0, INF]) == [10.0, 90.0]


def test_classic_parking_lot():
    # flow 0 crosses resources 0 and 1; flows 1 and 2 use one each
    assert max_min([[0, 1], [0], [1]], [10.0, 4.0]) == [2.0, 8.0, 2.0]


def test_multiplicity_counts_identical_transfers():
    # one class standing for 3 identical transfers and one single transfer
    assert max_min([[0], [0]], [100.0], mult=[3, 1]) == [25.0, 25.0]


def test_weights_scale_the_use_of_a_resource():
    # 2 units of resource 0 per unit of transfer: 10 / 2 = 5
    assert max_min([[0]], [10.0], weights=[[2.0]]) == [5.0]


def test_linkless_class_gets_its_cap_and_an_unbounded_one_is_an_error():
    assert max_min([[], [0]], [5.0], [7.0, INF]) == [7.0, 5.0]
    with pytest.raises(ValueError, match="unbounded"):
        max_min([[]], [5.0])


def test_fcfs_shares_in_proportion_to_offered_rates():
    # resource 0 (FCFS, 200) is crossed by a class offering 300 (its resource 1) and one
    # offering 100 (its resource 2): 400 offered, each gets half its offer; fair gives 100 each
    links, cap = [[0, 1], [0, 2]], [200.0, 300.0, 100.0]
    assert max_min(links, cap, fcfs=[True, False, False]) == [150.0, 50.0]
    assert max_min(links, cap) == [100.0, 100.0]


@st.composite
def instances(draw, max_row=3):
    num_res = draw(st.integers(1, 6))
    n = draw(st.integers(1, 12))
    links, weights, caps = [], [], []
    for _ in range(n):
        row = draw(st.lists(st.integers(0, num_res - 1), min_size=1, max_size=max_row,
                            unique=True))
        links.append(row)
        weights.append([draw(st.integers(1, 4)) for _ in row])
        caps.append(draw(st.one_of(st.just(INF), st.integers(1, 60))))
    capacity = [draw(st.integers(1, 100)) for _ in range(num_res)]
    return links, capacity, caps, weights


@settings(max_examples=200, deadline=None)
@given(instances())
def test_matches_the_exact_reference(inst):
    links, capacity, caps, weights = inst
    fast = max_min(links, capacity, caps, weights)
    exact = exact_max_min([r + [-1] * (3 - len(r)) for r in links], capacity, caps,
                          [w + [0] * (3 - len(w)) for w in weights])
    assert fast == pytest.approx([float(x) for x in exact], rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances(), st.data())
def test_fcfs_is_feasible_and_max_min_without_overload(inst, data):
    links, capacity, caps, weights = inst
    fcfs = data.draw(st.lists(st.booleans(), min_size=len(capacity), max_size=len(capacity)))
    # every class needs a non-FCFS resource or a cap (its offered rate must be finite)
    ok = [any(not fcfs[l] for l in row) or c != INF for row, c in zip(links, caps)]
    links = [r for r, k in zip(links, ok) if k]
    if not links:
        return
    weights = [w for w, k in zip(weights, ok) if k]
    caps = [c for c, k in zip(caps, ok) if k]
    rates = max_min(links, capacity, caps, weights, fcfs=fcfs)
    load = [0.0] * len(capacity)
    for row, w, x in zip(links, weights, rates):
        for r, wr in zip(row, w):
            load[r] += wr * x
    assert all(u <= c * (1 + 1e-9) for u, c in zip(load, capacity))
    assert all(x <= c * (1 + 1e-9) for x, c in zip(rates, caps))
    offered = max_min(links, [INF if f else c for f, c in zip(fcfs, capacity)], caps, weights)
    open_load = [0.0] * len(capacity)
    for row, w, x in zip(links, weights, offered):
        for r, wr in zip(row, w):
            open_load[r] += wr * x
    if not any(f and u > c * (1 + 1e-9) for f, u, c in zip(fcfs, open_load, capacity)):
        assert rates == pytest.approx(max_min(links, capacity, caps, weights), rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances(max_row=6), st.data())
def test_classes_on_many_resources_match_the_reference_in_both_forms(inst, data):
    """Classes on more than 3 limited resources share one block of them per class (the
    fill's other memory layout): same rates as the reference, both forms bit-equal."""
    links, capacity, caps, weights = inst
    rates = max_min(links, capacity, caps, weights)
    exact = exact_max_min([r + [-1] * (6 - len(r)) for r in links], capacity, caps,
                          [w + [0] * (6 - len(w)) for w in weights])
    assert rates == pytest.approx([float(x) for x in exact], rel=1e-9)
    if maxmin.compiled() is not None:
        assert max_min(links, capacity, caps, weights, use_compiled=True) == rates


@pytest.fixture(scope="module")
def compiled():
    fn = maxmin.compiled()
    if fn is None:
        pytest.skip("numba is not installed: only the interpreted form runs")
    return fn


@settings(max_examples=150, deadline=None)
@given(instances(), st.data())
def test_compiled_form_is_bit_equal_to_the_interpreted_one(compiled, inst, data):
    links, capacity, caps, weights = inst
    fcfs = data.draw(st.lists(st.booleans(), min_size=len(capacity), max_size=len(capacity)))
    mult = data.draw(st.lists(st.integers(1, 3), min_size=len(links), max_size=len(links)))
    try:
        a = max_min(links, capacity, caps, weights, mult, fcfs)
    except ValueError:
        with pytest.raises(ValueError):
            max_min(links, capacity, caps, weights, mult, fcfs, use_compiled=True)
        return
    assert max_min(links, capacity, caps, weights, mult, fcfs, use_compiled=True) == a


def test_a_covered_resource_left_out_gives_the_same_rates(compiled):
    """A resource that can never fill before the resources covering it is redundant:
    leaving it out of the fills (``skip``) changes no rate, bit for bit."""
    rng = np.random.default_rng(3)
    # 12 senders (tx 0..11) and receivers (rx 12..23), each pair crossing a sender port
    # (24..35) that tx always fills first: port 400 >= tx 351.7 x weight ratio 1.1
    links, w = [], []
    for s in range(12):
        for d in range(12):
            if s != d:
                links.append([24 + s, s, 12 + d])
                w.append([1.0, 1.0 / 1.1, 1.0 / 1.1])
    n, nres = len(links), 36
    cap = [351.7] * 24 + [400.0] * 12
    sizes = rng.random(n)
    args = dict(act=np.arange(n), links=np.array(links), wts=np.array(w),
                sw=np.full(n, 3), mult=np.ones(n),
                ccap=np.where(sizes < 0.2, 30.0, np.inf), res_cap=np.array(cap),
                fcfs=np.zeros(nres, bool), any_fcfs=False)
    out = []
    for skip in (np.zeros(nres, bool), np.r_[np.zeros(24, bool), np.ones(12, bool)]):
        rate, res_rate = np.zeros(n), np.zeros(nres)
        err, _ = maxmin.solve(compiled, (*args.values(), skip, rate, res_rate, -1),
                              maxmin.scratch(nres, n, arrays=True), True)
        assert err == 0
        out.append((rate, res_rate))
    assert np.array_equal(out[0][0], out[1][0])
    assert np.array_equal(out[0][1], out[1][1])          # the skipped ports' load still counted


def _problem(links, capacity, caps, weights, fcfs, arrays):
    """``rates``'s problem arguments (without ``act`` and ``gen``) for a test instance."""
    n, nres = len(links), len(capacity)
    width = max(len(r) for r in links)
    rows = [list(r) + [-1] * (width - len(r)) for r in links]
    wts = [[float(x) for x in w] + [0.0] * (width - len(w)) for w in weights]
    cols = (rows, wts, [width] * n, [1.0] * n, [float(c) for c in caps],
            [float(c) for c in capacity], list(fcfs), any(fcfs), [False] * nres, [0.0] * n,
            [0.0] * nres)
    if not arrays:
        return cols
    return tuple(np.array(x) if isinstance(x, list) else x for x in cols)


@settings(max_examples=100, deadline=None)
@given(instances(max_row=5), st.data())
def test_an_index_reused_after_classes_left_gives_the_rates_of_a_new_one(inst, data):
    """Solving again with the same ``gen`` after some classes left ``act`` reuses the fills'
    index (``index_prune``): bit-equal to building it anew, in both forms."""
    links, capacity, caps, weights = inst
    fcfs = data.draw(st.lists(st.booleans(), min_size=len(capacity), max_size=len(capacity)))
    later = sorted(data.draw(st.sets(st.integers(0, len(links) - 1))))
    forms = [(maxmin.rates, False)]
    if maxmin.compiled() is not None:
        forms.append((maxmin.compiled(), True))
    for fn, arrays in forms:
        p = _problem(links, capacity, caps, weights, fcfs, arrays)
        act = np.arange(len(links)) if arrays else list(range(len(links)))
        s = maxmin.scratch(len(capacity), len(links), arrays=arrays)
        err, s = maxmin.solve(fn, (act, *p, 3), s, arrays)
        act = np.array(later, dtype=np.int64) if arrays else later
        err, s = maxmin.solve(fn, (act, *p, 3), s, arrays)        # reused
        reused = (list(p[9]), list(p[10]))
        err2, _ = maxmin.solve(fn, (act, *p, -1), maxmin.scratch(len(capacity), len(links),
                                                                 arrays=arrays), arrays)
        assert err == err2
        if not err:
            assert [reused[0][c] for c in later] == [list(p[9])[c] for c in later]
            assert reused[1] == list(p[10])


def _small_vs_full(links, capacity, caps, weights):
    p = _problem(links, capacity, caps, weights, [False] * len(capacity), False)
    act = list(range(len(links)))
    err, _ = maxmin.solve(maxmin.rates, (act, *p, -1),
                          maxmin.scratch(len(capacity), len(links)), False)
    rows, wts, ccap, res_cap = p[0], p[1], p[4], p[5]
    rate, res_rate = [0.0] * len(links), [0.0] * len(capacity)
    err2 = maxmin.small_rates(act, rows, wts, ccap, res_cap, rate, res_rate)
    assert err == err2
    if not err:
        assert rate == p[9]                 # bit-equal
        assert res_rate == p[10]


@settings(max_examples=300, deadline=None)
@given(instances(max_row=4))
def test_small_rates_bit_equal_to_the_fill(inst):
    """``small_rates`` (a few classes, no index) gives ``rates``'s rates to the bit."""
    _small_vs_full(*inst)


@pytest.mark.parametrize("seed", range(40))
def test_small_rates_bit_equal_to_the_fill_on_float_problems(seed):
    rng = np.random.default_rng(seed)
    nres = int(rng.integers(1, 5))
    n = int(rng.integers(1, 9))
    links = [sorted(rng.choice(nres, int(rng.integers(1, nres + 1)), replace=False).tolist())
             for _ in range(n)]
    weights = [rng.uniform(0.2, 3.0, len(r)).tolist() for r in links]
    caps = [INF if rng.random() < 0.3 else float(rng.uniform(5.0, 120.0)) for _ in range(n)]
    capacity = rng.uniform(20.0, 300.0, nres).tolist()
    _small_vs_full(links, capacity, caps, weights)


# -- the numpy form for large interpreted solves (``vector_rates``): equal up to rounding ---------
def _both(links, capacity, caps, weights, mult=None, fcfs=None, skip=None):
    """(sequential rates, vector rates), or None if both find a class bounded by nothing."""
    try:
        a = max_min(links, capacity, caps, weights, mult, fcfs, skip=skip)
    except ValueError:
        with pytest.raises(ValueError):
            max_min(links, capacity, caps, weights, mult, fcfs, skip=skip, vector=True)
        return None
    return a, max_min(links, capacity, caps, weights, mult, fcfs, skip=skip, vector=True)


@settings(max_examples=300, deadline=None)
@given(instances(max_row=5), st.data())
def test_vector_form_matches_the_fill(inst, data):
    """Integer problems (many exact ties between levels and caps), with FCFS and skipped
    resources and multiplicities: the rates of the sequential fill to 1e-12."""
    links, capacity, caps, weights = inst
    nres = len(capacity)
    fcfs = data.draw(st.lists(st.booleans(), min_size=nres, max_size=nres))
    skip = data.draw(st.lists(st.booleans(), min_size=nres, max_size=nres))
    mult = data.draw(st.lists(st.integers(1, 3), min_size=len(links), max_size=len(links)))
    got = _both(links, capacity, caps, weights, mult, fcfs, skip)
    if got is not None:
        assert got[1] == pytest.approx(got[0], rel=1e-12, abs=0.0)


@pytest.mark.parametrize("seed", range(60))
def test_vector_form_matches_the_fill_on_large_float_problems(seed):
    rng = np.random.default_rng(1000 + seed)
    nres = int(rng.integers(2, 40))
    n = int(rng.integers(50, 400))
    width = int(rng.integers(1, 8))
    links, weights = [], []
    for _ in range(n):
        k = int(rng.integers(0, min(width, nres) + 1))
        row = rng.choice(nres, k, replace=False).tolist()
        links.append(row + [-1] * (width - k))          # padded rows
        weights.append(rng.uniform(0.2, 3.0, k).tolist() + [0.0] * (width - k))
    caps = [INF if rng.random() < 0.5 else float(rng.uniform(0.05, 20.0)) for _ in range(n)]
    mult = rng.integers(1, 5, n).astype(float).tolist()
    capacity = rng.uniform(5.0, 400.0, nres).tolist()
    fcfs = (rng.random(nres) < 0.25).tolist() if seed % 2 else None
    skip = (rng.random(nres) < 0.15).tolist() if seed % 3 == 0 else None
    lim = [not ((fcfs and fcfs[r]) or (skip and skip[r])) for r in range(nres)]
    caps = [c if c < INF or any(r >= 0 and lim[r] for r in row) else 7.5
            for row, c in zip(links, caps)]
    a, b = _both(links, capacity, caps, weights, mult, fcfs, skip)
    assert b == pytest.approx(a, rel=1e-12, abs=0.0)


def test_vector_form_on_symmetric_ties():
    """Many resources at exactly one level (an all-to-all): frozen together, same rates."""
    R = 16
    links = [[s, R + d] for s in range(R) for d in range(R) if s != d]
    caps = [INF] * len(links)
    caps[3] = 1.0
    a, b = _both(links, [100.0] * (2 * R), caps, [[1.0, 1.0]] * len(links))
    assert b == pytest.approx(a, rel=1e-12, abs=0.0)


@settings(max_examples=150, deadline=None)
@given(instances(max_row=5), st.data())
def test_a_reused_index_compacted_or_not_gives_the_same_rates(inst, data):
    """``_prune`` leaves the slots of classes that left in place (the fills skip them) until
    they exceed 1/``PRUNE_SLACK`` of the live ones, then compacts: bit-equal rates and loads
    either way, after a first and a second round of classes leaving."""
    links, capacity, caps, weights = inst
    fcfs = data.draw(st.lists(st.booleans(), min_size=len(capacity), max_size=len(capacity)))
    later = sorted(data.draw(st.sets(st.integers(0, len(links) - 1))))
    last = sorted(data.draw(st.sets(st.sampled_from(later)))) if later else []
    out = []
    saved = index.PRUNE_SLACK
    try:
        for slack in (8, 0, 10 ** 9):           # as shipped, compact always, never compact
            index.PRUNE_SLACK = slack
            p = _problem(links, capacity, caps, weights, fcfs, False)
            s = maxmin.scratch(len(capacity), len(links))
            got = []
            for act in (list(range(len(links))), later, last):
                err, s = maxmin.solve(maxmin.rates, (act, *p, 3), s, False)   # index reused
                got.append((err, [p[9][c] for c in act], list(p[10])))
            out.append(got)
    finally:
        index.PRUNE_SLACK = saved
    assert out[1] == out[0] and out[2] == out[0]


@pytest.mark.parametrize("seed", range(20))
def test_vector_form_reads_a_block_of_arrays_as_its_lists(seed):
    """``vector_rates`` given the classes' rows and weights as arrays (``block``, as ``Share``
    keeps a group's rows) gives the rates and loads of the same rows as lists, bit for bit."""
    rng = np.random.default_rng(2000 + seed)
    nres, n, width = int(rng.integers(2, 30)), int(rng.integers(20, 300)), int(rng.integers(1, 7))
    rows = np.full((n, width), -1, dtype=np.int64)
    w = np.zeros((n, width))
    for c in range(n):
        k = int(rng.integers(1, min(width, nres) + 1))
        rows[c, :k] = rng.choice(nres, k, replace=False)
        w[c, :k] = rng.uniform(0.2, 3.0, k)
    caps = [INF if rng.random() < 0.5 else float(rng.uniform(0.05, 20.0)) for _ in range(n)]
    capacity = rng.uniform(5.0, 400.0, nres).tolist()
    fcfs = (rng.random(nres) < 0.25).tolist()
    skip = (rng.random(nres) < 0.15).tolist() if seed % 2 else [False] * nres
    caps = [c if c < INF or not all(r < 0 or fcfs[r] or skip[r] for r in row) else 7.5
            for row, c in zip(rows.tolist(), caps)]
    act = list(range(n))
    got = []
    for block in (None, (rows, w)):
        rate, res_rate = [0.0] * n, [0.0] * nres
        links = list(map(tuple, rows.tolist())) if block is None else [None] * n
        wts = w.tolist() if block is None else [None] * n
        err = maxmin.vector_rates(act, links, wts, [width] * n, [1.0] * n, caps, capacity, fcfs,
                                  any(fcfs), skip, rate, res_rate, block)
        got.append((err, rate, res_rate))
    assert got[0][0] == 0 and got[0] == got[1]
