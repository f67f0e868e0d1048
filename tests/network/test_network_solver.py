"""Max-min solver: closed forms, and the vectorized solver against the exact reference."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simnode.network.solver import fcfs_max_min_rates, max_min_rates, max_min_rates_exact

INF = float("inf")


def test_one_flow_gets_the_link():
    assert max_min_rates([[0]], [100.0]).tolist() == [100.0]


def test_two_equal_flows_split_a_link():
    assert max_min_rates([[0], [0]], [100.0]).tolist() == [50.0, 50.0]


def test_capped_flow_frees_bandwidth_for_the_other():
    assert max_min_rates([[0], [0]], [100.0], [10.0, INF]).tolist() == [10.0, 90.0]


def test_classic_parking_lot():
    # flow 0 crosses links 0 and 1; flows 1 and 2 use one link each
    rates = max_min_rates([[0, 1], [0, -1], [1, -1]], [10.0, 4.0])
    assert rates.tolist() == [2.0, 8.0, 2.0]


def test_weights_count_multiplicity():
    # one row standing for 3 identical flows (weight 3) and one single flow
    rates = max_min_rates([[0], [0]], [100.0], flow_weights=[[3.0], [1.0]])
    assert rates.tolist() == [25.0, 25.0]


def test_linkless_flows_get_their_cap():
    rates = max_min_rates([[-1], [0]], [5.0], [7.0, INF])
    assert rates.tolist() == [7.0, 5.0]
    assert max_min_rates([[-1]], [5.0]).tolist() == [INF]


def test_empty():
    assert max_min_rates(np.zeros((0, 2), dtype=int), [1.0]).shape == (0,)


@st.composite
def instances(draw):
    num_links = draw(st.integers(1, 6))
    num_flows = draw(st.integers(1, 12))
    width = draw(st.integers(1, 3))
    links, weights, caps = [], [], []
    for _ in range(num_flows):
        row = draw(st.lists(st.integers(0, num_links - 1), min_size=1, max_size=width, unique=True))
        links.append(row + [-1] * (width - len(row)))
        weights.append([draw(st.integers(1, 4)) for _ in row] + [0] * (width - len(row)))
        caps.append(draw(st.one_of(st.just(INF), st.integers(1, 60))))
    capacity = [draw(st.integers(1, 100)) for _ in range(num_links)]
    return links, capacity, caps, weights


@settings(max_examples=200, deadline=None)
@given(instances())
def test_matches_exact_reference(inst):
    links, capacity, caps, weights = inst
    fast = max_min_rates(np.array(links), np.array(capacity, float), np.array(caps, float),
                         np.array(weights, float))
    exact = max_min_rates_exact(links, capacity, caps, weights)
    assert fast.tolist() == pytest.approx([float(x) for x in exact], rel=1e-9)


@settings(max_examples=100, deadline=None)
@given(instances())
def test_reference_is_max_min_fair(inst):
    """Feasible, and every flow is at its cap or crosses a full link where it is largest."""
    links, capacity, caps, weights = inst
    rates = max_min_rates_exact(links, capacity, caps, weights)
    load = [Fraction(0)] * len(capacity)
    for f, row in enumerate(links):
        for link, w in zip(row, weights[f]):
            if link >= 0:
                load[link] += w * rates[f]
    assert all(load[l] <= capacity[l] for l in range(len(capacity)))
    for f, row in enumerate(links):
        if caps[f] != INF and rates[f] == caps[f]:
            continue
        assert any(load[l] == capacity[l] and all(
            rates[g] <= rates[f] for g, other in enumerate(links) if l in other)
            for l in row if l >= 0)


@pytest.mark.parametrize("candidates", [1, 2, 5])
def test_few_candidate_links_per_pass_give_the_same_rates(monkeypatch, candidates):
    """The readiness test over the lowest links is exact whatever their number."""
    import simnode.network.solver as solver
    monkeypatch.setattr(solver, "CANDIDATES", candidates)
    rng = np.random.default_rng(1)
    for _ in range(40):
        num_links, num_flows = rng.integers(2, 12), rng.integers(1, 30)
        sizes = np.minimum(rng.integers(1, 4, size=num_flows), num_links)
        links = np.array([np.r_[rng.choice(num_links, size=k, replace=False), [-1] * (3 - k)]
                          for k in sizes]).astype(int)
        weights = np.where(links >= 0, rng.integers(1, 4, size=links.shape), 0)
        caps = np.where(rng.random(num_flows) < 0.3, rng.integers(1, 40, num_flows), INF)
        capacity = rng.integers(1, 100, size=num_links)
        fast = solver.max_min_rates(links, capacity.astype(float), caps, weights.astype(float))
        exact = max_min_rates_exact(links.tolist(), capacity.tolist(), caps.tolist(),
                                    weights.tolist())
        assert fast.tolist() == pytest.approx([float(x) for x in exact], rel=1e-9)


# -- first-come-first-served links -----------------------------------------------------------
def test_fcfs_link_shares_in_proportion_to_offered_rates():
    # link 0 (FCFS, 200) is crossed by a flow offering 300 (its link 1) and one offering 100
    # (its link 2): 400 offered, each gets half its offer; a fair link would give 100 each
    links, cap = [[0, 1], [0, 2]], [200.0, 300.0, 100.0]
    assert fcfs_max_min_rates(links, cap, [True, False, False]).tolist() == [150.0, 50.0]
    assert max_min_rates(links, cap).tolist() == [100.0, 100.0]


@settings(max_examples=200, deadline=None)
@given(instances(), st.data())
def test_fcfs_is_feasible_and_max_min_without_overload(inst, data):
    links, capacity, caps, weights = inst
    fcfs = data.draw(st.lists(st.booleans(), min_size=len(capacity), max_size=len(capacity)))
    # every flow needs a non-FCFS link or a cap (its offered rate must be finite)
    finite = [any(l >= 0 and not fcfs[l] for l in row) or c != INF for row, c in zip(links, caps)]
    links = [row for row, ok in zip(links, finite) if ok]
    if not links:
        return
    weights = [w for w, ok in zip(weights, finite) if ok]
    caps = [c for c, ok in zip(caps, finite) if ok]
    L, W, C = np.array(links), np.array(weights, float), np.array(caps, float)
    cap = np.array(capacity, float)
    rates = fcfs_max_min_rates(L, cap, np.array(fcfs), C, W)
    m = L >= 0
    load = np.bincount(L[m], weights=(W * rates[:, None])[m], minlength=cap.size)
    assert (load <= cap * (1 + 1e-9)).all() and (rates <= C * (1 + 1e-9)).all()
    offered = max_min_rates(L, np.where(fcfs, INF, cap), C, W)
    open_load = np.bincount(L[m], weights=(W * offered[:, None])[m], minlength=cap.size)
    if not (np.array(fcfs) & (open_load > cap * (1 + 1e-9))).any():
        assert rates.tolist() == pytest.approx(max_min_rates(L, cap, C, W).tolist(), rel=1e-9)
