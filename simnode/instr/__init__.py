"""The instruction layer, below both the hardware that runs instructions and the kernels
(hand-written generators, tile programs) that emit them.

- ``isa``: the instruction records of an AI-core schedule (copies, MMADs, vector work,
  flags), the units and pipes, and how results name the pipes.
- ``schedule``: the schedule container (per-core programs of per-pipe instruction lists,
  buffer plans) and its checks and listing.
"""
