"""Hardware models: the AI-core pipes and the chip's shared memory system.

``memory.L2Cache`` decides L2 hit or miss; ``chip.ChipSim`` runs a kernel schedule
on a chip: one SimPy process per (core, unit, pipe), flags between them, GM
traffic through L2/HBM bandwidth shared with ``engine.share``. ``pipes``: a pipe's
program (its instructions as ops) and state; ``bursts``: back-to-back GM reads as one
transfer; ``lockstep``: a lock-step group of cores run as one representative.
"""
