"""DeepEP's dispatch and combine in two processes (``simnode run --jobs``, RunOptions.jobs):
the result is byte for byte the one-process result, a failure in the forked part reaches the
user as the same error, and a bad --jobs is a user error."""

import json
import os
import time

import pytest

import simnode.workloads.supernode as supernode
from simnode.ep.deepep import DeepEPSim
from simnode.errors import ScheduleError
from simnode.forked import in_child

EP64 = ("--set", "num_ranks=64", "--set", "tokens_per_rank=256")


@pytest.fixture
def run64(cli, repo_root):
    def run(*extra):
        return cli("run", repo_root / "topologies" / "atlas950-supernode.yaml",
                   repo_root / "workloads" / "deepep-normal.yaml", *EP64, "--json", *extra)
    return run


def test_two_processes_give_the_one_process_bytes(run64, monkeypatch):
    forks = []
    real = supernode.in_child
    monkeypatch.setattr(supernode, "in_child", lambda fn: forks.append(1) or real(fn))
    one = run64("--jobs", "1")
    assert one.code == 0, one.err
    assert forks == []
    two = run64("--jobs", "2")
    assert two.code == 0, two.err
    assert forks == [1]                          # combine ran in a child
    assert two.out == one.out
    assert json.loads(two.out)["combine_GBps"] > 0


def test_below_the_size_threshold_one_process(cli, repo_root, monkeypatch):
    forks = []
    monkeypatch.setattr(supernode, "in_child", lambda fn: forks.append(1))
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml",
              repo_root / "workloads" / "deepep-normal.yaml", "--set", "num_ranks=8",
              "--set", "tokens_per_rank=512", "--json", "--jobs", "2")
    assert res.code == 0, res.err
    assert forks == [] and supernode.PARALLEL_FROM_RANKS > 8


def test_an_error_in_the_forked_combine_reaches_the_user(run64, monkeypatch):
    real = DeepEPSim.run

    def failing(self, kind):
        if kind == "combine":
            raise ScheduleError("combine failed on purpose")
        return real(self, kind)
    monkeypatch.setattr(DeepEPSim, "run", failing)
    res = run64("--jobs", "2")
    assert res.code == 2
    assert "combine failed on purpose" in res.err and "Traceback" not in res.err


def test_bad_jobs_is_a_user_error(run64):
    res = run64("--jobs", "-1")
    assert res.code == 2
    assert "'-1': expected an integer >= 0" in res.err


def test_child_value_error_and_kill():
    assert in_child(lambda: {"a": [1, 2.5]}).wait() == {"a": [1, 2.5]}

    def boom():
        raise ValueError("from the child")
    with pytest.raises(ValueError, match="from the child"):
        in_child(boom).wait()
    slow = in_child(lambda: time.sleep(60))
    pid, t = slow.pid, time.perf_counter()
    slow.kill()
    assert time.perf_counter() - t < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)             # stopped and reaped
