"""FlowNetwork on SimPy: closed forms, all-to-all against the bound, conservation, batching."""

import numpy as np
import pytest
import simpy

from simnode.network.bound import analytical_bound_ns
from simnode.network.clos import build_clos
from simnode.network.flows import FlowNetwork
from simnode.network.routes import ecmp_choice
from simnode.config.supernode import SupernodeSpec


def spec(**kw) -> SupernodeSpec:
    """4 ranks, 2 per leaf, 2 spines; 100 GB/s everywhere, no fixed costs unless asked."""
    base = dict(num_ranks=4, ports_per_rank=1, port_bandwidth_GBps=100.0, leaf_radix=4,
                spine_radix=4, num_spines=2, oversubscription=1.0, routing="spray",
                hop_latency_ns=0.0, link_latency_ns=0.0, mtu_bytes=1000,
                header_bytes_per_packet=0, wqe_processing_ns=0.0, doorbell_ns=0.0,
                wqebb_bytes=64, source="t.yaml")
    base.update(kw)
    return SupernodeSpec(**base)


def run_sends(net, sends):
    """sends: (src, dst, size, kwargs); returns {tag: arrival time}."""
    done = {}

    def one(i, src, dst, size, kw):
        t = yield net.send(src, dst, size, tag=i, **kw)
        done[t] = net.env.now

    for i, (src, dst, size, kw) in enumerate(sends):
        net.env.process(one(i, src, dst, size, kw))
    net.env.run()
    return done


@pytest.mark.parametrize("routing", ["spray", "ecmp"])
def test_one_message_takes_latency_plus_wire_bytes_over_bandwidth(routing):
    net = FlowNetwork(simpy.Environment(), spec(hop_latency_ns=10.0, link_latency_ns=5.0,
                                                header_bytes_per_packet=50, routing=routing))
    done = run_sends(net, [(0, 2, 2500, {})])
    # 3 packets: 2650 wire bytes at 100 B/ns, plus 4 links x 5 ns + 3 switches x 10 ns
    assert done[0] == pytest.approx(26.5 + 50.0)
    assert net.share.recomputes == 2


def test_two_equal_flows_on_one_link_each_get_half():
    done = run_sends(FlowNetwork(simpy.Environment(), spec()),
                     [(0, 2, 1000, {}), (1, 2, 1000, {})])
    assert done == {0: pytest.approx(20.0), 1: pytest.approx(20.0)}


def test_capped_flow_frees_bandwidth_for_the_other():
    done = run_sends(FlowNetwork(simpy.Environment(), spec()),
                     [(0, 2, 1000, {"cap_GBps": 20.0}), (1, 2, 1000, {})])
    assert done[1] == pytest.approx(1000 / 80)
    assert done[0] == pytest.approx(50.0)


def test_extra_resource_is_shared_with_plain_transfers():
    env = simpy.Environment()
    net = FlowNetwork(env, spec())
    hbm = net.share.add_resource("rank0.hbm_read", 60.0)
    times = {}

    def copy():
        yield net.share.start(1000, (hbm,))
        times["copy"] = env.now

    env.process(copy())
    times.update(run_sends(net, [(0, 2, 1000, {"extra_resources": (hbm,)})]))
    assert times == {"copy": pytest.approx(1000 / 30), 0: pytest.approx(1000 / 30)}


@pytest.mark.parametrize("fcfs, copy_ns, send_ns", [(False, 10.0, 10.0), (True, 1000 / 150, 40 / 3)])
def test_fcfs_resource_shares_in_proportion_to_offered_load(fcfs, copy_ns, send_ns):
    """HBM of 200 GB/s: a copy offering 300 (its MTE) and a send offering 100 (its link).
    Fair: the send keeps its 100, the copy gets the other 100. FCFS: 400 offered, each gets
    half its offer (copy 150, send 50) until the copy ends; then the send runs at 100."""
    env = simpy.Environment()
    net = FlowNetwork(env, spec())
    hbm = net.share.add_resources(["rank0.hbm"], [200.0], "fcfs" if fcfs else "fair")[0]
    mte = net.share.add_resource("rank0.mte", 300.0)
    times = {}

    def copy():
        yield net.share.start(1000, (mte, hbm))
        times["copy"] = env.now

    env.process(copy())
    times.update(run_sends(net, [(0, 2, 1000, {"extra_resources": (hbm,)})]))
    assert times == {"copy": pytest.approx(copy_ns), 0: pytest.approx(send_ns)}
    assert net.share.bytes_by_resource[hbm] == pytest.approx(2000)


def test_extra_resources_carry_payload_not_headers():
    env = simpy.Environment()
    net = FlowNetwork(env, spec(header_bytes_per_packet=100))
    hbm = net.share.add_resource("hbm", 50.0)
    done = run_sends(net, [(0, 2, 1000, {"extra_resources": (hbm,)})])
    assert done[0] == pytest.approx(1000 / 50)          # payload at the HBM's 50 GB/s
    net.share.sync()
    assert net.share.bytes_by_resource[hbm] == pytest.approx(1000)
    assert net.share.bytes_by_resource[net.ports[0]] == pytest.approx(1100)   # rank0's link: wire bytes


def _keys(same: bool):
    for k1 in range(50):
        for k2 in range(50):
            if (ecmp_choice(0, 2, k1, 2) == ecmp_choice(1, 3, k2, 2)) == same:
                return k1, k2


@pytest.mark.parametrize("same_spine, expected_ns", [(True, 20.0), (False, 10.0)])
def test_ecmp_flows_hashed_to_one_spine_share_its_link(same_spine, expected_ns):
    k1, k2 = _keys(same_spine)
    net = FlowNetwork(simpy.Environment(), spec(routing="ecmp"))
    done = run_sends(net, [(0, 2, 1000, {"flow_key": k1}), (1, 3, 1000, {"flow_key": k2})])
    assert done[0] == pytest.approx(expected_ns) and done[1] == pytest.approx(expected_ns)


def test_spray_spreads_over_all_spines():
    net = FlowNetwork(simpy.Environment(), spec())
    assert "leaf0->spines" in net.share.names
    assert net.share.capacity[net.share.names.index("leaf0->spines")] == 200.0
    done = run_sends(net, [(0, 2, 1000, {}), (1, 3, 1000, {})])
    assert done == {0: pytest.approx(10.0), 1: pytest.approx(10.0)}


def all_to_all(routing="spray", window=0.0, queues=4):
    """16 ranks x ``queues`` send queues; each queue sends to its share of the peers in turn."""
    s = spec(num_ranks=16, leaf_radix=8, num_spines=4, routing=routing)
    env = simpy.Environment()
    net = FlowNetwork(env, s, batch_window_ns=window)
    traffic = np.zeros((16, 16))
    log = []

    def queue(r, q):
        for i in range(q + 1, 16, queues):
            d = (r + i) % 16
            size = 20_000 + 1000 * ((r * 7 + d * 3) % 5)
            traffic[r, d] += size
            yield net.send(r, d, size, tag=(r, d), flow_key=q).injected
            log.append(((r, d), env.now))

    for r in range(16):
        for q in range(queues):
            env.process(queue(r, q))
    env.run()
    return net, traffic, log


def test_uniform_all_to_all_is_close_to_and_above_the_bound():
    net, traffic, _ = all_to_all()
    bound = analytical_bound_ns(traffic, net.spec)
    assert bound <= env_time(net) <= 1.03 * bound


def env_time(net):
    return net.env.now


def test_batching_is_never_faster_than_the_bound_and_solves_less():
    exact, traffic, _ = all_to_all(window=0.0)
    batched, _, _ = all_to_all(window=20.0)
    bound = analytical_bound_ns(traffic, exact.spec)
    assert bound <= env_time(batched) <= 1.05 * env_time(exact)
    assert batched.share.recomputes < exact.share.recomputes


def test_ecmp_all_to_all_is_not_below_the_bound():
    net, traffic, _ = all_to_all(routing="ecmp")
    assert env_time(net) >= analytical_bound_ns(traffic, net.spec, routing="spray")


@pytest.mark.parametrize("window", [0.0, 50.0])
def test_bytes_are_conserved_on_every_link(window):
    net, traffic, _ = all_to_all(window=window)
    net.share.sync()
    sent = traffic.sum(axis=1)          # 20-24 kB messages: 21..25 packets of 1000 B, no header
    for r in range(16):
        assert net.share.bytes_by_resource[net.share.names.index(f"rank{r}->leaf{r // 4}")] == pytest.approx(sent[r])
        assert net.share.bytes_by_resource[net.share.names.index(f"leaf{r // 4}->rank{r}")] == pytest.approx(
            traffic[:, r].sum())
    leaf = np.arange(16) // 4
    cross = traffic[leaf[:, None] != leaf[None, :]].sum()
    ups = sum(net.share.bytes_by_resource[net.share.names.index(f"leaf{j}->spines")] for j in range(4))
    assert ups == pytest.approx(cross)
    assert net.share.transfers_done == net.share.transfers_started == net.messages_sent


def test_runs_are_deterministic():
    a = all_to_all(window=10.0)
    b = all_to_all(window=10.0)
    assert a[2] == b[2] and a[0].share.recomputes == b[0].share.recomputes


def test_utilization_series_adds_up_and_stays_below_one():
    net, _, _ = all_to_all(window=50.0)
    edges, util = net.utilization_series()
    bin_ns = edges[1] - edges[0]
    moved = (util * net.share.capacity * bin_ns).sum(axis=0)
    assert moved == pytest.approx(net.share.bytes_by_resource, rel=1e-9, abs=1e-6)
    assert util.max() <= 1 + 1e-9
    hot = net.hottest_links(3)
    busy = [round(u, 9) for _, _, u in hot]          # equal to float noise: a tie, by port order
    assert busy == sorted(busy, reverse=True)
    assert all(0 < u <= 1 + 1e-9 for _, _, u in hot)


def test_batch_window_delays_a_start_by_at_most_the_window():
    """A ends at 10 ns, B at 12 ns; C starts on A's link when A ends. Exact: C ends at 20.
    With a 5 ns window A and B form one group, so rates are re-solved at 12: C ends at 22."""
    def run(window):
        env = simpy.Environment()
        net = FlowNetwork(env, spec(), batch_window_ns=window)
        ends = {}

        def a_then_c():
            yield net.send(0, 1, 1000).injected
            yield net.send(0, 1, 1000)
            ends["c"] = env.now

        env.process(a_then_c())
        ends["b"] = None
        net.send(2, 3, 1200).callbacks.append(lambda e: ends.__setitem__("b", env.now))
        env.run()
        return ends

    assert run(0.0) == {"c": pytest.approx(20.0), "b": pytest.approx(12.0)}
    assert run(5.0) == {"c": pytest.approx(22.0), "b": pytest.approx(12.0)}


def test_injected_fires_one_latency_before_arrival_and_value_is_the_tag():
    env = simpy.Environment()
    net = FlowNetwork(env, spec(link_latency_ns=7.0, hop_latency_ns=11.0))
    seen = []
    tr = net.send(0, 1, 1000, tag="msg")
    tr.injected.callbacks.append(lambda e: seen.append(("injected", env.now, e.value)))
    tr.callbacks.append(lambda e: seen.append(("arrived", env.now, e.value)))
    env.run()
    assert seen == [("injected", 10.0, "msg"), ("arrived", 10.0 + 2 * 7 + 11, "msg")]


def test_local_send_uses_only_the_extra_resources():
    env = simpy.Environment()
    net = FlowNetwork(env, spec())
    hbm = net.share.add_resource("hbm", 25.0)
    done = run_sends(net, [(1, 1, 1000, {"extra_resources": (hbm,)}), (2, 2, 1000, {})])
    assert done == {0: pytest.approx(40.0), 1: 0.0}
    assert net.port_bytes().sum() == 0


def test_on_message_reports_each_message():
    env = simpy.Environment()
    got = []
    net = FlowNetwork(env, spec(link_latency_ns=1.0),
                      on_message=lambda t: got.append((t.src, t.dst, t.payload_bytes, t.tag,
                                                       t.served_ns + t.latency_ns)))
    run_sends(net, [(0, 3, 500, {})])
    assert got == [(0, 3, 500, 0, pytest.approx(5.0 + 4.0))]


def test_a_graph_with_a_removed_link_routes_around_it():
    g = build_clos(spec(routing="ecmp"))
    g.remove_edge("leaf0", "spine0")
    g.remove_edge("spine0", "leaf0")
    net = FlowNetwork(simpy.Environment(), g)
    for key in range(8):
        path, _ = net.route(0, 2, key)
        assert net.share.names[path[1]] == "leaf0->spine1"
    with pytest.raises(ValueError, match="spray needs"):
        FlowNetwork(simpy.Environment(), g, routing="spray").route(0, 2)


def test_bad_arguments():
    net = FlowNetwork(simpy.Environment(), spec())
    with pytest.raises(ValueError, match="ranks must be in 0..3"):
        net.send(0, 4, 10)
    with pytest.raises(ValueError, match="cap must be > 0"):
        net.send(0, 1, 10, cap_GBps=0)
    with pytest.raises(ValueError, match="capacity must be > 0"):
        net.share.add_resource("x", 0)
    with pytest.raises(ValueError, match="routing"):
        FlowNetwork(simpy.Environment(), spec(), routing="adaptive")


def test_a_finished_transfer_keeps_a_small_footprint():
    """EP1024 holds ~10^6 transfers alive at once: a Transfer that fires must not get an
    instance dict of its own (simpy's late ``_ok`` key did that, ~0.7 KB each)."""
    import tracemalloc

    from simnode.engine.share import Transfer
    env = simpy.Environment()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        live = [Transfer(env, 100.0, 5.0, (1, 2), 1, 2) for _ in range(2000)]
        for tr in live:
            tr.finish(3.0)                  # schedules its event, as a served transfer does
        per = (tracemalloc.get_traced_memory()[0] - before) / len(live)
    finally:
        tracemalloc.stop()
    assert per < 600, f"{per:.0f} B per finished transfer"


def test_class_rows_grow_by_what_a_batch_needs_not_by_doubling():
    """2^20 pair classes + a few (EP1024 combine) must not allocate 2^21 rows."""
    from simnode.engine.share import Share
    env = simpy.Environment()
    share = Share(env)
    share.compile_now()
    if not share.compiled:
        pytest.skip("numba is not installed: class rows are Python lists")
    n = 1100                                    # past 1024 rows by 76
    ids = share.add_resources([f"r{i}" for i in range(n)], [1.0] * n)
    for i in ids:
        share.start(1000.0, (i,))               # one class each, all in the first solve
    env.run()
    assert share.transfers_done == n
    assert n <= share.table.links.shape[0] < 1.25 * n
