"""Kernel schedules: instruction records and the generators that build them.

``isa`` defines the instruction records, ``schedule`` the per-core, per-pipe
program container with its buffer plan and capacity check, ``gemm`` the tiled
GEMM generator after DeepGEMM-Ascend. Generators are pure functions: no SimPy.
"""
