"""A run parsed once (simnode.workloads.loader.RunSpec): it pickles whole, records where
each value came from, and takes ``--seed`` only where it means something."""

from __future__ import annotations

import pickle

import pytest

from simnode.errors import ConfigError
from simnode.workloads.loader import FROM_DEFAULT, FROM_SET, load_inputs


def test_a_run_spec_pickles_and_runs_the_same(repo_root, small_gemm):
    topo = repo_root / "topologies" / "ascend950dt.yaml"
    spec = load_inputs(topo, small_gemm(), ["n=512", "topology.chip.memory.hbm_bandwidth_GBps=4000"])
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.topology.chip.memory.hbm_bandwidth_GBps == 4000
    assert back.run().to_dict() == spec.run().to_dict()
    assert spec.origins["chip.memory.hbm_bandwidth_GBps"] == FROM_SET
    assert spec.origins["chip.num_ai_cores"] == str(topo)
    assert spec.origins["workload.n"] == FROM_SET and spec.origins["workload.m"] == str(small_gemm())
    assert spec.origins["workload.swizzle_rows"] == FROM_DEFAULT
    assert spec.resolved()["topology"]["chip"]["memory"]["hbm_bandwidth_GBps"] == 4000


def test_seed_is_a_field_only_once(repo_root):
    topo, work = repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / "deepep-normal.yaml"
    spec = load_inputs(topo, work, ["tokens_per_rank=64"], seed=2)
    assert spec.params["seed"] == 2 and spec.sets == ("tokens_per_rank=64", "seed=2")
    with pytest.raises(ConfigError, match=r"--seed: seed = 2: expected either --seed or --set seed=, not both"):
        load_inputs(topo, work, ["seed=1"], seed=2)
    with pytest.raises(ConfigError, match=r"a workload kind with a seed field \('gemm' has none\)"):
        load_inputs(repo_root / "topologies" / "ascend950dt.yaml",
                    repo_root / "workloads" / "gemm-bf16-4096x7168x16384.yaml", [], seed=1)
