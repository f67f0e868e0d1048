"""simnode.report.plots: every plot is a non-blank PNG, deterministic, and reads the
published points from the validation file (never hard-coded)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import yaml
from matplotlib import image as mpimg

from simnode.report import plots
from simnode.report.folder import PointData, load_folder
from simnode.validate import load_cases


def assert_nonblank_png(png: bytes) -> None:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    nonwhite = (pixels < 0.94).any(axis=-1).mean()
    assert nonwhite > 0.02, f"only {nonwhite:.3%} of the pixels are not white"
    assert float(pixels.std()) > 0.05


def test_bandwidth_vs_ep_is_a_nonblank_png(deepep_sweep_dir):
    folder = load_folder(deepep_sweep_dir)
    png = plots.bandwidth_vs_ep_png(folder.points, plots.published_points("deepep-normal"))
    assert_nonblank_png(png)
    assert png == plots.bandwidth_vs_ep_png(folder.points, plots.published_points("deepep-normal"))


def test_published_points_come_from_the_validation_file():
    expected = {(c.metric, c.sets, c.published) for c in load_cases(plots.DEFAULT_CASES)
                if c.metric in plots.BANDWIDTH_METRICS}
    got = {(p["metric"], (f"num_ranks={p['num_ranks']}",), p["GBps"])
           for p in plots.published_points("deepep-normal")}
    assert got == expected and got
    assert plots.published_points("gemm-bf16-4096x7168x16384") == []


def test_published_points_follow_an_edited_file(tmp_path):
    case = {"source": "test", "topology": "t.yaml", "workload": "workloads/deepep-normal.yaml",
            "metric": "combine_GBps", "tolerance": 0.1}
    cases = [dict(case, id="a", set={"num_ranks": 32}, published=123.0),
             dict(case, id="b", set={"num_ranks": 32, "hidden": 4096}, published=99.0),   # other config
             dict(case, id="c", set={"num_ranks": 32}, metric="tflops", published=5.0)]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "cases": cases}))
    assert plots.published_points("deepep-normal", path) == [
        {"metric": "combine_GBps", "num_ranks": 32, "GBps": 123.0, "tolerance_frac": 0.1, "source": "test"}]


def test_link_heatmap_is_a_nonblank_png(deepep_run_dir):
    assert_nonblank_png(plots.link_heatmap_png(load_folder(deepep_run_dir).points[0].network_util))


def test_link_heatmap_keeps_the_busiest_links():
    util = {"dispatch": {"bin_edges_ns": [0.0, 10.0, 20.0],
                         "links": {f"l{i}": [i / 10, i / 10] for i in range(10)}}}
    assert plots.busiest_links(util["dispatch"]["links"], 3) == ["l9", "l8", "l7"]
    small = plots.link_heatmap_png(util, max_links=3)
    assert_nonblank_png(small)
    assert small != plots.link_heatmap_png(util, max_links=10)


def test_chip_heatmap_groups_ranks_busiest_urma_first():
    edges = [0.0, 10.0, 20.0]
    chip = {f"rank{r}.{x}": [r / 10, r / 10] for r in range(8) for x in ("hbm", "urma_tx", "urma_rx")}
    util = {"combine": {"bin_edges_ns": edges, "links": {"a->b": [0.5, 0.5]}, "chip": chip}}
    assert plots.has_chip_series(util)
    few = plots.chip_heatmap_png(util, max_ranks=2)
    assert_nonblank_png(few)
    assert few != plots.chip_heatmap_png(util, max_ranks=8)
    assert not plots.has_chip_series({"combine": {"bin_edges_ns": edges, "links": {}}})
    with pytest.raises(ValueError, match="chip"):
        plots.chip_heatmap_png({"combine": {"bin_edges_ns": edges, "links": {}}})


def test_pipe_busy_is_a_nonblank_png(gemm_run_dir):
    points = load_folder(gemm_run_dir).points
    assert plots.has_pipes(points)
    assert_nonblank_png(plots.pipe_busy_png(points))


def test_pipe_busy_groups_by_core_kind():
    pts = [PointData({"x": i}, {"pipe_busy_frac": {"aic.m": 0.9 - i / 10, "aiv.v": 0.3 + i / 10}})
           for i in range(3)]
    assert_nonblank_png(plots.pipe_busy_png(pts))


def test_roofline_is_a_nonblank_png(gemm_run_dir):
    points = load_folder(gemm_run_dir).points
    assert plots.has_roofline(points)
    assert_nonblank_png(plots.roofline_png(points))


def test_nothing_to_plot_is_a_value_error(deepep_run_dir):
    points = load_folder(deepep_run_dir).points          # DeepEP: no flops, no pipes
    assert not plots.has_roofline(points) and not plots.has_pipes(points)
    with pytest.raises(ValueError, match="flops"):
        plots.roofline_png(points)
    with pytest.raises(ValueError, match="pipe"):
        plots.pipe_busy_png(points)
    with pytest.raises(ValueError, match="utilization"):
        plots.link_heatmap_png({})
    gemm = [PointData({}, {"kind": "gemm", "makespan_ns": 1.0})]
    with pytest.raises(ValueError, match="bandwidth"):
        plots.bandwidth_vs_ep_png(gemm)


def test_fixture_utilization_matches_the_layout(deepep_run_dir):
    util = load_folder(deepep_run_dir).points[0].network_util
    assert set(util) == {"dispatch", "combine"}
    for series in util.values():
        assert all(len(v) == len(series["bin_edges_ns"]) - 1 for v in series["links"].values())
        assert np.all(np.diff(series["bin_edges_ns"]) > 0)
