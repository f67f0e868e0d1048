"""Chakra execution traces (MLCommons Chakra ET, the workload format of ASTRA-sim) in and out.

``etfile``: one rank's ``.et`` file read into plain ``ETNode`` records and written from them,
through the mlc-chakra package's own schema and framing (an optional dependency:
``pip install 'simnode[chakra]'``). ``export``: a simnode run's per-rank spans as ET graphs
(compute nodes with simnode's durations, dispatch and combine as all-to-alls with per-peer
bytes, the schedule's dependencies). ``replay``: a directory of ET files run on a supernode's
network, the body of the ``chakra`` workload kind. See docs/chakra.md.
"""
