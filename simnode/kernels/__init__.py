"""Kernel schedules: the generators that build them.

The instruction records they are made of live a layer below (``simnode.instr``); here,
``gemm`` is the tiled GEMM generator after DeepGEMM-Ascend (``gemm_core`` its tile rules),
``sparse_mla`` FlashMLA's sparse attention, ``topk`` DeepSelect, ``grouped_gemm`` and
``swiglu`` the MoE expert kernels. Generators are pure functions: no SimPy.
"""
