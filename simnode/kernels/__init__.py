"""Kernel schedules: the generators that build them.

The instruction records they are made of live a layer below (``simnode.instr``). A family
of kernels is a package whose ``__init__`` is its generator and whose modules are its parts:
``gemm`` the tiled GEMM after DeepGEMM-Ascend (``gemm.core``: the tile rules and one core's
program, which the grouped GEMM shares), ``sparse_mla`` FlashMLA's sparse attention
(``core`` one core's program, ``plan`` its buffers, ``vf`` the AIVs' vector functions). A
kernel of one module is a module: ``topk`` DeepSelect, ``grouped_gemm`` and ``swiglu`` the
MoE expert kernels. Generators are pure functions: no SimPy.
"""

import functools
import gc

from simnode.config.params import param


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


def unchosen(p, **allowed) -> str | None:
    """The first field of ``p`` whose value is not among its ``allowed`` names, as a message
    ("layout 'x': expected one of contiguous, masked."), or None when every one is."""
    for name, names in allowed.items():
        value = getattr(p, name)
        if value not in names:
            return f"{name} '{value}': expected one of {', '.join(names)}."
    return None


def num_cores_param():
    """The ``num_cores`` field of a chip kernel's parameters, declared once for every kernel
    that runs on a share of the chip's AI cores."""
    return param(0, "AI cores used (0 = all)", unit="cores", min=0)
