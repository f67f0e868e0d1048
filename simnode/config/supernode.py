"""The supernode's schema: the frozen record every network model reads.

``SupernodeSpec`` describes the Clos network that joins the ranks (chips) of a
supernode: port counts and rates, leaf/spine switch radix, oversubscription,
latencies, routing policy, and the per-message costs of the URMA engines.
``supernode_from_mapping(data, source)`` builds it from the ``supernode:`` section of
a topology file (see ``simnode.config.topology``); ``check_shape(spec)`` rejects
shapes that cannot be built (it is also run by ``simnode.network.clos.build_clos``).

Two shapes (``shape``):

- ``clos`` (default): the two-tier Clos below.
- ``full_mesh``: every pair of ranks joined directly, as the 8-card box's netlayer 0
  (facts 1.5, S7: a 1D full mesh, 28 peer-to-peer links for 8 ranks). A rank's ports
  are split evenly over its ``num_ranks - 1`` peers: ``ports_per_peer`` ports (spare
  ones unused) make one link per peer and direction, of ``peer_link_GBps``. There are no
  switches: the switch and routing keys are not used.

Shape of the two-tier Clos (one plane; a rank's ports are bundled into one link):
each leaf switch has ``ranks_per_leaf`` ranks, each using ``ports_per_rank`` down
ports, and ``ceil(down ports / oversubscription)`` up ports spread evenly over the
spines; the uplink capacity is exactly ``down capacity / oversubscription``. Ranks
fill leaves in order: rank r sits on leaf ``r // ranks_per_leaf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from simnode.config.fields import Reader
from simnode.config.params import REQUIRED, declared_param, param, read
from simnode.errors import ConfigError

ROUTING_POLICIES = ("ecmp", "spray")
SHAPES = ("clos", "full_mesh")
#: keys of a Clos that a full mesh (no switches) does not have
CLOS_ONLY_KEYS = ("leaf_radix", "spine_radix", "num_spines", "oversubscription", "routing",
                  "hop_latency_ns")
#: the values a full mesh takes for the keys it has no use for (never read by its model)
FULL_MESH_PLACEHOLDERS = {"leaf_radix": 2, "num_spines": 0, "oversubscription": 1.0,
                          "routing": "spray", "hop_latency_ns": 0.0}
MAX_RANKS = 8192        # facts 1.5, S10: the Atlas 950 SuperPoD has 8192 NPUs
#: the largest switch radix or port count accepted: 8x the 512-port switch ASICs of today,
#: room for any what-if while keeping the shape checks (a loop over ports) instant
MAX_RADIX = 4096


_CLOS = "required with shape: clos; a full_mesh has no switches and leaves it out"


@dataclass(frozen=True)
class SupernodeSpec:
    """A supernode's Clos network and per-message costs; see the module docstring."""
    num_ranks: int = param(doc="chips (EP ranks) in the supernode", unit="ranks", min=2,
                           max=MAX_RANKS, origin="")
    ports_per_rank: int = param(doc="network ports of one rank, all into its leaf switch",
                                unit="ports", min=1, max=MAX_RADIX, origin="")
    port_bandwidth_GBps: float = param(
        doc="wire rate of one port, per direction (headers included)", positive=True, origin="")
    leaf_radix: int = param(doc="ports of a leaf switch, down + up", unit="ports", min=2,
                            max=MAX_RADIX, origin="", omitted=_CLOS)
    spine_radix: int = param(doc="ports of a spine switch", unit="ports", min=1, max=MAX_RADIX,
                             origin="", omitted="leaf_radix")
    num_spines: int = param(doc="spine switches (0 only if one leaf holds every rank)",
                            unit="switches", min=0, max=MAX_RADIX, origin="", omitted=_CLOS)
    oversubscription: float = param(doc="leaf down:up capacity ratio; 1.0 = non-blocking",
                                    unit="ratio", min=1.0, origin="", omitted=_CLOS)
    routing: str = param(doc="ecmp (one spine per flow, by hash) or spray (all spines)",
                         choices=ROUTING_POLICIES, origin="", omitted=_CLOS)
    hop_latency_ns: float = param(doc="forwarding latency of one switch", min=0, origin="",
                                  omitted=_CLOS)
    link_latency_ns: float = param(doc="propagation latency of one link (cable)", min=0, origin="")
    mtu_bytes: int = param(doc="payload bytes per packet", min=1, origin="")
    header_bytes_per_packet: int = param(doc="wire overhead per packet", unit="B/packet", min=0,
                                         origin="")
    wqe_processing_ns: float = param(
        doc="sender URMA engine time per WQE (descriptor), serial per rank", min=0, origin="")
    doorbell_ns: float = param(doc="doorbell write to the engine starting on the first WQE", min=0,
                               origin="")
    wqebb_bytes: int = param(doc="size of one WQE basic block in the send queue", min=1, origin="")
    urma_payload_GBps: float = param(
        0.0, "most payload one rank's URMA engine moves per direction, all peers together "
        "(sending and receiving are separate limits); 0 = no limit besides the ports", min=0,
        origin="")
    urma_context_cache_entries: int = param(
        0, "what-if: peer transport contexts the URMA engine keeps at hand (see "
        "urma_context_miss_ns)", unit="entries", min=0, origin="")
    urma_context_miss_ns: float = param(
        0.0, "what-if: engine stall per WQE whose peer context is not cached, moving no payload "
        "meanwhile; 0 = contexts always at hand (no such cost is published, facts 5.5)", min=0,
        origin="")
    urma_wqe_ns_per_peer: float = param(
        0.0, "what-if: engine stall per WQE per peer the rank posts to, moving no payload "
        "meanwhile; 0 = none (no such cost is published)", min=0, origin="")
    shape: str = param("clos", "clos (two-tier Clos) or full_mesh (every pair of ranks joined "
                       "directly; module docstring)", choices=SHAPES, origin="")
    source: str = field(default="", compare=False)   #: file it was read from (not a parameter)

    # -- derived shape ---------------------------------------------------------------------
    @property
    def rank_bandwidth_GBps(self) -> float:
        """Wire rate of one rank into (or out of) the network, per direction."""
        return self.ports_per_rank * self.port_bandwidth_GBps

    @property
    def ports_per_peer(self) -> int:
        """full_mesh: ports that join a rank to each of its peers (0 if too few ports)."""
        return self.ports_per_rank // max(1, self.num_ranks - 1)

    @property
    def peer_link_GBps(self) -> float:
        """full_mesh: wire rate of the link to one peer, per direction."""
        return self.ports_per_peer * self.port_bandwidth_GBps

    @property
    def ranks_per_leaf(self) -> int:
        """Most ranks r with r*ports_per_rank down ports plus their uplink ports <= leaf_radix."""
        p, o = self.ports_per_rank, self.oversubscription
        r = self.leaf_radix // p
        while r > 0 and r * p + _up_ports(r * p, o) > self.leaf_radix:
            r -= 1
        return r

    @property
    def num_leaves(self) -> int:
        rpl = self.ranks_per_leaf
        return -(-self.num_ranks // rpl) if rpl else 0

    @property
    def leaf_up_ports(self) -> int:
        """Up ports of one (full) leaf switch."""
        return _up_ports(self.ranks_per_leaf * self.ports_per_rank, self.oversubscription)

    @property
    def leaf_uplink_GBps(self) -> float:
        """Total uplink capacity of one leaf, per direction: down capacity / oversubscription."""
        return self.ranks_per_leaf * self.rank_bandwidth_GBps / self.oversubscription

    @property
    def leaf_spine_link_GBps(self) -> float:
        """Capacity of the (bundled) link between one leaf and one spine, per direction."""
        return self.leaf_uplink_GBps / self.num_spines if self.num_spines else 0.0

    def leaf_of(self, rank: int) -> int:
        return rank // self.ranks_per_leaf

    # -- per-message wire accounting --------------------------------------------------------
    def packets(self, size_bytes: float) -> int:
        """Packets of a message: at least one (a zero-byte message still carries a header)."""
        return max(1, math.ceil(size_bytes / self.mtu_bytes))

    def wire_bytes(self, size_bytes: float) -> float:
        """Bytes on the wire for a message of ``size_bytes`` payload."""
        return size_bytes + self.packets(size_bytes) * self.header_bytes_per_packet

    @property
    def payload_efficiency(self) -> float:
        """Payload share of a full packet: the large-message limit of payload / wire bytes."""
        return self.mtu_bytes / (self.mtu_bytes + self.header_bytes_per_packet)

    # -- URMA peer-context cache (what-if) ----------------------------------------------------
    def context_miss_fraction(self, peers: int) -> float:
        """Share of WQEs whose peer context misses a cache of ``urma_context_cache_entries``
        when a rank posts to ``peers`` peers in an interleaved, effectively random order
        (64 Jetties, facts 1.5): the steady-state hit rate of C entries over P equally used
        peers is C/P whatever the replacement policy. 0 if the miss cost is off."""
        if self.urma_context_miss_ns <= 0 or peers <= 0:
            return 0.0
        return max(0.0, 1.0 - self.urma_context_cache_entries / peers)

    def wqe_stall_ns(self, peers: int) -> float:
        """Mean engine stall per WQE (ns) of a rank posting to ``peers`` peers, from the two
        what-ifs: a peer-context miss (``context_miss_fraction`` x ``urma_context_miss_ns``)
        and a cost that grows with every peer (``peers`` x ``urma_wqe_ns_per_peer``, the shape
        of, e.g., an engine that walks per-peer state for each WQE). 0 in shipped topologies."""
        return (self.context_miss_fraction(peers) * self.urma_context_miss_ns
                + max(peers, 0) * self.urma_wqe_ns_per_peer)


def _up_ports(down_ports: int, oversubscription: float) -> int:
    return math.ceil(down_ports / oversubscription - 1e-9)


def check_shape(spec: SupernodeSpec) -> None:
    """Raise ConfigError (naming file, key path, value) if the network cannot be built."""
    src, path = spec.source or "<SupernodeSpec>", "supernode"

    def err(key, value, expected):
        return ConfigError(src, f"{path}.{key}", value, expected)

    if spec.port_bandwidth_GBps <= 0:
        raise err("port_bandwidth_GBps", spec.port_bandwidth_GBps, "a number greater than 0")
    for key, what in (("urma_context_miss_ns", "a miss"), ("urma_wqe_ns_per_peer", "the cost")):
        if getattr(spec, key) > 0 and spec.urma_payload_GBps <= 0:
            raise err(key, getattr(spec, key),
                      f"0 unless supernode.urma_payload_GBps > 0: {what} stalls the engine's "
                      "payload stream, which only exists when the URMA ceiling is modeled")
    if spec.shape not in SHAPES:
        raise err("shape", spec.shape, "one of " + ", ".join(map(repr, SHAPES)))
    if spec.shape == "full_mesh":
        if spec.ports_per_peer == 0:
            raise err("ports_per_rank", spec.ports_per_rank,
                      f"at least {spec.num_ranks - 1}: a full mesh of {spec.num_ranks} ranks joins "
                      f"each rank to {spec.num_ranks - 1} peers, one port or more each")
        return
    if spec.oversubscription < 1.0:
        raise err("oversubscription", spec.oversubscription,
                  "a down:up ratio >= 1.0 (1.0 = non-blocking)")
    if spec.routing not in ROUTING_POLICIES:
        raise err("routing", spec.routing, "one of " + ", ".join(map(repr, ROUTING_POLICIES)))
    p = spec.ports_per_rank
    if spec.ranks_per_leaf == 0:
        need = p + _up_ports(p, spec.oversubscription)
        raise err("leaf_radix", spec.leaf_radix,
                  f"at least {need} ports (one rank's {p} ports plus its uplink ports at "
                  f"oversubscription {spec.oversubscription})")
    if spec.num_leaves == 1:
        return                                   # one leaf switch holds every rank
    up = spec.leaf_up_ports
    if spec.num_spines < 1:
        raise err("num_spines", spec.num_spines,
                  f"at least 1: {spec.num_ranks} ranks need {spec.num_leaves} leaf switches "
                  f"({spec.ranks_per_leaf} ranks each), which are disconnected without spines")
    if spec.num_spines > up:
        raise err("num_spines", spec.num_spines,
                  f"at most {up}, the up ports of a leaf switch (every spine needs a port "
                  f"from every leaf)")
    per_spine = spec.num_leaves * math.ceil(up / spec.num_spines)
    if per_spine > spec.spine_radix:
        max_leaves = spec.spine_radix // math.ceil(up / spec.num_spines)
        raise err("num_ranks", spec.num_ranks,
                  f"at most {max_leaves * spec.ranks_per_leaf} ranks for a two-tier Clos: "
                  f"{spec.num_leaves} leaf switches need {per_spine} ports on each spine, "
                  f"but spine_radix is {spec.spine_radix}")


def supernode_from_mapping(data: dict, source: str) -> SupernodeSpec:
    """Validate the ``supernode:`` section of a topology file into a ``SupernodeSpec``.
    A ``full_mesh`` has no switches: its switch and routing keys may be left out."""
    r = Reader(data, source, "supernode")
    shape = declared_param(SupernodeSpec, "shape").read(r)
    defaults = {}
    if shape == "full_mesh":             # no switches: these keys are not read, so giving
        for key in CLOS_ONLY_KEYS:       # one would mislead
            if r.has(key):
                raise r.error(key, r.raw(key), "no such key in a full_mesh supernode (it has no "
                              "switches; the key belongs to shape: clos)")
        defaults = dict(FULL_MESH_PLACEHOLDERS)
    leaf = declared_param(SupernodeSpec, "leaf_radix").read(r, defaults.get("leaf_radix", REQUIRED))
    defaults["spine_radix"] = leaf
    values = read(SupernodeSpec, r, defaults, skip=("shape", "leaf_radix"))
    spec = SupernodeSpec(**values, leaf_radix=leaf, shape=shape, source=source)
    r.finish()
    check_shape(spec)
    return spec
