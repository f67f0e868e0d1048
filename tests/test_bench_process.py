"""The speed harness's memory sampler (benchmarks/process.py): the peak it reports for a process
tree is the tree's, whether it reads PSS at every sample or only when the resident sizes say a
sample could set a new peak (the speed targets' rows are judged by it); and the rows themselves."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

if not Path("/proc/self/smaps_rollup").exists():
    pytest.skip("needs Linux /proc (smaps_rollup, statm)", allow_module_level=True)


def _process():
    spec = importlib.util.spec_from_file_location("bench_process", ROOT / "benchmarks" / "process.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_process", mod)      # (its dataclasses look their module up)
    spec.loader.exec_module(sys.modules["bench_process"])
    return sys.modules["bench_process"]


# a parent that holds 96 MiB, forks a child that adds 64 MiB of its own (the parent's pages
# are shared: PSS counts them once), and waits for it: the tree peaks near 160 MiB summed
_TREE = """
import os, time
a = bytearray(96 << 20)
for i in range(0, len(a), 4096): a[i] = 1
pid = os.fork()
if pid == 0:
    b = bytearray(64 << 20)
    for i in range(0, len(b), 4096): b[i] = 1
    time.sleep(0.6)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.5)   # the tree shrinks: the bounded sampler reads no PSS here, the 10 Hz one does
"""


@pytest.mark.parametrize("sampler", ["bounded", "10hz"])
def test_tree_peak_counts_shared_pages_once(sampler):
    got = _process().run_tree([sys.executable, "-c", _TREE], sampler=sampler)
    assert got["processes"] == 2
    # both processes' own pages, the parent's shared ones once (not 96 + 96 + 64)
    assert 160 <= got["pss_sum_MiB"] < 160 + 60
    assert got["peak_MiB"] >= got["pss_sum_MiB"]
    assert got["pss_reads"] >= 1


def test_bounded_sampler_reads_pss_less_often_for_the_same_peak():
    mod = _process()
    bounded = mod.run_tree([sys.executable, "-c", _TREE], sampler="bounded")
    every = mod.run_tree([sys.executable, "-c", _TREE], sampler="10hz")
    none = mod.run_tree([sys.executable, "-c", _TREE], sampler="none")
    assert bounded["pss_reads"] < every["pss_reads"]
    assert abs(bounded["pss_sum_MiB"] - every["pss_sum_MiB"]) < 16
    # without a sampler the peak is the largest process's max RSS alone
    assert none["pss_reads"] == 0 and none["peak_MiB"] == none["max_rss_one_MiB"]


def test_every_row_runs_shipped_files_and_only_named_rows_run_on_demand():
    """bench_targets.py is the one way to measure a row: every row but the on-demand ones by
    default, any row by name (``--only``)."""
    rows = _process().ROWS
    for row in rows.values():
        assert row.argv[:2] == ("simnode", "run"), row.name
        assert all((ROOT / a).exists() for a in row.argv if a.endswith(".yaml")), row.name
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import bench_targets as b; "
            "print(b.selected([])); print(b.selected(['deepep-ep2048']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == str([n for n, r in rows.items() if not r.on_demand])
    assert out[1] == "['deepep-ep2048']" and rows["deepep-ep2048"].on_demand
