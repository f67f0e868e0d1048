"""The EP family's parameters, declared once, and what is read from them: the routes.

Every kind that runs EP kernels composes these declarations (``simnode.config.params.Param``)
instead of writing its own, so one field has one type, unit, range, default and doc
wherever it appears (the deepep and deepep_hccs kinds, moe_layer; transport takes
``NUM_RANKS`` and ``BATCH_WINDOW_NS``):

- ``SHAPE``: num_ranks, tokens_per_rank, hidden, top_k, num_experts;
- ``ROUTING``: the policy and its parameters, the routing file, the seed;
- ``PHASE``, ``DISPATCH_DTYPE``, ``COMBINE_DTYPE``, ``BATCH_WINDOW_NS``;
- ``EPCosts``: the costs every member's kernels have (a launch, a round of remote stores,
  the vector work of a reduction), which a member's costs extend;
- ``AivWindowCosts``: those of the members whose AIVs quantize rows and read or write other
  dies' memory windows themselves (``simnode.ep.aiv``: the A3's normal and low-latency
  kernels over HCCS, the 950's low-latency kernels over UB memory semantics): the INT8
  quantization, a remote access's costs beyond its path, and the what-ifs of a peer-context
  cache or a per-peer cost. One path, one set of constants: a calibration of them (a
  ``remote_write_ns`` fitted on the normal kernels) holds for every member that uses them.

Defaults are the 950 DeepEP's published case (facts 2.4, S5); a member's preset file states
its own (workloads/deepep-a3-normal.yaml: 4096 tokens, top-8, INT8). A member that moves
only some of ``DISPATCH_DTYPES`` refuses the others in its size check.

``costs_from(cls, params)`` builds a member's costs; ``check_dtype`` refuses a dispatch
dtype the member does not move. ``routes(params, num_ranks)`` gives each rank's [tokens,
top_k] expert ids (a routing file's arrays, or generated rank by rank);
``check_routing(params, num_ranks, source)`` runs every routing argument check before any
work, naming the workload in its errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.params import Param, param, params_of
from simnode.ep.routing import POLICIES, iter_route_supernode, load_routing_file
from simnode.errors import ConfigError

#: the largest flow-solver batching window: a window delays each completion by up to its
#: length, so beyond 100 us (~5% of an EP8 kernel's 1.5-3 ms) a result is off by more than
#: the model's own error; 1e12 would stretch a run 460,000-fold
MAX_BATCH_WINDOW_NS = 100_000.0
#: payload dtypes a dispatch may move: FP8 (the 950's normal kernels), INT8 (the A3's,
#: which has no FP8), BF16 (unquantized), MXFP8 / MXFP4 (the 950 generation's low-latency
#: kernels: an E8M0 scale per 32 elements); each 8- or 4-bit one with its scales
DISPATCH_DTYPES = ("fp8", "int8", "bf16", "mxfp8", "mxfp4")

NUM_RANKS = Param.flat("num_ranks", "int", 0, "ranks, one per chip or die (0 = the topology's "
                       "supernode.num_ranks)", min_value=0, unit="ranks")
TOKENS_PER_RANK = Param.flat("tokens_per_rank", "int", 16384, "tokens each rank dispatches",
                             min_value=1, unit="tokens")
#: 9x DeepSeek-V3's 7168 and 4x the widest published dense model's 16384 (Llama 3 405B)
HIDDEN = Param.flat("hidden", "int", 7168, "hidden size", min_value=128, max_value=65536,
                    unit="elements")
TOP_K = Param.flat("top_k", "int", 6, "experts per token", min_value=1, unit="experts")
NUM_EXPERTS = Param.flat("num_experts", "int", 256, "routed experts, on the ranks in equal "
                         "contiguous blocks", min_value=1, unit="experts")
SHAPE = (NUM_RANKS, TOKENS_PER_RANK, HIDDEN, TOP_K, NUM_EXPERTS)

DISPATCH_DTYPE = Param.flat("dispatch_dtype", "str", "fp8", "dispatch payload dtype: FP8 (the "
                            "950, facts 2.4) or INT8 (the A3) rows with their scales, BF16 rows, "
                            "or MXFP8 / MXFP4 rows (the 950's low-latency kernels)", DISPATCH_DTYPES)
COMBINE_DTYPE = Param.flat("combine_dtype", "str", "bf16", "combine payload dtype (facts 2.4: "
                           "BF16)", ("bf16",))
PHASE = Param.flat("phase", "str", "both", "which kernels to run", ("both", "dispatch", "combine"))

ROUTING = (
    Param.flat("routing", "str", "uniform", "routing policy", tuple(POLICIES) + ("file",)),
    Param.flat("zipf_exponent", "number", 1.0, "zipf routing exponent", min_value=0, unit="1"),
    Param.flat("hot_experts", "int", 4, "hot routing: experts 0..N-1 are hot", min_value=1,
               unit="experts"),
    Param.flat("hot_share", "number", 0.25, "hot routing: share of all picks to hot experts",
               min_value=0, max_value=1, unit="fraction"),
    Param.flat("routing_file", "str", "", "routing trace (.npy or .npz) when routing = file"),
    Param.flat("seed", "int", 0, "routing seed (and any seeded jitter of the kernels)",
               min_value=0, unit="1"),
)
BATCH_WINDOW_NS = Param.flat("batch_window_ns", "number", 2000.0, "flow solver batching "
                             "window: completions this close are solved together (0 = exact)",
                             min_value=0, max_value=MAX_BATCH_WINDOW_NS)


@dataclass(frozen=True)
class EPCosts:
    """Costs of every member's kernels, in ns (its kind's fields; the workload file states
    where each value comes from)."""
    kernel_launch_ns: float = param(doc="one kernel launch (on the 950 with InitSocState, "
                                    "facts 1.2, S6)", min=0, origin="")
    remote_store_ns: float = param(doc="one round of small remote stores or atomics (flags, "
                                   "counts)", min=0, origin="")
    reduce_ops_per_element: float = param(doc="vector ops per element of each row a reduction "
                                          "sums (cast, weight, add)", min=0, unit="ops/element",
                                          origin="")


@dataclass(frozen=True)
class AivWindowCosts(EPCosts):
    """Costs of kernels whose AIVs quantize rows and access other dies' memory windows
    themselves, in ns (see the module docstring): the same path's constants for every such
    member. A kernel that only writes leaves the read costs unused."""
    quant_ops_per_element: float = param(doc="vector ops per element to quantize a row to INT8 "
                                         "(per-token, FP32 scale)", min=0, unit="ops/element",
                                         origin="")
    remote_read_ns: float = param(doc="a remote MTE2 read's cost beyond the path's round trip and "
                                  "its bytes", min=0, origin="")
    remote_write_ns: float = param(doc="a remote MTE3 write's cost (with its PIPE_ALL wait) beyond "
                                   "the round trip and its bytes", min=0, origin="")
    remote_read_GBps: float = param(0.0, "what one die serves of other dies' reads of its memory, "
                                    "all readers together (0 = no limit beyond its links)", min=0)
    peer_cache_entries: int = param(0, "what-if: peer contexts at hand", min=0, unit="entries")
    read_miss_ns: float = param(0.0, "what-if: extra per remote read whose peer is not cached",
                                min=0)
    write_miss_ns: float = param(0.0, "what-if: extra per remote write whose peer is not cached",
                                 min=0)
    read_ns_per_peer: float = param(0.0, "what-if: extra per remote read per peer accessed", min=0)
    write_ns_per_peer: float = param(0.0, "what-if: extra per remote write per peer accessed",
                                     min=0)

    def miss_fraction(self, peers: int) -> float:
        """Share of accesses whose peer misses a cache of ``peer_cache_entries`` when a rank
        accesses ``peers`` peers in an interleaved order (C / P hit whatever the policy)."""
        if peers <= 0 or (self.read_miss_ns <= 0 and self.write_miss_ns <= 0):
            return 0.0
        return max(0.0, 1.0 - self.peer_cache_entries / peers)

    def stall_ns(self, peers: int, write: bool) -> float:
        """What-if extra per remote access of a rank accessing ``peers`` peers (0 when off)."""
        miss, per = (self.write_miss_ns, self.write_ns_per_peer) if write else \
            (self.read_miss_ns, self.read_ns_per_peer)
        return self.miss_fraction(peers) * miss + max(peers, 0) * per


def costs_from(cls, params: dict):
    """A member's costs (``EPCosts`` or a subclass) from a kind's values."""
    return cls(**{p.name: params[p.name] for p in params_of(cls)})


def check_dtype(params: dict, supported: tuple, source: str, why: str) -> None:
    """Refuse a ``dispatch_dtype`` of the family that a member's kernels do not move."""
    if params["dispatch_dtype"] not in supported:
        raise ConfigError(source, "dispatch_dtype", params["dispatch_dtype"],
                          f"one of {', '.join(supported)} ({why})")


def routes(params: dict, num_ranks: int):
    """Each rank's [tokens, top_k] expert ids, in rank order: the routing file's arrays, or
    generated one rank at a time (an iterator, consumed once by a plan builder)."""
    args = (params["tokens_per_rank"], params["num_experts"], params["top_k"], num_ranks)
    policy = params["routing"]
    if policy == "file":
        if not params["routing_file"]:
            raise ConfigError("workload", "routing_file", "", "a .npy/.npz path when routing = file")
        return iter(load_routing_file(params["routing_file"], *args))
    extra = {}
    if policy == "zipf":
        extra = {"zipf_exponent": params["zipf_exponent"]}
    elif policy == "hot":
        extra = {"hot_experts": list(range(params["hot_experts"])), "hot_share": params["hot_share"]}
    return iter_route_supernode(*args, policy=policy, seed=params["seed"], **extra)


def check_routing(params: dict, num_ranks: int, source: str) -> None:
    """The routing arguments, checked before any work with the workload named in errors:
    the routing functions name no file, so their errors are re-raised under ``source``."""
    policy, k, e = params["routing"], params["top_k"], params["num_experts"]
    if params["routing_file"] and policy != "file":
        raise ConfigError(source, "routing_file", params["routing_file"],
                          f"'' unless routing = file (routing is '{policy}', so the file would "
                          f"be ignored): add --set routing=file")
    if policy == "file":
        if not params["routing_file"]:
            raise ConfigError(source, "routing_file", "", "a .npy/.npz path when routing = file")
        return
    if policy == "hot" and params["hot_experts"] > e - k:
        raise ConfigError(source, "hot_experts", params["hot_experts"],
                          f"at most num_experts - top_k = {e - k} hot experts, so that a token can "
                          f"pick {k} experts that are not hot")
    try:                     # a few tokens of the first rank run every argument check
        next(routes({**params, "tokens_per_rank": min(4, params["tokens_per_rank"])}, num_ranks),
             None)
    except ConfigError as exc:
        if exc.source != "routing":
            raise
        raise ConfigError(source, exc.key_path, exc.value, exc.expected, exc.hint) from None
