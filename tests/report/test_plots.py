"""simnode.report.plots: every plot is a non-blank PNG, deterministic, drawn from what the
kinds declare (headline figures, series, fraction mappings, FLOPs) and never from a kind's
name; published points come from the validation file (never hard-coded)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import yaml
from matplotlib import image as mpimg

from simnode.commands.report import published_records
from simnode.report import plots, timeplots
from simnode.report.folder import PointData, load_folder
from simnode.report.result import Figure, KernelRecord, Result, Series
from simnode.runs.cases import DEFAULT_CASES, load_cases


def _point(point: dict, kernels=(), figures=(), series=()) -> PointData:
    r = Result("w", "k", 100.0, "x", tuple(kernels), tuple(figures), tuple(series))
    return PointData(point, r, None, r.to_dict())


def test_headlines_against_a_swept_field_are_a_nonblank_png(deepep_sweep_dir, nonblank):
    folder = load_folder(deepep_sweep_dir)
    assert plots.sweep_fields(folder.points, folder.params) == ["num_ranks"]
    published = published_records()
    png = plots.sweep_png(folder.points, "num_ranks", published)
    nonblank(png)
    assert png == plots.sweep_png(folder.points, "num_ranks", published)      # deterministic
    assert png != plots.sweep_png(folder.points, "num_ranks", ())              # the stars are drawn


def test_published_records_come_from_the_validation_file():
    expected = {(c.metric, c.sets, c.published) for c in load_cases(DEFAULT_CASES)}
    got = {(q["metric"], tuple(f"{k}={v}" for k, v in q["set"].items()), q["published"])
           for q in published_records()}
    assert got == expected and got
    ep = plots.published_for(published_records(), "deepep-normal", "num_ranks", ["dispatch_GBps"])
    assert {q["set"]["num_ranks"] for q in ep} == {8, 128}


def test_published_records_follow_an_edited_file(tmp_path):
    case = {"source": "test", "topology": "t.yaml", "workload": "workloads/deepep-normal.yaml",
            "metric": "combine_GBps", "tolerance": 0.1}
    cases = [dict(case, id="a", set={"num_ranks": 32}, published=123.0),
             dict(case, id="b", set={"num_ranks": 32, "hidden": 4096}, published=99.0),   # other config
             dict(case, id="c", set={"num_ranks": 32}, metric="tflops", published=5.0)]
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "cases": cases}))
    got = plots.published_for(published_records(path), "deepep-normal", "num_ranks", ["combine_GBps"])
    assert got == [{"metric": "combine_GBps", "workload": "deepep-normal", "topology": "t.yaml", "set": {"num_ranks": 32},
                    "published": 123.0, "tolerance_frac": 0.1, "source": "test"}]


def test_a_series_heat_map_is_a_nonblank_png(deepep_run_dir, nonblank):
    series = load_folder(deepep_run_dir).points[0].result.series
    links = [s for s in series if s.name == "link_util"]
    assert [s.kernel for s in links] == ["dispatch", "combine"]
    nonblank(timeplots.series_png(links))


def test_heat_map_rows_busiest_first_and_grouped():
    rows = {f"l{i}": [i / 10, i / 10] for i in range(10)}
    assert timeplots.order_rows(rows, 3) == ["l9", "l8", "l7"]
    grouped = {f"rank{r}.{x}": [r / 10 + (x == "urma") / 100] * 2 for r in range(4) for x in ("hbm", "urma")}
    assert timeplots.order_rows(grouped, 4) == ["rank3.hbm", "rank3.urma", "rank2.hbm", "rank2.urma"]
    s = Series("u", "k", "fraction", (0.0, 10.0, 20.0), rows)
    assert timeplots.series_png([s], max_rows=3) != timeplots.series_png([s], max_rows=10)


def test_heat_map_rows_at_128_ranks_keep_the_busiest_and_summarize_the_rest(nonblank):
    """384 rows of 128 ranks: the busiest 8 ranks' rows, then one mean row per resource of the
    other 120; 288 links: the busiest 24, then the mean of the other 264."""
    chip = {f"rank{r}.{x}": [(r % 50) / 100 + i / 1000, 0.5] for r in range(128)
            for i, x in enumerate(("hbm", "urma_rx", "urma_tx"))}
    shown, rest, what = timeplots.summarized_rows(chip, 24)
    assert len(shown) == 24 and shown[:3] == ["rank49.hbm", "rank49.urma_rx", "rank49.urma_tx"]
    assert what == "8 busiest of 128 ranks"
    assert [label for label, _ in rest] == [f"120 others: {x} (mean)" for x in ("hbm", "urma_rx", "urma_tx")]
    others = [v for k, v in chip.items() if k.endswith(".hbm") and k not in shown]
    assert rest[0][1] == pytest.approx(list(np.mean(others, axis=0)))
    links = {f"l{i}": [i / 288] * 3 for i in range(288)}
    shown, rest, what = timeplots.summarized_rows(links, 24)
    assert shown[0] == "l287" and len(shown) == 24 and what == "24 busiest of 288 rows"
    assert rest[0][0] == "mean of 264 others" and rest[0][1] == pytest.approx([np.mean(range(264)) / 288] * 3)
    png = timeplots.series_png([Series("chip_util", "k", "fraction", (0.0, 1.0, 2.0), chip)])
    nonblank(png)
    assert mpimg.imread(io.BytesIO(png), format="png").shape[0] < 1000       # 27 rows, not 384


def test_fraction_bars_group_by_key_prefix(nonblank):
    pts = [_point({"x": i}, [KernelRecord("gemm", 1.0, figures=(Figure(
        "pipe_busy_frac", {"aic.m": 0.9 - i / 10, "aiv.v": 0.3 + i / 10}, "fraction", headline=True),),
        flat="top")]) for i in range(3)]
    assert plots.fraction_bar_candidates(pts) == [("gemm", "pipe_busy_frac")]
    nonblank(plots.fraction_bars_png(pts, "gemm", "pipe_busy_frac"))


def test_roofline_is_a_nonblank_png(gemm_run_dir, nonblank):
    points = load_folder(gemm_run_dir).points
    assert plots.roofline_points(points)
    nonblank(plots.roofline_png(points))


def test_nothing_to_plot_is_a_value_error(deepep_run_dir):
    points = load_folder(deepep_run_dir).points          # DeepEP: no FLOPs, no fraction bars
    assert not plots.roofline_points(points) and not plots.fraction_bar_candidates(points)
    with pytest.raises(ValueError, match="flops"):
        plots.roofline_png(points)
    with pytest.raises(ValueError, match="series"):
        timeplots.series_png([])
    with pytest.raises(ValueError, match="headline"):
        plots.sweep_png(points, "num_ranks")             # one point: nothing to draw a line of


def test_kernels_against_their_bounds_is_a_nonblank_png(deepep_run_dir, nonblank):
    nonblank(plots.kernel_bounds_png(load_folder(deepep_run_dir).points[0]))


def test_the_x_axis_and_the_summary_panel(layer_sweep_dir, deepep_sweep_dir, nonblank):
    """A numeric field first, else a field of names (categories), never the band's overlay;
    the summary's panel: the unit with published points, else one every run has."""
    assert plots.x_field({"overlay": ["lo", "hi"], "num_ranks": [8, 16]}, "overlay") == "num_ranks"
    assert plots.x_field({"overlay": ["lo", "hi"]}, "overlay") is None
    layer = load_folder(layer_sweep_dir)
    assert plots.x_field(layer.params) == "overlap"
    nonblank(plots.sweep_png(layer.points, "overlap"))
    assert plots.primary_unit(layer.points, "overlap") == "fraction"          # GB/s: sequential runs only
    ep = load_folder(deepep_sweep_dir).points
    assert plots.primary_unit(ep, "num_ranks", published_records()) == "GB/s"
    assert plots.sweep_units(ep) == ["GB/s", "ratio"]
    assert plots.sweep_png(ep, "num_ranks", units_=["ratio"]) != plots.sweep_png(ep, "num_ranks")
