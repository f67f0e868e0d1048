"""The pipeline blocks of a sparse MLA call and the per-core programs made from them.

What every entry point of the family shares (FlashMLA's prefill and decode in the package
``__init__``, V4's decode op in ``v4``): a work item (one query x one block of heads) walks
its caches in ``Block`` steps of up to ``b_topk`` tokens (``cache_blocks``); ``drain_flags``
says before which blocks O leaves L0C; ``programs`` turns each core's blocks into its
``CoreProgram`` (``core.core_program``, every core's KV gathers made at once by
``gathers.gather_chunks``). Pure functions: no SimPy.
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.instr.schedule import CoreProgram
from simnode.kernels.sparse_mla import core
from simnode.kernels.sparse_mla.gathers import gather_chunks
from simnode.kernels.sparse_mla.plan import INDEX_BLOCK_TOKENS, Plan, buffer_plan


@dataclass(frozen=True)
class Block:
    """One pipeline step of one item: up to b_topk tokens of one cache."""
    item: int                            #: item index (query x head block)
    first: bool                          #: first block of its item
    cache: str                           #: "kv", "main" or "extra"
    seq: int                             #: sequence (decode batch entry; 0 in prefill)
    dtype: str
    tokens: tuple                        #: selected token ids
    index_group: int                     #: which 640-index group of (item, cache) it starts, or -1
    #: (k, n): its KV conversion is split over n cores and this core does the k-th share
    #: (V4's op, 128 heads on a core pair: ``gathers.chunk_spans``); (0, 1) otherwise
    share: tuple


def cache_blocks(b_topk: int, item: int, seq: int, caches: list, share: tuple = (0, 1)
                 ) -> list[Block]:
    """An item's blocks: ``caches`` in order, each (name, token ids, dtype, read through an
    index list): ``b_topk`` tokens a block; an indexed cache's block that starts a group of
    640 indices (facts 3.4, INDEX_BLOCK_SIZE) fetches that group; ``share``: ``Block.share``."""
    blocks = []
    for name, toks, dt, indexed in caches:
        for b0 in range(0, len(toks), b_topk):
            group = b0 // INDEX_BLOCK_TOKENS if indexed and b0 % INDEX_BLOCK_TOKENS < b_topk else -1
            blocks.append(Block(item, not blocks, name, seq, dt, tuple(toks[b0:b0 + b_topk]), group,
                                share))
    return blocks


def drain_flags(p, blocks: list[Block]) -> list[bool]:
    """Per block: must O be drained from L0C before O += S*V of this block?

    An item's first block drains the previous item's finished O; a later block drains for
    an O rescale: always with skip-scale off, else for ``rescale_share`` of them, spread
    evenly (error diffusion, deterministic)."""
    out, acc = [], 0.0
    for i, b in enumerate(blocks):
        if b.first:
            out.append(i > 0)
            continue
        if p.skip_scale_threshold == 0:
            out.append(True)
            continue
        acc += p.rescale_share
        out.append(acc >= 1.0 - 1e-9)
        if out[-1]:
            acc -= 1.0
    return out


def programs(chip, p, plan: Plan, per_core: list, hint: str,
             contiguous: frozenset = frozenset()) -> tuple[list, dict]:
    """(the ``CoreProgram`` of every core with blocks, {block count: the cores with as
    many}); ``per_core``: each core's blocks; ``hint``: the KV gathers' L2 hint;
    ``contiguous``: caches read a run of rows per request (``gathers.gather_chunks``)."""
    chunks = gather_chunks(p, plan, per_core, hint, contiguous)   # every core's gathers at once
    cores = []
    shapes: dict = {}
    for c, blocks in enumerate(per_core):
        if not blocks:
            continue
        prog = CoreProgram(c)
        core.core_program(prog, chip, p, plan, blocks, drain_flags(p, blocks), hint, chunks[c])
        prog.buffers = buffer_plan(p, plan)
        cores.append(prog)
        shapes.setdefault(len(blocks), []).append(c)
    return cores, shapes
