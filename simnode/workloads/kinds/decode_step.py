"""Workload kind ``decode_step``: one decode step of a DeepSeek-V4 model on N chips, one clock.

The model is a preset (``simnode.decode.model``), the deployment its fields
(``simnode.decode.deployment.Deployment``: chips, DP / EP, streams and their cores,
quantization, batch, context, MTP), the non-kernel gaps theirs (``simnode.decode.program
.Gaps``), the MoE block a MoE model's (``moe_model``: ``decode_layer``, the decode MoE layer
with the EP family's low-latency kernels, or ``layer_sim``, the normal one; both take the EP
family's routing and the members' costs, declared by the family). The run (``simnode.decode.simulate``) checks the HBM footprint
first, times each distinct kernel once, and replays every rank's streams on one clock.

Result (``simnode.report.result``): ``step_us`` (the makespan), ``tpot_ms`` (step / (1 +
accepted)), ``tokens_per_s_per_chip``, ``hbm_capacity_frac``; the slowest rank's critical
path split into lines (``critical_us``: kernels, communication, imbalance wait, launch and
host gaps, waits for side streams), ``exposed_comm_us``, ``non_kernel_us``; ``layer_us``
(each segment's count, mean and max: a layer of each type, the head, an MTP draft);
``model_us`` (kernel time by how it is modeled: pipe-level, proxy, roofline, flow-level)
and ``moe_note`` (what the MoE model is). One kernel record per kernel of the step
(role and shape): its time on the clock over the step, its roofline, its bottleneck and
figures (launches, mean_us, alone_us, share_of_step_frac, stream, model, shape).
"""

from __future__ import annotations

from simnode import units
from simnode.config.params import params_of
from simnode.decode import simulate as SIM
from simnode.decode.deployment import Deployment, load_deployment
from simnode.decode.model import PRESETS, preset
from simnode.decode.moe import MOE_MODELS, MoeCosts
from simnode.decode.program import Gaps
from simnode.ep import fields
from simnode.ep.deepep import DeepEPCosts
from simnode.ep.size import with_num_ranks
from simnode.errors import ConfigError
from simnode.moe import comm
from simnode.report.result import KernelRecord, Result, fig
from simnode.workloads.registry import Field, WorkloadKind

FIELDS = (
    Field("model", "str", "v4-flash", "the model: a preset of simnode.decode.model", tuple(PRESETS)),
    Field("num_layers", "int", 0, "decoder layers run: the model's first N (0 = all)", min_value=0,
          unit="layers"),
    Field("inference_phase", "str", "decode", "which phase of inference a step is", SIM.PHASES),
    *params_of(Deployment), *params_of(Gaps),
    Field("moe_model", "str", "decode_layer", "the model of each layer's MoE block (simnode.decode.moe): "
          "decode_layer (low-latency dispatch / combine, as the published decode) or layer_sim "
          "(normal DeepEP)", tuple(MOE_MODELS)),
    Field("forced_eplb", "bool", True, "route by forced EPLB, a round-robin, perfectly balanced "
          "top-k (facts v4-decode 2: the published benchmarks); false: the routing policy below"),
    *fields.ROUTING, fields.BATCH_WINDOW_NS, *params_of(DeepEPCosts), *comm.ll_fields(params_of(DeepEPCosts)),
)
#: TPOT service-level objectives a sweep's trade-off plot is read against (issue-stated
#: serving targets: interactive 10 ms, standard 20 ms, batch 50 ms)
TPOT_SLOS_MS = (10.0, 20.0, 50.0)
_ROUTING = ("forced_eplb",) + tuple(f.name for f in fields.ROUTING)


def spec_of(params: dict, source: str = "workload") -> SIM.StepSpec:
    """The run's ``StepSpec`` from the kind's values (model, deployment and gaps checked)."""
    model = SIM.truncated(preset(params["model"]), params["num_layers"])
    dep = load_deployment({p.name: params[p.name] for p in params_of(Deployment)}, model, source)
    gaps = Gaps(**{p.name: params[p.name] for p in params_of(Gaps)})
    costs = MoeCosts(fields.costs_from(DeepEPCosts, params), comm.ll_costs(params))
    return SIM.StepSpec(model, dep, gaps, {k: params[k] for k in _ROUTING}, params["moe_model"],
                        costs, params["batch_window_ns"], params["inference_phase"])


def check(topology, params: dict, source: str = "workload"):
    """The topology at ``chips`` ranks; the step refused before any work if it cannot run."""
    spec = spec_of(params, source)
    topology = with_num_ranks(topology, spec.deployment.chips, "decode_step", source)
    SIM.check(spec, topology, source)
    if spec.moe_model == "decode_layer":
        _check_low_latency(topology, spec, source)
    if not params["forced_eplb"]:
        d = spec.deployment
        fields.check_routing({**params, "tokens_per_rank": d.tokens_per_chip,
                              "num_experts": spec.model.num_experts, "top_k": spec.model.top_k},
                             d.moe_ep, source)
    return topology


def _check_low_latency(topology, spec: SIM.StepSpec, source: str) -> None:
    """The low-latency API's limits (``comm.check_limits``) for the step's MoE block, named in
    the deployment's terms: a chip's query tokens are the rank's tokens."""
    d, m = spec.deployment, spec.model
    try:
        comm.check_limits(with_num_ranks(topology, d.moe_ep, "decode_step", source),
                          {"tokens_per_rank": d.tokens_per_chip, "hidden": m.hidden, "top_k": m.top_k,
                           "num_experts": m.num_experts},
                          topology.chip.num_ai_cores * topology.chip.aiv_per_core, source)
    except ConfigError as e:
        if e.key_path != "tokens_per_rank":
            raise
        largest = comm.API_LIMITS.max_tokens_per_rank // d.query_tokens * d.attn_dp
        raise ConfigError(source, "global_batch", d.global_batch,
                          f"a batch whose query tokens per chip ({d.batch_per_chip} sequences x "
                          f"{d.query_tokens} = {d.tokens_per_chip}) the low-latency dispatch takes: "
                          f"{e.expected}", f"The largest global batch is {largest}.") from None


def simulate(topology, params: dict) -> tuple:
    """(spec, ``simnode.decode.simulate.StepOutcome``): the step, before its result."""
    topology = check(topology, params)
    spec = spec_of(params)
    return spec, SIM.simulate(spec, topology)


def run(topology, params: dict, options=None, name: str = "decode_step"):
    spec, out = simulate(topology, params)
    if options is not None and getattr(options, "trace_path", None):
        from simnode.decode.trace import write_trace
        write_trace(options.trace_path, options.trace_scopes, out.run)
    return _result(name, spec, out, params["seed"])


def _us(ns: float) -> float:
    return units.ns_to_us(ns)


def _result(name: str, spec: SIM.StepSpec, out: SIM.StepOutcome, seed: int) -> Result:
    d, b, fp = spec.deployment, out.breakdown, out.footprint
    step = b.step_ns
    tpot_ns = step / (1 + d.accepted_tokens)
    crit = b.critical
    non_kernel = sum(v for k, v in crit.items() if k in ("launch_gaps", "host_gaps", "wait_metadata"))
    comm = crit["communication"] + crit["imbalance_wait"]
    busy = sum(b.by_model.values())
    top = b.kernels[0]
    header = [
        fig("step_us", _us(step), doc="one decode step: the slowest rank's end", headline=True),
        fig("tpot_ms", tpot_ns / units.NS_PER_MS, "ms", "time per output token: step / (1 + accepted)",
            headline=True, against="tokens_per_s_per_chip", limits=TPOT_SLOS_MS),
        fig("tokens_per_s_per_chip", d.batch_per_chip / (tpot_ns / units.NS_PER_S), "tokens/s",
            "batch per chip / TPOT", headline=True),
        fig("hbm_capacity_frac", fp.capacity_frac, doc="HBM footprint per chip / capacity", headline=True),
        fig("hbm_footprint_GB", {k: v / units.BYTES_PER_GB for k, v in fp.parts}, "GB",
            "HBM bytes per chip by part (simnode.decode.memory)"),
        fig("tokens_per_chip", d.tokens_per_chip, "tokens", "M: query tokens per chip per forward", digits=0),
        fig("forwards", 1 + d.next_n, "forwards", "graph replays per step: the main model and each MTP draft",
            digits=0),
        fig("critical_us", {k: _us(v) for k, v in crit.items()}, "us",
            "the slowest rank's main stream, split (simnode.decode.breakdown)"),
        fig("exposed_comm_us", _us(comm), doc="dispatch and combine on the critical path, their barrier "
            "waits included", headline=True),
        fig("non_kernel_us", _us(non_kernel), doc="launch gaps, host gaps and metadata waits on the "
            "critical path"),
        fig("non_kernel_frac", non_kernel / step if step else 0.0, "fraction", "non_kernel_us / step_us"),
        fig("layer_us", {k: {"count": v["count"], "mean": _us(v["mean_ns"]), "max": _us(v["max_ns"])}
                         for k, v in b.segments.items()}, "us", "each segment's span on the main stream"),
        fig("model_us", {k: _us(v) for k, v in sorted(b.by_model.items())}, "us",
            "kernel time on every stream of the slowest rank by how each kernel is modeled"),
        fig("unmodeled_frac", sum(v for k, v in b.by_model.items() if k in ("proxy", "roofline")) / busy
            if busy else 0.0, "fraction", "share of that kernel time timed by a proxy or a roofline"),
        fig("stream_busy_us", {k: _us(v) for k, v in sorted(b.stream_busy.items())}, "us",
            "time each stream's kernels were at work"),
        fig("slowest_rank", b.slowest_rank, "rank", "the rank that ends last", digits=0),
        fig("slowest_ranks", len(b.ranks), "ranks", "ranks with the slowest rank's work and times", digits=0),
        fig("slowest_reason", b.reason, "", "why that rank is the slowest"),
        fig("distinct_kernels", out.distinct_kernels, "kernels",
            "distinct (kernel, shape, cores) timed once for the step", digits=0),
        fig("moe_note", out.run.moe.note, "", "what times the MoE blocks"),
    ]
    kernels = tuple(KernelRecord(
        r.name, r.time_ns, r.bound_ns, r.bottleneck, None, (
            fig("launches", r.launches, "launches", "per step on the slowest rank", digits=0),
            fig("mean_us", _us(r.time_ns / r.launches), doc="per launch on the clock"),
            fig("alone_us", _us(r.alone_ns), doc="its launches' time alone (no other stream beside it)"),
            fig("share_of_step_frac", r.time_ns / step, doc="time / step_us (a side stream's is hidden "
                "as far as critical_us shows no wait for it)"),
            fig("stream", r.stream, "", "the stream it runs on"),
            fig("model", r.model, "", "pipe-level, proxy, roofline or flow-level (simnode.decode.timing)"),
            fig("source", r.source, "", "the simnode model that times it"),
            fig("shape", r.key, "", "operation, format and shape"))) for r in b.kernels)
    bottleneck = f"rank {b.slowest_rank}: {top.name} ({top.model}, {top.bottleneck})"
    return Result(name, "decode_step", step, bottleneck, kernels, tuple(header), seed=seed)


KIND = WorkloadKind("decode_step", FIELDS, run, "one decode step of a DeepSeek-V4 model on N chips",
                    needs_supernode=True, check=check, records=(DeepEPCosts,),
                    path_fields=("routing_file",))
