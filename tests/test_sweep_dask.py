"""``simnode sweep`` executors and spec errors: 2 worker processes and a Dask cluster give
the results of 1 process (DeepEP num_ranks=2,4 at 512 tokens per rank, link series
included); bad specs and executor mistakes exit 2 with a message naming the problem."""

from __future__ import annotations

import json
import sys

import pytest

from simnode.commands.sweep import run_sweep
from simnode.runs import executor

SUPERNODE = "topologies/atlas950-supernode.yaml"
DEEPEP = "workloads/deepep-normal.yaml"
PARAMS = {"num_ranks": [2, 4]}
SETS = ["tokens_per_rank=512"]
def _dicts(rows) -> list:
    """Each point's flat result with its series (what must match across executors)."""
    return [(point, {**r.to_dict(), "series": [s.to_record() for s in r.series]}) for point, _, r in rows]


@pytest.fixture(scope="module")
def inputs(repo_root):
    return str(repo_root / SUPERNODE), str(repo_root / DEEPEP)


@pytest.fixture(scope="module")
def serial(inputs):
    return _dicts(run_sweep(*inputs, PARAMS, SETS, jobs=1))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as c:
        yield c


def test_two_processes_match_one(inputs, serial):
    assert [p for p, _ in serial] == [{"num_ranks": 2}, {"num_ranks": 4}]
    assert serial[1][1]["num_ranks"] == 4 and serial[1][1]["series"][0]["name"] == "link_util"
    assert serial[1][1]["workload"] == "deepep-normal"     # named after the workload file
    assert _dicts(run_sweep(*inputs, PARAMS, SETS, jobs=2)) == serial


def test_dask_cluster_matches_local(inputs, serial, cluster):
    rows = run_sweep(*inputs, PARAMS, SETS, executor="dask",
                     address=cluster.scheduler_address)
    assert _dicts(rows) == serial


def test_cli_dask_address_matches_local(cli, inputs, serial, cluster):
    res = cli("sweep", *inputs, "--param", "num_ranks=2,4", "--set", SETS[0], "--json",
              "--executor", "dask", "--address", cluster.scheduler_address)
    assert res.code == 0, res.err
    got = json.loads(res.out)
    assert [d.pop("point") for d in got] == [p for p, _ in serial]
    assert got == [{k: v for k, v in d.items() if k != "series"} for _, d in serial]


def test_dask_without_address_starts_a_local_cluster(repo_root, topology_path):
    pytest.importorskip("distributed")
    params, sets = {"m": [256, 512]}, ["n=512", "k=1024"]
    gemm = str(repo_root / "workloads" / "gemm-bf16-4096x7168x16384.yaml")
    local = run_sweep(str(topology_path), gemm, params, sets, jobs=1)
    assert _dicts(run_sweep(str(topology_path), gemm, params, sets, jobs=2, executor="dask")) == _dicts(local)


@pytest.mark.parametrize("args, expected", [
    (["--param", "num_rank=2,4"], "Did you mean 'num_ranks'"),
    (["--param", "num_ranks="], "a comma-separated list of one or more values"),
    (["--param", "num_ranks=,"], "a comma-separated list of one or more values"),
    (["--param", "num_ranks=2,four"], "num_ranks"),
    (["--param", "num_ranks=2", "--param", "num_ranks=4"], "each field at most once"),
    ([], "at least one --param"),
    (["--param", "num_ranks=2", "--executor", "dusk"], "one of local, dask"),
    (["--param", "num_ranks=2", "--address", "127.0.0.1:8786"], "an address is for --executor dask"),
])
def test_bad_sweep_specs_exit_2_before_running(cli, inputs, args, expected):
    res = cli("sweep", *inputs, "--set", SETS[0], *args)
    assert res.code == 2 and res.out == ""
    assert res.err.startswith("simnode: error: ") and expected in res.err, res.err


def test_wrong_type_names_the_field_and_the_type(cli, inputs):
    res = cli("sweep", *inputs, "--param", "num_ranks=2,four")
    assert res.code == 2 and "num_ranks = 'four'" in res.err and "integer" in res.err, res.err


def test_unknown_executor_suggests_the_valid_one(cli, inputs):
    res = cli("sweep", *inputs, "--param", "num_ranks=2", "--executor", "dsak")
    assert res.code == 2 and "Did you mean 'dask'" in res.err, res.err


def test_dask_not_installed_is_a_clear_error(cli, inputs, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)        # import now raises ImportError
    res = cli("sweep", *inputs, "--param", "num_ranks=2", "--executor", "dask")
    assert res.code == 2 and res.out == ""
    assert "needs dask.distributed, which is not installed" in res.err
    assert "pip install 'simnode[dask]'" in res.err


def test_unreachable_scheduler_is_a_clear_error(cli, inputs, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(executor, "DASK_CONNECT_TIMEOUT", "1s")
    res = cli("sweep", *inputs, "--param", "num_ranks=2", "--executor", "dask",
              "--address", "tcp://127.0.0.1:9")
    assert res.code == 2 and "--address tcp://127.0.0.1:9: no dask scheduler answered" in res.err, res.err
