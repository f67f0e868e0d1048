"""Kernel schedules: the generators that build them.

The instruction records they are made of live a layer below (``simnode.instr``); here,
``gemm`` is the tiled GEMM generator after DeepGEMM-Ascend (``gemm_core`` its tile rules),
``sparse_mla`` FlashMLA's sparse attention, ``topk`` DeepSelect, ``grouped_gemm`` and
``swiglu`` the MoE expert kernels. Generators are pure functions: no SimPy.
"""

import functools
import gc


def builds_records(fn):
    """Run a generator with the cyclic GC off: it allocates up to millions of records and
    tuples without reference cycles, which the collector would otherwise traverse again and
    again as they pile up (3 s of a 4096-query sparse MLA prefill's build)."""
    @functools.wraps(fn)
    def build(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()
    return build
