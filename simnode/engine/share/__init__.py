"""``Share``: the one engine for every shared rate in simnode (max-min fair, event-driven).

Everything that shares a rate goes through it: a chip's GM copies against its L2 and HBM,
messages against network links and URMA ceilings, a kernel task against the HBM its
rank's URMA traffic also reads. One interface:

- ``add_resource(name, capacity, policy)`` / ``add_resources``: a resource serves at most
  ``capacity`` units per ns (GB/s = bytes/ns for bandwidth; 1.0 for an engine's time);
  ``policy`` "fair" (max-min, default) or "fcfs" (first come, first served: overloaded
  users are served in proportion to the load they offer, ``simnode.engine.maxmin``);
- ``start(size, resources, weights, cap, latency_ns, tag) -> Transfer``: a transfer of
  ``size`` units that uses ``weight x rate`` of each resource and at most ``cap``; the
  SimPy event fires ``latency_ns`` after its last unit was served (``start_transfer``: the
  same for a ``Transfer`` made by the caller);
- ``start_cb(...)``: the same, calling ``fn(served_ns, arg)`` instead of firing an event
  (the chip's pipes: no SimPy event per copy); ``start_keyed``: the same with the class key
  ready-made;
- ``start_group(sizes, rows, weights, caps, latency_ns) -> Group``: many transfers at
  once (arrays), one event when the last has arrived (a rank's message trains);
- ``cover(resource, by)``: a resource whose every user crosses one of ``by`` (speed only);
- utilization: ``bytes_by_resource``, ``busy_ns``, ``current_rate``, ``series`` (per
  resource over time, bounded memory) and an ``on_rates(now, rates)`` hook.

Model. Transfers with the same (cap, resources) form a class and always get the same rate,
so rates are solved over classes (``simnode.engine.maxmin``). Within a class a virtual clock
(units served per member) and a heap of finish tags order completions.

Batching (``batch_window_ns`` = W). Rates are recomputed when transfers start or end, at
most about once per W, and never so that a resource serves more than its capacity:
- ends: at the first completion t1 after a solve, every transfer that finishes in
  [t1, t1 + W] at the current rates forms a group; each member is served at its own
  exact time, but the group is retired, and rates recomputed, only at its last finish:
  until then members keep their share (it idles);
- starts: a start is solved at once if it comes at the instant of the last solve or more
  than W after it; otherwise it waits (at most W; during a group, for its end) at rate 0.
So a transfer may start up to W late and hold its share up to W after its end: the error
is bounded by W per event and pessimistic. W = 0 is exact: every start or end is solved at
its own instant (starts at one instant together).

Speed. A share begins with its classes in Python lists and runs the inner loops and the
solver interpreted: the fastest form for a chip's few classes and for short runs. Once the
solves of a run have touched more than ``solve.COMPILE_AFTER`` class-resource incidences,
it swaps its class table for one in numpy arrays whose loops run compiled by numba
(``simnode.engine.jit``); results are identical either way. Exception: an interpreted solve
of at least ``solve.VECTOR_SOLVE`` incidences runs ``maxmin.vector_rates`` (numpy; equal to
the sequential fill to 1e-12 relative, not to the bit).

The parts, one job each:

- ``facade``: ``Share``, the interface above and the event loop (when to solve);
- ``events``: ``Transfer`` and ``Group``, the completion events;
- ``table``: the class table's one interface and what its backends share; ``lists`` and
  ``arrays``: its two backends (chosen once: lists, then arrays);
- ``loops``: the inner loops over classes, written once for both backends;
- ``solve``: the solve dispatcher (which solver, per backend); ``memo``: small solves'
  rates remembered by their inputs;
- ``fastpath``: the uncontended fast path (no solve while nothing contends);
- ``release``: completions (commit, retire, release of finished members);
- ``groups``: running groups and their members' state;
- ``covers``: redundant resources left out of the solves.
"""

from simnode.engine.share.events import Group, Transfer
from simnode.engine.share.facade import Share

__all__ = ["Group", "Share", "Transfer"]
