"""A rank's decode step as a program of ops on its streams, with the gaps that are not kernels.

``build_program(model, dep, gaps) -> Program`` lays out one step (``kernels.step_order``)
as ``Op`` records, each on a stream (``kernels.STREAMS``), in the order its stream runs
them, with the cross-stream edges of CR-code (``kernels.STREAM_EDGES``): a side stream's run
of kernels waits for the main-stream kernel it forks after, and the main-stream kernel that
joins it waits for its last. Op kinds:

- ``kernel``: one ``KernelCall``, preceded by a launch gap (``Gaps.launch_gap_ns``);
- ``moe``: a layer's MoE block (``kernels.MOE_BLOCK``: dispatch .. combine), timed by a MoE
  model (``simnode.decode.moe``);
- ``host``: the host's turn after each forward (one graph replay: the main model, then
  each MTP draft): read-back, draft verification, sampling (``Gaps.host_gap_ns``);
- ``metadata``: the AICPU's attention metadata, built ``Gaps.metadata_builds`` times per
  step at its start on the metadata stream (beside the embedding); the first sparse
  attention waits for it.

``Gaps`` declares the non-kernel times, each with its source or the reason for its value.
Pure data: no simulation (``simnode.decode.step`` runs a program).
"""

from __future__ import annotations

from dataclasses import dataclass

from simnode.config.params import param
from simnode.decode import kernels as K
from simnode.decode.deployment import Deployment
from simnode.decode.model import ModelSpec

KERNEL, MOE, HOST, METADATA = "kernel", "moe", "host", "metadata"


@dataclass(frozen=True)
class Gaps:
    """What a step spends outside kernels (each a line of the breakdown)."""
    launch_gap_ns: float = param(
        1900.0, "device time between two kernels of a stream: a launch + InitSocState (measured in "
                "DeepEP-Ascend's code comments; graph mode may take less: no figure is published)",
        unit="ns", min=0, origin="sourced", cite="facts ascend950 1.2, S6")
    host_gap_ns: float = param(
        0.0, "host time per graph replay (read-back, draft verification, sampling; CR-code "
             "mtp_worker): no figure is published, 0 = none until a source or a calibration "
             "gives one", unit="ns", min=0, origin="reasoned")
    metadata_ns: float = param(
        0.0, "one AICPU build of the attention metadata (CR-code generate_kernel_metadata): no "
             "figure is published, 0 = none until one is given", unit="ns", min=0, origin="reasoned")
    metadata_builds: int = param(
        4, "attention metadata builds per step (c128a, c4a, the indexer's, c1a for MTP)",
        unit="builds", min=0, origin="sourced", cite="facts v4-decode 2")


@dataclass(frozen=True)
class Op:
    """One op of a rank's step (module docstring)."""
    stream: str
    kind: str                       #: KERNEL, MOE, HOST or METADATA
    name: str                       #: the kernel's role, or the kind
    call: K.KernelCall | None       #: KERNEL: the call; MOE: the block's dispatch call
    segment: int                    #: index into ``Program.segments``
    after: tuple                    #: indices of ops of other streams it waits for


@dataclass(frozen=True)
class Program:
    """One rank's step: its ops, its segments and each stream's ops in order."""
    ops: tuple
    segments: tuple                 #: ``kernels.Segment`` per op segment, in execution order
    streams: tuple                  #: ((stream, (op index, ...)), ...) of the streams used

    def forwards(self) -> int:
        return 1 + max(s.forward for s in self.segments)


def build_program(m: ModelSpec, d: Deployment, gaps: Gaps) -> Program:
    """The step's ops (module docstring)."""
    order = K.step_order(m, d)
    ops: list[Op] = []
    meta_stream = "metadata" if d.metadata_stream else "main"
    meta = [_add(ops, Op(meta_stream, METADATA, METADATA, None, 0, ())) for _ in range(gaps.metadata_builds)]
    waiting_meta = bool(meta) and meta_stream != "main"      # on main, order alone waits
    for si, seg in enumerate(order):
        main_at: dict[str, int] = {}          # the last main op of each name in this segment
        open_runs: dict[str, int] = {}        # side stream -> its last op, not joined yet
        calls = list(seg.kernels)
        i = 0
        while i < len(calls):
            c = calls[i]
            if c.name == K.MOE_BLOCK[0]:
                names = tuple(x.name for x in calls[i:i + len(K.MOE_BLOCK)])
                if names != K.MOE_BLOCK:
                    raise ValueError(f"{seg.name}: the MoE block is {names}, expected {K.MOE_BLOCK}")
                main_at[c.name] = _add(ops, Op("main", MOE, MOE, c, si, ()))
                i += len(K.MOE_BLOCK)
                continue
            after: list[int] = []
            if c.stream != "main":
                if c.stream not in open_runs:
                    fork = K.STREAM_EDGES[c.stream][0]
                    if fork not in main_at:
                        raise ValueError(f"{seg.name}: {c.name} on stream {c.stream} forks after "
                                         f"{fork}, which does not come before it")
                    after.append(main_at[fork])
                open_runs[c.stream] = _add(ops, Op(c.stream, KERNEL, c.name, c, si, tuple(after)))
            else:
                for s in [s for s, (_, join) in K.STREAM_EDGES.items() if join == c.name and s in open_runs]:
                    after.append(open_runs.pop(s))
                if c.op == "sparse_attn" and waiting_meta:
                    after.append(meta[-1])
                    waiting_meta = False
                main_at[c.name] = _add(ops, Op("main", KERNEL, c.name, c, si, tuple(after)))
            i += 1
        if open_runs:
            raise ValueError(f"{seg.name}: no kernel joins stream(s) {sorted(open_runs)}")
        if si + 1 == len(order) or order[si + 1].forward != seg.forward:
            _add(ops, Op("main", HOST, HOST, None, si, ()))
    streams = tuple((s, tuple(i for i, op in enumerate(ops) if op.stream == s))
                    for s in K.STREAMS if any(op.stream == s for op in ops))
    return Program(tuple(ops), tuple(order), streams)


def _add(ops: list, op: Op) -> int:
    ops.append(op)
    return len(ops) - 1


def stream_cores(d: Deployment, stream: str, call: K.KernelCall, aiv_per_core: int) -> int:
    """AI cores a stream's kernel may use (0 = all): the shared expert's core split, by the
    kind of core the kernel needs (a cube kernel by AICs, a vector kernel by AIVs)."""
    if stream != "shared":
        return 0
    if call.flops:
        return d.shared_expert_aic
    return max(1, d.shared_expert_aiv // aiv_per_core) if d.shared_expert_aiv else 0
