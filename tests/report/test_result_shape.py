"""The result shape (simnode.report.result): the flat view derived from the records, the
typed form's round trip, and a kind the report has never heard of (a MoE layer as issue 18
describes it) drawn by the sweep table and the report page from its records alone."""

from __future__ import annotations

import json
import pickle

from simnode.commands.sweep import format_sweep
from simnode.report.folder import load_folder
from simnode.report.html import write_report
from simnode.report.result import KernelRecord, Result, Series, fig, from_record, series_from_record


def _chip() -> Result:
    k = KernelRecord("gemm", 1000.0, 800.0, "cube (aic.m)", 0.95, (
        fig("flops", 2.0e12, "FLOP", digits=None), fig("tflops", 123.45678, "TFLOPS", digits=3, headline=True),
        fig("l2_bytes", 12345.6, "B", digits=0), fig("pipe_busy_frac", {"aic.m": 0.951234567}, "fraction")),
        flat="top")
    return Result("g", "gemm", 1000.0, "cube (aic.m)", (k,), roofline_ns=800.0, bottleneck_util_frac=0.95)


def test_a_top_kernel_keeps_its_figure_names():
    d = _chip().to_dict()
    assert d == {"workload": "g", "kind": "gemm", "makespan_ns": 1000.0, "bottleneck": "cube (aic.m)",
                 "bottleneck_util_frac": 0.95, "roofline_ns": 800.0, "flops": 2.0e12, "tflops": 123.457,
                 "l2_bytes": 12346, "pipe_busy_frac": {"aic.m": 0.95123}}
    assert _chip().tflops == 123.45678                       # unrounded, as an attribute


def _moe_layer(ranks: int) -> Result:
    """A MoE layer's result, shaped as issue 18 asks: layer figures in the header, a record
    per phase kernel, per-link and per-rank HBM-by-user series."""
    phases = [("dispatch", 1500.0, 1400.0, fig("GBps", 370.0 - ranks, headline=True)),
              ("gemm1", 900.0, 850.0, fig("tflops", 800.0, "TFLOPS", headline=True)),
              ("swiglu", 60.0, 55.0, fig("achieved_GBps", 3000.0, headline=True)),
              ("gemm2", 450.0, 420.0, fig("tflops", 790.0, "TFLOPS", headline=True)),
              ("combine", 2800.0, 2600.0, fig("GBps", 360.0 - ranks, headline=True))]
    kernels = tuple(KernelRecord(n, t, b, "rank3.hbm", 0.9, (f, fig("mean_ns", t * 0.95))) for n, t, b, f in phases)
    edges = (0.0, 2000.0, 4000.0, 5710.0)
    series = (Series("link_util", "layer", "fraction", edges, {"rank0->leaf0": [0.5, 0.9, 0.2]}),
              Series("hbm_by_user", "layer", "fraction", edges,
                     {f"rank{r}.{u}": [0.3, 0.6, 0.1] for r in range(2) for u in ("urma", "kernels")}))
    header = (fig("compute_ns", 1410.0), fig("comm_ns", 4300.0), fig("exposed_comm_ns", 3900.0),
              fig("overlap_frac", 0.09, headline=True), fig("straggler_rank", 3, "rank"),
              fig("load_imbalance", 1.07, "ratio", headline=True))
    return Result("moe-layer", "moe_layer", 5710.0, "rank3.hbm (combine)", kernels, header, series,
                  roofline_ns=5325.0, seed=0)


def test_a_new_kind_flattens_by_the_rules():
    d = _moe_layer(8).to_dict()
    assert (d["dispatch_GBps"], d["combine_GBps"], d["gemm1_tflops"]) == (362.0, 352.0, 800.0)
    assert (d["gemm2_ns"], d["bound_gemm2_ns"], d["gemm2_sim_over_bound"]) == (450.0, 420.0, 1.07143)
    assert d["exposed_comm_ns"] == 3900.0 and d["seed"] == 0 and d["makespan_ns"] == 5710.0
    assert not any("hbm_by_user" in k or "link_util" in k for k in d)      # series: their own channel
    assert "tflops" not in d and "hbm_bytes" not in d                      # not computed: absent


def test_the_typed_form_round_trips_and_pickles():
    r = _moe_layer(8)
    record = json.loads(json.dumps(r.to_record()))
    series = [series_from_record(json.loads(json.dumps(s.to_record()))) for s in r.series]
    back = from_record(record, series)
    assert back.to_dict() == r.to_dict() and back.series == r.series
    assert pickle.loads(pickle.dumps(r)) == r


def test_sweeps_and_reports_draw_a_kind_by_its_records(tmp_path):
    rows = [({"num_ranks": n}, None, _moe_layer(n)) for n in (8, 16)]
    table = format_sweep(rows).splitlines()
    assert table[0].split() == ["num_ranks", "makespan_us", "dispatch_GBps", "dispatch_sim_over_bound",
                                "gemm1_tflops", "gemm1_sim_over_bound", "swiglu_achieved_GBps",
                                "swiglu_sim_over_bound", "gemm2_tflops", "gemm2_sim_over_bound", "combine_GBps",
                                "combine_sim_over_bound", "overlap_frac", "load_imbalance", "bottleneck"]
    assert table[1].split()[:4] == ["8", "5.71", "362.0", "1.071"]

    index = []
    for i, (point, _, r) in enumerate(rows):
        d = tmp_path / "points" / f"{i:03d}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(r.to_record()))
        (d / "series.json").write_text(json.dumps([s.to_record() for s in r.series]))
        index.append({"point": point, "dir": f"points/{i:03d}"})
    (tmp_path / "sweep.json").write_text(json.dumps({"params": {"num_ranks": [8, 16]}, "points": index}))
    page = write_report(tmp_path).read_text()
    assert load_folder(tmp_path).kind == "moe_layer"
    for kernel in ("dispatch", "gemm1", "swiglu", "gemm2", "combine"):
        assert f"<summary>Kernel {kernel} " in page
    assert "exposed_comm_ns" in page and 'alt="hbm_by_user num_ranks=8"' in page
    assert 'alt="headline figures against num_ranks"' in page
