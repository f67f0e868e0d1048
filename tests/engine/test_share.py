"""``FluidShare``: exact max-min fair sharing, checked against hand-computed completion
times (progressive filling by hand, to 1e-6 ns) and byte conservation."""

from __future__ import annotations

import pytest
import simpy

from simnode.engine.fluid import FluidShare


def _start(env, share, times, name, size, resources, cap=float("inf")):
    ev = share.start(size, resources, cap)
    ev.callbacks.append(lambda _e: times.__setitem__(name, env.now))
    return ev


def test_one_transfer_takes_bytes_over_capacity():
    env = simpy.Environment()
    share = FluidShare(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 250.0, (link,))
    env.run()
    assert times["a"] == pytest.approx(25.0, abs=1e-6)
    assert share.bytes_by_resource[link] == pytest.approx(250.0)
    assert share.busy_ns[link] == pytest.approx(25.0)


def test_cap_limits_a_lone_transfer():
    env = simpy.Environment()
    share = FluidShare(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 100.0, (link,), cap=4.0)
    env.run()
    assert times["a"] == pytest.approx(25.0, abs=1e-6)


def test_two_equal_flows_each_get_half():
    env = simpy.Environment()
    share = FluidShare(env)
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
    share = FluidShare(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "a", 50.0, (link,))
    _start(env, share, times, "b", 150.0, (link,))
    env.run()
    # both at 5 until a is done at 10 (b has 100 left), then b alone at 10: 10 more ns
    assert times == pytest.approx({"a": 10.0, "b": 20.0}, abs=1e-6)


def test_capped_flow_frees_bandwidth_for_the_other():
    env = simpy.Environment()
    share = FluidShare(env)
    link = share.add_resource("link", 10.0)
    times = {}
    _start(env, share, times, "capped", 100.0, (link,), cap=2.0)
    _start(env, share, times, "free", 800.0, (link,))
    assert share.current_rate == pytest.approx([10.0])     # 2 + 8: the link stays full
    env.run()
    # capped at 2 -> done at 50; free gets 8 (not 5) meanwhile: 400 B by t=50,
    # then the whole 10 B/ns for the remaining 400 B: done at 90.
    assert times == pytest.approx({"capped": 50.0, "free": 90.0}, abs=1e-6)
    assert share.bytes_by_resource[link] == pytest.approx(900.0)


def test_late_arrival_splits_the_remaining_bandwidth():
    env = simpy.Environment()
    share = FluidShare(env)
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
    share = FluidShare(env)
    r1 = share.add_resource("r1", 10.0)
    r2 = share.add_resource("r2", 4.0)
    times = {}
    _start(env, share, times, "X", 70.0, (r1,))
    _start(env, share, times, "Y", 60.0, (r1, r2))
    _start(env, share, times, "Z", 5.0, (r2,), cap=1.0)
    assert share.current_rate == pytest.approx([7.0 + 3.0, 3.0 + 1.0])
    env.run()
    assert times["Z"] == pytest.approx(5.0, abs=1e-6)
    assert times["X"] == pytest.approx(5.0 + 35.0 / 6.0, abs=1e-6)
    assert times["Y"] == pytest.approx(5.0 + 45.0 / 4.0, abs=1e-6)
    assert share.bytes_by_resource[r1] == pytest.approx(130.0)
    assert share.bytes_by_resource[r2] == pytest.approx(65.0)
    assert share.current_rate == [0.0, 0.0]


def test_many_members_of_one_class_finish_in_size_order():
    env = simpy.Environment()
    share = FluidShare(env)
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
    share = FluidShare(env)
    link = share.add_resource("link", 1.0)
    ev = share.start(0, (link,))
    assert ev.triggered
    env.run()
    assert env.now == 0.0
