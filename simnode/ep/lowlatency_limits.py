"""What the published low-latency API accepts: its limits, checked before any work.

``Limits`` holds one API's bounds (``API_LIMITS``: sgl-kernel-npu's
``Buffer.low_latency_dispatch``; ``A3_OP_LIMITS``: the A3 operator's own tiling, 1024
experts, INT8 or BF16 rows); ``check_limits(shape, limits, hbm_capacity_bytes, source)``
raises a ``ConfigError`` naming the workload, the field, the value and the limit's owner for
a call the API refuses, or whose window (``LLShape.window``) does not fit the rank's HBM.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.ep.lowlatency_plan import DISPATCH_DTYPES, STATE_WINDOW_BYTES, LLShape
from simnode.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    """What the published API accepts; ``name`` says whose limits they are."""
    name: str
    max_tokens_per_rank: int = 512      #: tiling BS_UPPER_BOUND; LOW_LATENCY_API.md num_tokens <= 512
    max_top_k: int = 16                 #: tiling K_MAX; the API's (0, 16]
    max_experts: int = 512              #: the API's num_experts (0, 512]
    min_ranks: int = 2                  #: tiling MIN_EP_WORLD_SIZE
    max_ranks: int = 768                #: tiling MAX_EP_WORLD_SIZE (384 x 2 dies)
    min_hidden: int = 1024              #: tiling H_MIN
    max_hidden: int = 8192              #: tiling H_MAX
    dtypes: tuple = DISPATCH_DTYPES


#: sgl-kernel-npu's Buffer.low_latency_dispatch (python/deep_ep/doc/LOW_LATENCY_API.md)
API_LIMITS = Limits("the DeepEP-Ascend low-latency API (sgl-kernel-npu LOW_LATENCY_API.md)")
#: the A3 operator itself (tiling MOE_EXPERT_MAX_NUM 1024; facts v4-decode 3, OPT); INT8 or
#: BF16 rows only (the MX formats are A5-only: deep_ep.cpp is_a5_only_quant)
A3_OP_LIMITS = Limits("MoeDistributeDispatchV2 on Atlas A3 (its tiling)", max_experts=1024,
                      dtypes=("int8", "bf16"))


def check_limits(shape: LLShape, limits: Limits, hbm_capacity_bytes: float | None = None,
                 source: str = "workload") -> None:
    """Raise ``ConfigError`` (naming ``source`` and the field) for a call the API refuses, or
    whose window does not fit the rank's HBM."""
    s, lim = shape, limits
    who = f"({lim.name})"
    if not lim.min_ranks <= s.num_ranks <= lim.max_ranks:
        raise ConfigError(source, "num_ranks", s.num_ranks,
                          f"an EP size in {lim.min_ranks}..{lim.max_ranks} {who}")
    if not 0 <= s.tokens_per_rank <= lim.max_tokens_per_rank:
        raise ConfigError(source, "tokens_per_rank", s.tokens_per_rank,
                          f"0..{lim.max_tokens_per_rank} tokens per rank {who}")
    if s.max_tokens_per_rank < max(s.tokens_per_rank, 1):
        raise ConfigError(source, "max_tokens_per_rank", s.max_tokens_per_rank,
                          f"at least tokens_per_rank ({s.tokens_per_rank}): the window holds "
                          f"that many tokens per source")
    if not 1 <= s.top_k <= min(lim.max_top_k, s.num_experts):
        raise ConfigError(source, "top_k", s.top_k,
                          f"1..{min(lim.max_top_k, s.num_experts)} experts per token {who}")
    if not 1 <= s.num_experts <= lim.max_experts:
        raise ConfigError(source, "num_experts", s.num_experts, f"1..{lim.max_experts} experts {who}")
    if s.num_experts % s.num_ranks:
        raise ConfigError(source, "num_experts", s.num_experts,
                          f"a multiple of num_ranks ({s.num_ranks}): each rank holds an equal block")
    if not lim.min_hidden <= s.hidden <= lim.max_hidden:
        raise ConfigError(source, "hidden", s.hidden, f"{lim.min_hidden}..{lim.max_hidden} {who}")
    if s.dispatch_dtype not in lim.dtypes:
        raise ConfigError(source, "dispatch_dtype", s.dispatch_dtype,
                          f"one of {', '.join(lim.dtypes)} {who}")
    if s.num_aiv < 1:
        raise ConfigError(source, "num_aiv", s.num_aiv, "at least one AIV")
    if hbm_capacity_bytes is not None:
        need = s.window().total
        if need > hbm_capacity_bytes:
            raise ConfigError(source, "max_tokens_per_rank", s.max_tokens_per_rank,
                              f"a window that fits the rank's HBM: two halves of {s.window().half:,} B "
                              f"+ {STATE_WINDOW_BYTES:,} B of state = {need:,} B, over its "
                              f"{int(hbm_capacity_bytes):,} B",
                              "Fewer tokens per rank, experts or a smaller hidden size shrink it.")
