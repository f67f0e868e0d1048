"""Issue 19's first list: what a new user hit, each now a one-line error (exit 2) or an
explicit warning, never a traceback, a hang or a silent accept.

- sizes: every kind refuses, before any work, a run that would not fit the 4 GiB a run may
  use (sparse MLA within 5 s, a tile program while it is traced);
- Ctrl-C: one line, exit 130, workers stopped, no partial output left;
- long runs: announced on stderr, ``--progress`` draws the progress line off a terminal;
- the silent accepts: a trace scope matching no thread, a negative --max-per-pipe, an empty
  --param item, --seed beside --set seed=, an absurd batch window;
- result fields: a figure a kind does not compute is absent (also in results.csv), and the
  result records its seed.
"""

from __future__ import annotations

import time

import pytest

import simnode.tile.builder as tile_builder

TOPK_LIMIT = "at most 8,589,934,592 scores"


@pytest.mark.parametrize("workload, sets, needle", [
    ("sparse-mla-prefill.yaml", ["n_q=100000000"], "pipeline blocks (queries x head blocks x ceil(top-k / b_topk) = 1,000,000,000)"),
    ("sparse-mla-decode.yaml", ["batch=10000000"], "= 400,000,000): one run holds its whole schedule in memory"),
    ("sparse-mla-prefill.yaml", ["heads=1048576", "heads_per_core=64"], "= 671,088,640)"),
    ("sparse-mla-prefill.yaml", ["b_topk=16", "topk=65536"], "at most 200,000 pipeline blocks"),
    ("sparse-mla-prefill.yaml", ["b_topk=2048", "topk=4096", "kv_len=8192"], "at most 12,800,000 selected KV rows"),
])
def test_oversized_sparse_mla_is_refused_within_5_s(cli, user_error, repo_root, topology_path,
                                                     workload, sets, needle):
    start_s = time.monotonic()
    res = cli("run", topology_path, repo_root / "workloads" / workload, *[a for s in sets for a in ("--set", s)])
    assert time.monotonic() - start_s < 5
    user_error(res, f"workloads/{workload} (with --set overrides)", needle, nothing_ran=True)


@pytest.mark.parametrize("workload, sets, needle", [
    ("gemm-bf16-4096x7168x16384.yaml", ["m=1000000", "n=1000000"], "tile steps"),
    ("topk-indexer.yaml", ["rows=1000000", "n=1000000"], TOPK_LIMIT),
    ("swiglu.yaml", ["rows=100000000"], "rows = 100000000: expected at most 1,048,576"),
    ("grouped-gemm.yaml", ["tokens=100000000"], "at most 16,777,216 routed tokens"),
    ("grouped-gemm.yaml", ["tokens=2000000"], "tile steps"),
])
def test_every_chip_kind_has_a_size_limit(cli, user_error, repo_root, topology_path, workload, sets, needle):
    start_s = time.monotonic()
    res = cli("run", topology_path, repo_root / "workloads" / workload, *[a for s in sets for a in ("--set", s)])
    assert time.monotonic() - start_s < 30
    user_error(res, needle, nothing_ran=True)


@pytest.mark.parametrize("workload, sets, needle", [
    ("deepep-normal.yaml", ["num_ranks=128", "tokens_per_rank=1048576"], "at most 16,777,216 tokens over all"),
    ("transport-alltoall.yaml", ["messages_per_peer=2000000000"], "messages_per_peer = 2000000000"),
    ("transport-alltoall.yaml", ["num_ranks=2048", "topology.supernode.spine_radix=4096"],
     "num_ranks = 2048: expected at most 1,047,552 communicating (sender, receiver) pairs"),
    ("deepep-normal.yaml", ["num_ranks=2048", "tokens_per_rank=16", "num_experts=2048",
                            "topology.supernode.spine_radix=4096"], "at most 1,047,552 communicating"),
])
def test_supernode_kinds_have_size_limits(cli, user_error, repo_root, workload, sets, needle):
    res = cli("run", repo_root / "topologies" / "atlas950-supernode.yaml", repo_root / "workloads" / workload,
              *[a for s in sets for a in ("--set", s)])
    user_error(res, needle, nothing_ran=True)


def test_a_tile_program_too_large_is_refused_while_traced(cli, user_error, topology_path, tmp_path, monkeypatch):
    (tmp_path / "copy.py").write_text(
        "import simnode.tile.lang as T\n\n\n@T.program\ndef copy(rows: int = 4096):\n"
        "    x = T.tensor('x', (rows, 256), 'fp32')\n"
        "    for core in T.Kernel(T.num_vector_cores(), vector=True):\n"
        "        xt = T.alloc_ub((8, 256), 'fp32')\n"
        "        for t in T.Persistent(rows // 8, T.num_vector_cores(), core, num_stages=2):\n"
        "            T.copy(x[t * 8:(t + 1) * 8], xt)\n")
    (tmp_path / "copy.yaml").write_text("kind: tile\nprogram: copy.py\n")
    monkeypatch.setattr(tile_builder, "MAX_RECORDED_OPS", 100)
    user_error(cli("run", topology_path, tmp_path / "copy.yaml"), f"{tmp_path / 'copy.py'}:10:",
               "the program records more than 100 instructions", nothing_ran=True)
