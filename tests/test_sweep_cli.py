"""``simnode sweep``: grid parsing, one table row / JSON object per point, parallel runs
equal serial ones, and every user error exits 2 before anything runs."""

import json

import pytest

from simnode.commands.sweep import grid, parse_params


@pytest.fixture
def sweep(cli, repo_root):
    def run(*extra):
        return cli("sweep", repo_root / "topologies" / "atlas950-supernode.yaml",
                   repo_root / "workloads" / "deepep-normal.yaml",
                   "--set", "tokens_per_rank=512", *extra)
    return run


def test_parse_params_and_grid_order():
    params = parse_params(["num_ranks=2,4", "routing=uniform,hot"])
    assert params == {"num_ranks": [2, 4], "routing": ["uniform", "hot"]}
    assert grid(params) == [{"num_ranks": 2, "routing": "uniform"},
                            {"num_ranks": 2, "routing": "hot"},
                            {"num_ranks": 4, "routing": "uniform"},
                            {"num_ranks": 4, "routing": "hot"}]


def test_table_has_one_row_per_point(sweep):
    res = sweep("--param", "num_ranks=2,4", "--jobs", "2")
    assert res.code == 0, res.err
    lines = res.out.strip().splitlines()
    assert len(lines) == 3
    header = lines[0].split()
    assert header[0] == "num_ranks" and "dispatch_GBps" in header and "combine_GBps" in header
    assert [ln.split()[0] for ln in lines[1:]] == ["2", "4"]


def test_json_has_a_point_per_object_and_parallel_equals_serial(sweep):
    par = sweep("--param", "num_ranks=2,4", "--jobs", "2", "--json")
    ser = sweep("--param", "num_ranks=2,4", "--jobs", "1", "--json")
    assert par.code == ser.code == 0, par.err + ser.err
    rows = json.loads(par.out)
    assert [r["point"] for r in rows] == [{"num_ranks": 2}, {"num_ranks": 4}]
    assert [r["num_ranks"] for r in rows] == [2, 4]
    assert all("dispatch_GBps" in r and "combine_GBps" in r for r in rows)
    assert json.loads(ser.out) == rows
    assert par.out == ser.out


def test_unknown_field(sweep, user_error):
    user_error(sweep("--param", "foo=1,2"), "--param: foo = 1", "expected an existing key",
               "num_ranks", nothing_ran=True)


def test_a_bad_set_beside_the_grid_is_named_as_set(sweep, user_error):
    user_error(sweep("--set", "foo=1", "--param", "num_ranks=2,4"), "--set: foo = 1",
               "expected an existing key", nothing_ran=True)


def test_empty_list(sweep, user_error):
    user_error(sweep("--param", "num_ranks="), "--param", "num_ranks = ''",
                      "one or more values", nothing_ran=True)


def test_value_of_the_wrong_type(sweep, user_error):
    user_error(sweep("--param", "num_ranks=abc"), "num_ranks = 'abc'", "an integer", nothing_ran=True)


def test_a_bad_value_later_in_the_grid_is_a_user_error(sweep, user_error):
    user_error(sweep("--param", "num_ranks=2,12", "--jobs", "1"), "num_ranks = 12",
                      "a divisor of num_experts (256)", nothing_ran=True)


def test_a_bad_value_in_a_parallel_sweep_is_a_user_error(sweep, user_error):
    user_error(sweep("--param", "num_ranks=2,12", "--jobs", "2"), "num_ranks = 12",
                      "a divisor of num_experts (256)", nothing_ran=True)


def test_missing_param(sweep, user_error):
    user_error(sweep(), "--param", "at least one --param", nothing_ran=True)


def test_same_field_twice(sweep, user_error):
    user_error(sweep("--param", "num_ranks=2", "--param", "num_ranks=4"),
                      "num_ranks = 4", "at most once", nothing_ran=True)


@pytest.mark.parametrize("command", ["sweep", "validate", "regress"])
def test_a_negative_jobs_count_is_a_usage_error(cli, repo_root, command):
    files = ([repo_root / "topologies" / "atlas950-supernode.yaml",
              repo_root / "workloads" / "deepep-normal.yaml"] if command == "sweep" else [])
    res = cli(command, *files, "--jobs", "-3")
    assert res.code == 2 and res.out == ""
    assert "argument --jobs: '-3': expected an integer >= 0" in res.err
    assert "Traceback" not in res.err
