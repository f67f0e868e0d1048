"""User mistakes found by a fuzzing pass over the CLI: each is one ``simnode: error:`` line
naming the file or option, the key and the value, exit 2, no traceback, and nothing run."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from simnode.config.overrides import assignment_text, parse_assignment

SN = "topologies/atlas950-supernode.yaml"
DEEPEP = "workloads/deepep-normal.yaml"
TINY_EP = ["--set", "tokens_per_rank=64"]


@pytest.fixture
def sn(repo_root):
    return repo_root / SN, repo_root / DEEPEP


# -- numbers ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["topology.supernode.wqe_processing_ns", "topology.supernode.hop_latency_ns",
                                 "batch_window_ns", "topology.chip.memory.hbm_bandwidth_GBps"])
def test_infinity_is_not_a_value(cli, user_error, sn, key):
    user_error(cli("run", *sn, *TINY_EP, "--set", f"{key}=.inf"),
               key.removeprefix("topology."), "= inf", "expected a finite number", nothing_ran=True)


def test_exponent_numbers_read_as_numbers():
    assert parse_assignment("k=1e9") == ("k", 1e9)
    assert parse_assignment("k=-2.5E-3") == ("k", -2.5e-3)
    assert parse_assignment("k='1e5'") == ("k", "1e5")       # quoted: a string


@pytest.mark.parametrize("value", [1e-05, 0.1, 3500, 1e16, None, True, [0, 1, 2], "fp8", "123", "1e5",
                                   "it's", -2.5e-300])
def test_assignment_text_reads_back_as_the_same_value(value):
    assert parse_assignment(assignment_text("k", value)) == ("k", value)


def test_macs_per_cycle_must_fill_whole_fractals(cli, user_error, topology_path, small_gemm):
    user_error(cli("run", topology_path, small_gemm(), "--set", "topology.chip.cube.macs_per_cycle.bf16=100"),
               "chip.cube.macs_per_cycle.bf16 = 100", "multiple of 256", nothing_ran=True)


def test_a_very_slow_memory_still_finishes(cli, topology_path, small_gemm):
    # the makespan runs to ~1e12 ns, where one ns no longer moves a float clock: the fluid
    # engine must still complete its transfers instead of waking forever
    res = cli("run", topology_path, small_gemm(m=256, n=256, k=256), "--json",
              "--set", "topology.chip.memory.hbm_bandwidth_GBps=0.001")
    assert res.code == 0, res.err


# -- sizes beyond one run's budget ------------------------------------------------------------
@pytest.mark.parametrize("args, needles", [
    (["--set", "m=2000000000"], ["m, n, k", "tile steps"]),
    (["--set", "topology.chip.num_ai_cores=1000000"], ["chip.num_ai_cores = 1000000", "<= 1024"]),
])
def test_chip_runs_too_large_are_refused(cli, user_error, topology_path, small_gemm, args, needles):
    user_error(cli("run", topology_path, small_gemm(), *args), *needles, nothing_ran=True)


def test_topk_too_large_is_refused(cli, user_error, topology_path, write_yaml):
    w = write_yaml({"kind": "topk", "rows": 32, "n": 2000000000, "k": 8}, "topk.yaml")
    user_error(cli("run", topology_path, w), "topk.yaml", "rows, n", "scores", nothing_ran=True)


@pytest.mark.parametrize("args, needles", [
    (["--set", "tokens_per_rank=1000000000"], ["deepep-normal.yaml", "tokens_per_rank = 1000000000"]),
    (["--set", "topology.supernode.leaf_radix=1000000000"], ["supernode.leaf_radix", "<= 4096"]),
    (["--set", "num_ranks=2000"], ["deepep-normal.yaml", "num_ranks = 2000", "atlas950-supernode.yaml"]),
])
def test_supernode_runs_too_large_are_refused(cli, user_error, sn, args, needles):
    user_error(cli("run", *sn, *args), *needles, nothing_ran=True)


# -- files ----------------------------------------------------------------------------------
def test_a_binary_workload_file(cli, user_error, topology_path, tmp_path):
    w = tmp_path / "binary.yaml"
    w.write_bytes(b"\xfb\xff\x00kind: gemm\n")
    user_error(cli("run", topology_path, w), "binary.yaml", "UTF-8", nothing_ran=True)


@pytest.mark.parametrize("kind", ["[gemm]", "{a: 1}"])
def test_kind_must_be_a_name(cli, user_error, topology_path, write_yaml, kind):
    w = write_yaml(f"kind: {kind}\nm: 256\nn: 256\nk: 256\n", "w.yaml")
    user_error(cli("run", topology_path, w), "w.yaml", "kind =", "expected one of", nothing_ran=True)


def _routing_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    good = np.tile(np.arange(6, dtype=np.int32), (64, 1))
    if name == "objects.npz":
        np.savez(path, **{f"rank{r}": np.array([object()] * 6, dtype=object) for r in range(8)})
    elif name == "truncated.npz":
        np.savez(path, **{f"rank{r}": good for r in range(8)})
        path.write_bytes(path.read_bytes()[:40])
    elif name == "archive.npy":            # an .npz archive under a .npy name
        np.savez(tmp_path / "a.npz", rank0=good)
        os.replace(tmp_path / "a.npz", path)
    elif name == "single.npz":             # one .npy array under an .npz name
        np.save(tmp_path / "s.npy", good)
        os.replace(tmp_path / "s.npy", path)
    assert name != "truncated.npz" or not zipfile.is_zipfile(path)
    return path


@pytest.mark.parametrize("name, needles", [
    ("objects.npz", ["rank0", "unreadable", "allow_pickle"]),
    ("truncated.npz", ["unreadable", "zip"]),
    ("archive.npy", [".npz archive", ".npy format"]),
    ("single.npz", ["one .npy array", "rank0 .. rank7"]),
])
def test_malformed_routing_files(cli, user_error, sn, tmp_path, name, needles):
    path = _routing_file(tmp_path, name)
    user_error(cli("run", *sn, *TINY_EP, "--set", "routing=file", "--set", f"routing_file={path}"),
               name, *needles, nothing_ran=True)


@pytest.mark.parametrize("args, needles", [
    (["--set", "top_k=257"], ["top_k = 257"]),
    (["--set", "routing=hot", "--set", "hot_experts=300"], ["hot_experts = 300", "at most"]),
    (["--set", "routing=hot", "--set", "hot_share=1"], ["hot_share = 1.0"]),
    (["--set", "routing=file"], ["routing_file = ''"]),
])
def test_routing_arguments_name_the_workload(cli, user_error, sn, args, needles):
    user_error(cli("run", *sn, *TINY_EP, *args), "deepep-normal.yaml", *needles, nothing_ran=True)


# -- outputs --------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--trace", "--out"])
def test_an_empty_output_path(cli, user_error, topology_path, small_gemm, option):
    user_error(cli("run", topology_path, small_gemm(), option, ""), option, "(it is empty)", nothing_ran=True)


def test_a_trace_into_a_folder(cli, user_error, topology_path, small_gemm, tmp_path):
    user_error(cli("run", topology_path, small_gemm(), "--trace", tmp_path),
               "--trace", "this is a folder", nothing_ran=True)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_outputs_where_nothing_can_be_written(cli, user_error, topology_path, small_gemm):
    # /proc looks writable to root: the trace's first write fails, before any result; to
    # anyone else it does not, and the check before the run says so
    expected = ("could not write the output /proc/simnode.trace.json" if os.access("/proc", os.W_OK)
                else "expected a file in a folder simnode can write to (/proc is not one)")
    user_error(cli("run", topology_path, small_gemm(), "--trace", "/proc/simnode.trace.json"),
               expected, nothing_ran=True)
    user_error(cli("run", topology_path, small_gemm(), "--out", "/proc/simnode-out"),
               "--out", "a folder simnode can create", nothing_ran=True)
    assert not Path("/proc/simnode-out").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_while_writing_the_trace(cli, topology_path, small_gemm):
    res = cli("run", topology_path, small_gemm(), "--trace", "/dev/full")
    assert res.code == 2 and "Traceback" not in res.err
    assert res.err.startswith("simnode: error: could not write the output") and "No space left" in res.err


def test_a_run_into_a_sweep_folder(cli, user_error, topology_path, small_gemm, tmp_path):
    w = small_gemm()
    res = cli("sweep", topology_path, w, "--param", "m=128,256", "--jobs", "1", "--out", tmp_path / "s")
    assert res.code == 0, res.err
    user_error(cli("run", topology_path, w, "--out", tmp_path / "s"), "--out", "sweep", nothing_ran=True)
    assert not (tmp_path / "s" / "result.json").exists()


# -- sweeps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("address", ["localhost", ":::", "tcp://host"])
def test_a_malformed_dask_address(cli, user_error, topology_path, small_gemm, address):
    user_error(cli("sweep", topology_path, small_gemm(), "--param", "m=128,256",
                   "--executor", "dask", "--address", address), "--address", "HOST:PORT", nothing_ran=True)


def test_a_grid_with_a_repeated_value(cli, user_error, topology_path, small_gemm):
    user_error(cli("sweep", topology_path, small_gemm(), "--param", "m=128,128"),
               "--param", "distinct values", nothing_ran=True)


def test_sweep_values_in_exponent_form_keep_their_type(cli, topology_path, small_gemm):
    # `--param X=1e-05,...` used to reach the workers as the text '1e-05', which YAML 1.1
    # reads as a string; and more workers than points are not started
    res = cli("sweep", topology_path, small_gemm(), "--jobs", "64", "--json",
              "--param", "topology.chip.memory.hbm_bandwidth_GBps=3.5e3,7e3")
    assert res.code == 0, res.err
    assert '"point"' in res.out and "3500.0" in res.out


# -- keys -----------------------------------------------------------------------------------
def test_a_key_given_twice(cli, user_error, topology_path, write_yaml):
    w = write_yaml("kind: gemm\nm: 256\nn: 256\nk: 256\nm: 512\n", "twice.yaml")
    user_error(cli("run", topology_path, w), "twice.yaml", "m =", "given twice, again on line 5",
               nothing_ran=True)


def test_switch_keys_in_a_full_mesh(cli, user_error, repo_root):
    mesh = repo_root / "topologies/npu8p-box-mesh.yaml"
    user_error(cli("run", mesh, repo_root / DEEPEP, *TINY_EP, "--set", "topology.supernode.leaf_radix=16"),
               "supernode.leaf_radix = 16", "full_mesh", nothing_ran=True)


def test_set_may_add_a_topology_key_the_file_leaves_out(cli, topology_path, small_gemm, sn):
    res = cli("run", topology_path, small_gemm(), "--json",
              "--set", "topology.chip.paths.ub_to_gm.min_issue_interval_cycles=5")
    assert res.code == 0, res.err
    res = cli("run", *sn, *TINY_EP, "--json", "--set", "topology.supernode.shape=clos")
    assert res.code == 0, res.err


@pytest.mark.parametrize("args, needles", [
    (["--set", "num_cores=1000"], ["num_cores = 1000", "32 AI cores"]),
    (["--trace-scope", "core00.*"], ["--trace-scope", "--trace FILE"]),
])
def test_chip_run_options_that_would_be_ignored(cli, user_error, topology_path, small_gemm, args, needles):
    user_error(cli("run", topology_path, small_gemm(), *args), *needles, nothing_ran=True)


def test_more_vector_cores_than_the_chip_has(cli, user_error, topology_path, write_yaml):
    w = write_yaml({"kind": "topk", "rows": 32, "n": 1024, "k": 8, "num_aivs": 1000}, "topk.yaml")
    user_error(cli("run", topology_path, w), "num_aivs = 1000", "64 vector cores", nothing_ran=True)


def test_a_routing_file_without_file_routing(cli, user_error, sn):
    user_error(cli("run", *sn, *TINY_EP, "--set", "routing_file=x.npy"),
               "routing_file = 'x.npy'", "routing = file", nothing_ran=True)


def test_missing_and_misplaced_keys_are_named(cli, user_error, topology_path, write_yaml, tmp_path):
    user_error(cli("run", topology_path, write_yaml("m: 256\n", "nokind.yaml")),
               "nokind.yaml", "kind = '<missing>'", nothing_ran=True)
    # a nested block the kind does not have: the missing field's error lists what was given
    user_error(cli("run", topology_path, write_yaml("kind: gemm\nparams:\n  m: 256\n", "nested.yaml")),
               "m = '<missing>'", "Keys given here: kind, params", nothing_ran=True)
    user_error(cli("run", topology_path, ""), "WORKLOAD argument", "(it is empty)", nothing_ran=True)
    user_error(cli("run", topology_path, tmp_path), "a YAML file (this is a folder)", nothing_ran=True)


def test_the_report_does_not_write_over_its_results(cli, user_error, topology_path, small_gemm, tmp_path):
    res = cli("run", topology_path, small_gemm(), "--out", tmp_path / "r")
    assert res.code == 0, res.err
    before = (tmp_path / "r" / "result.json").read_bytes()
    user_error(cli("report", tmp_path / "r", "-o", tmp_path / "r" / "result.json"),
               "-o", "result.json", "would lose them")
    assert (tmp_path / "r" / "result.json").read_bytes() == before


def test_merge_keys_and_odd_values_in_yaml(cli, user_error, topology_path, write_yaml):
    # a merge key repeats the merged keys: not a key given twice
    from simnode.config.fields import load_yaml
    w = write_yaml("base: &b {m: 256, n: 256}\nshape: {<<: *b, n: 512}\n", "merge.yaml")
    assert load_yaml(w)["shape"] == {"m": 256, "n": 512}
    user_error(cli("run", topology_path, write_yaml("kind: gemm\nm: 2024-13-45\n", "date.yaml")),
               "date.yaml", "valid YAML values", nothing_ran=True)
    user_error(cli("run", topology_path, write_yaml("? [a, b]\n: 1\n", "listkey.yaml")),
               "listkey.yaml", nothing_ran=True)


def test_a_huge_integer_where_a_number_belongs(cli, user_error, topology_path, small_gemm):
    user_error(cli("run", topology_path, small_gemm(), "--set",
                   "topology.chip.memory.hbm_bandwidth_GBps=1" + "0" * 400), "expected a finite number",
               nothing_ran=True)


def test_output_paths_a_probe_must_not_disturb(cli, topology_path, small_gemm, tmp_path):
    # a dangling symlink is written through, not replaced by a file
    target = tmp_path / "target.json"
    (tmp_path / "link.json").symlink_to(target)
    res = cli("run", topology_path, small_gemm(), "--trace", tmp_path / "link.json")
    assert res.code == 0, res.err
    assert (tmp_path / "link.json").is_symlink() and target.stat().st_size > 0
    # a named pipe is opened once, by the trace writer (a probe would end its reader's input)
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    import threading
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    res = cli("run", topology_path, small_gemm(), "--trace", fifo)
    reader.join(timeout=60)
    assert res.code == 0, res.err
    assert got and got[0].startswith(b"{") or got[0].startswith(b"[")


def test_a_rate_too_small_to_time(cli, user_error, topology_path, small_gemm):
    user_error(cli("run", topology_path, small_gemm(), "--set", "topology.chip.memory.hbm_bandwidth_GBps=5e-324"),
               "hbm_bandwidth_GBps", "at least 1e-12", nothing_ran=True)
