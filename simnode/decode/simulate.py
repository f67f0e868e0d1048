"""A decode step from its description to its breakdown: the one entry point of the package.

``StepSpec`` is what a run asks for: the model, the deployment, the gaps, the routing, the
MoE model and its costs. ``check(spec, topology)`` refuses what cannot run before any work
(the HBM footprint above all: ``memory.check_fits`` names what does not fit and the largest
batch that would); ``simulate(spec, topology) -> StepOutcome`` builds the step's program
(``program``), times each distinct (kernel, shape, cores) once (``timing.profile``), runs
the MoE block once per routing with its model (``moe.MOE_MODELS``: the hash-routed layers
once more unless forced EPLB routes every layer alike), replays everything on one clock (``step.run_step``) and reads the
breakdown (``breakdown``). ``phase`` is ``decode``; prefill will share the model, the
deployment and the layer description (``kernels``) with its own program.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simnode.decode import breakdown as B
from simnode.decode import memory, moe as M, program as P, step as S, timing as T
from simnode.decode.deployment import Deployment
from simnode.decode.model import ModelSpec
from simnode.errors import ConfigError

PHASES = ("decode",)


@dataclass(frozen=True)
class StepSpec:
    """What one decode-step run asks for (module docstring)."""
    model: ModelSpec
    deployment: Deployment
    gaps: P.Gaps
    routing: dict                    #: ``forced_eplb`` and the EP family's routing fields
    moe_model: str                   #: a key of ``moe.MOE_MODELS``
    moe_costs: object                #: the MoE model's costs (``moe.MoeCosts``)
    batch_window_ns: float
    phase: str = "decode"


@dataclass(frozen=True)
class StepOutcome:
    run: S.StepRun
    breakdown: B.Breakdown
    footprint: memory.Footprint
    distinct_kernels: int            #: profiles timed for this step


def truncated(m: ModelSpec, num_layers: int) -> ModelSpec:
    """The model's first ``num_layers`` decoder layers (0 = all of them)."""
    if not num_layers or num_layers >= m.num_layers:
        return m
    return replace(m, num_layers=num_layers, compress_ratios=m.compress_ratios[:num_layers],
                   hash_layers=min(m.hash_layers, num_layers))


def check(spec: StepSpec, topology, source: str = "workload") -> memory.Footprint:
    """Refuse a step that cannot run (module docstring); its HBM footprint otherwise."""
    d = spec.deployment
    if spec.phase not in PHASES:
        raise ConfigError(source, "inference_phase", spec.phase, "one of " + ", ".join(PHASES))
    for key, n in (("attn_dp", d.attn_dp), ("moe_ep", d.moe_ep)):
        if n != d.chips:
            raise ConfigError(source, key, n, f"{d.chips} (= chips): attention and MoE tensor "
                              f"parallelism are not modeled yet")
    if spec.moe_model not in M.MOE_MODELS:
        raise ConfigError(source, "moe_model", spec.moe_model, "one of " + ", ".join(M.MOE_MODELS))
    return memory.check_fits(spec.model, d, topology.chip, source)


def simulate(spec: StepSpec, topology) -> StepOutcome:
    """The step on every rank of ``topology`` (its supernode has ``chips`` ranks)."""
    fp = check(spec, topology)
    m, d, chip = spec.model, spec.deployment, topology.chip
    prog = P.build_program(m, d, spec.gaps)
    keyed = {i: (op.call, P.stream_cores(d, op.stream, op.call, chip.aiv_per_core))
             for i, op in enumerate(prog.ops) if op.kind == P.KERNEL}
    timed: dict = {}
    for call, cores in keyed.values():
        if (call.key, cores) not in timed:
            timed[(call.key, cores)] = T.profile(chip, call, cores)
    profiles = {i: timed[(call.key, cores)] for i, (call, cores) in keyed.items()}
    model = M.MOE_MODELS[spec.moe_model]
    hashed_ops = {i for i, op in enumerate(prog.ops) if op.kind == P.MOE and M.hash_routed(prog.segments[op.segment])}
    blocks = {False: model(topology, m, d, M.routes_for(m, d, spec.routing), spec.moe_costs,
                           spec.batch_window_ns)}
    if hashed_ops and M.hash_differs(spec.routing):
        blocks[True] = model(topology, m, d, M.routes_for(m, d, spec.routing, hashed=True), spec.moe_costs,
                             spec.batch_window_ns)
    moes = {i: blocks.get(i in hashed_ops, blocks[False]) for i, op in enumerate(prog.ops) if op.kind == P.MOE}
    run = S.run_step(chip, prog, profiles, moes, spec.gaps)
    return StepOutcome(run, B.breakdown(run, chip), fp, len(timed))
