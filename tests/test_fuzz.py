"""Fuzzing every kind's declared fields: hypothesis draws fields (and a few topology fields)
at, inside and beyond their declared bounds and runs ``simnode run`` in a child process
under a memory limit (``MEMORY_LIMIT``, address space) and a time limit. A draw passes only
if the run exits 0, or exits 2 with a one-paragraph error; never a traceback, a library
warning, a kill for memory or a hang.

Profiles (``SIMNODE_FUZZ``, docs/testing.md): ``suite`` (the default: a few draws per kind,
about a minute for all kinds on two cores) and ``nightly`` (many more draws, hours).
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from simnode.config import params as declarations
from simnode.config.overrides import assignment_text
from simnode.workloads import registry

REPO = Path(__file__).resolve().parents[1]
SN, CHIP, A3 = ("topologies/atlas950-supernode.yaml", "topologies/ascend950dt.yaml",
                "topologies/atlas900-a3-superpod.yaml")

#: the address space a child run may map: a run that could outgrow a 4 GiB machine dies
#: here (MemoryError) and fails the draw
MEMORY_LIMIT = 2 * 2 ** 30

#: (draws per kind, seconds per draw) of each profile. A run accepted but still going after
#: its seconds fails the draw unless its kind's estimate (``RunSpec.estimated_s``) called it
#: heavy: at least ``HEAVY_SHARE`` of the limit on one core (the estimate is of an idle core;
#: a loaded machine runs several times slower). An accepted run with no estimate must finish.
PROFILES = {"suite": (3, 60), "nightly": (300, 600)}
PROFILE = os.environ.get("SIMNODE_FUZZ", "suite")
DRAWS, LIMIT_S = PROFILES[PROFILE]
HEAVY_SHARE = 0.05
settings.register_profile("simnode-fuzz", max_examples=DRAWS, deadline=None, derandomize=PROFILE == "suite",
                          suppress_health_check=list(HealthCheck), database=None,
                          phases=(Phase.explicit, Phase.generate))   # a failing draw is shown as drawn

#: each kind's small base run (a shipped workload at a shape that runs in about a second)
BASES = {
    "decode_step": (SN, "workloads/v4-flash-decode.yaml",
                    ["chips=4", "attn_dp=4", "moe_ep=4", "global_batch=4", "context_len=1024"]),
    "chakra": (SN, "workloads/chakra-example.yaml", []),
    "deepep": (SN, "workloads/deepep-normal.yaml", ["num_ranks=4", "tokens_per_rank=256"]),
    "deepep_hccs": (A3, "workloads/deepep-a3-normal.yaml", ["num_ranks=4", "tokens_per_rank=256"]),
    "deepep_ll": (SN, "workloads/deepep-ll.yaml", ["num_ranks=4", "tokens_per_rank=32"]),
    "deepep_ll_hccs": (A3, "workloads/deepep-ll-a3.yaml", ["num_ranks=4", "tokens_per_rank=32"]),
    "gemm": (CHIP, "workloads/gemm-bf16-4096x7168x16384.yaml", ["m=256", "n=256", "k=512"]),
    "grouped_gemm": (CHIP, "workloads/grouped-gemm.yaml", ["tokens=256", "n=512", "k=512"]),
    "lightning_indexer": (CHIP, "workloads/lightning-indexer-decode.yaml", ["batch=4", "context=1024"]),
    "moe_layer": (SN, "workloads/moe-layer.yaml", ["num_ranks=4", "tokens_per_rank=256"]),
    "moe_layer_low_latency": (SN, "workloads/moe-layer-decode-v4-flash.yaml",
                              ["num_ranks=4", "tokens_per_rank=16"]),
    "sparse_mla": (CHIP, "workloads/sparse-mla-decode.yaml", ["batch=4"]),
    "swiglu": (CHIP, "workloads/swiglu.yaml", ["rows=256"]),
    "tile": (CHIP, "workloads/tk-rope.yaml", ["seqlen=256", "nheads=8"]),
    "topk": (CHIP, "workloads/topk-indexer.yaml", ["rows=64"]),
    "transport": (SN, "workloads/transport-alltoall.yaml", ["num_ranks=8"]),
}
#: topology fields a draw may change besides the kind's own
TOPOLOGY_FIELDS = ("chip.memory.hbm_bandwidth_GBps", "chip.aic_freq_GHz", "chip.num_ai_cores",
                   "chip.buffers.ub_KiB", "chip.memory.l2_capacity_MiB")
SUPERNODE_FIELDS = ("supernode.port_bandwidth_GBps", "supernode.num_ranks", "supernode.hop_latency_ns")


def _fields(base: str) -> list:
    topo, work, _ = BASES[base]
    data = yaml.safe_load((REPO / work).read_text())
    kind = registry.get_kind(data["kind"])
    if "program" in data:                       # a tile program's own fields
        data = {**data, "program": str((REPO / work).parent / data["program"])}
    return list(kind.all_fields(data, work))


def _topology_params(topo: str) -> list:
    from simnode.config.chip import ChipSpec
    from simnode.config.supernode import SupernodeSpec
    walked = dict(declarations.walk(ChipSpec, "chip.")) | dict(declarations.walk(SupernodeSpec, "supernode."))
    keys = TOPOLOGY_FIELDS + (SUPERNODE_FIELDS if topo != CHIP else ())
    return [(k, walked[k]) for k in keys]


def _numbers(p, integer: bool):
    """Values at, inside and beyond ``p``'s bounds."""
    lo, hi = p.bounds
    lo = 0 if lo is None else lo
    default = p.default if isinstance(p.default, (int, float)) and not isinstance(p.default, bool) else None
    edges = [lo, hi, lo - (1 if integer else lo / 2 or 1e-6), hi * 2 + 1, -1, 10 ** 30 if integer else 1e300]
    if integer:
        inside = st.integers(lo, min(hi, lo + 4096))
    else:
        inside = st.floats(lo, hi, allow_nan=False)
    scaled = st.just(default) if default is None else st.sampled_from(
        [default * 2 ** j for j in (-3, -1, 1, 3)] if default else [1, 10])
    drawn = st.one_of(st.sampled_from(edges), inside, scaled.filter(lambda v: v is not None))
    if integer:
        drawn = drawn.map(lambda v: int(v) if isinstance(v, float) and math.isfinite(v) else v)
    return drawn


def _value(p):
    if p.choices:
        return st.sampled_from(list(p.choices) + ["no-such"])
    if p.type == "bool":
        return st.sampled_from([True, False, "maybe"])
    if p.type == "str":
        return st.sampled_from(["", "x", "../nowhere.npy"])
    if p.type == "ints":
        return st.lists(st.integers(-1, 2 ** 31), max_size=4)
    return _numbers(p, p.type == "int")


def _assignments(base: str):
    topo = BASES[base][0]
    kind_fields = [(f.name, f) for f in _fields(base) if f.name not in ("kind", "program")]
    chosen = st.lists(st.sampled_from(kind_fields), min_size=1, max_size=3, unique_by=lambda kv: kv[0])
    extra = st.lists(st.sampled_from(_topology_params(topo)), max_size=1)

    @st.composite
    def draw(d):
        sets = []
        for name, p in d(chosen):
            sets.append(assignment_text(name, d(_value(p))))
        for key, p in d(extra):
            sets.append(assignment_text("topology." + key, d(_value(p))))
        return sets
    return draw()


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_child(topo: str, work: str, sets: list, timeout: float) -> tuple[int | None, str]:
    """(exit code or None on the time limit, stderr) of ``simnode run`` in a child process."""
    argv = [sys.executable, "-m", "simnode", "run", topo, work, "--json"]
    for s in sets:
        argv += ["--set", s]
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    try:
        res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                             preexec_fn=_limit_memory, env=env)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, err
    return res.returncode, res.stderr


def check_draw(topo: str, work: str, sets: list, timeout: float = LIMIT_S) -> None:
    code, err = run_child(topo, work, sets, timeout)
    what = f"simnode run {topo} {work} --set " + " --set ".join(sets)
    assert "Traceback" not in err and "Warning" not in err, (what, err)
    if code is None:
        from simnode.workloads.loader import load_inputs
        estimate = load_inputs(REPO / topo, REPO / work, sets).estimated_s()
        assert estimate >= HEAVY_SHARE * timeout, (what, f"still running after {timeout} s; "
                                                   f"estimated at {estimate:.1f} s")
        return
    assert code in (0, 2), (what, code, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("simnode: error:"), (what, err)


@pytest.mark.parametrize("base", sorted(BASES))
def test_fuzz_kind(base):
    topo, work, base_sets = BASES[base]

    @settings.get_profile("simnode-fuzz")
    @given(sets=_assignments(base))
    def draws(sets):
        check_draw(topo, work, base_sets + sets)
    draws()


def test_every_kind_is_fuzzed():
    kinds = {yaml.safe_load((REPO / w).read_text())["kind"] for _, w, _ in BASES.values()}
    assert kinds == set(registry.names())


def test_the_testing_page_states_the_profiles():
    from test_docs import table_rows
    rows = table_rows((REPO / "docs" / "testing.md").read_text(), "| profile |")
    stated = {r[0].strip("`").split("`")[0]: (int(r[1].split()[0].rstrip(",")), float(r[2].split()[0]))
              for r in rows}
    assert stated == {name: (draws, float(limit)) for name, (draws, limit) in PROFILES.items()}
