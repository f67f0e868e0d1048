"""simnode.report.plots: every plot is a non-blank PNG, deterministic, drawn from what the
kinds declare (headline figures, series, fraction mappings, FLOPs) and never from a kind's
name; published points come from the validation file (never hard-coded)."""

from __future__ import annotations

import io

import pytest
import yaml
from matplotlib import image as mpimg

from simnode.commands.report import published_records
from simnode.report import plots
from simnode.report.folder import PointData, load_folder
from simnode.report.result import Figure, KernelRecord, Result, Series
from simnode.runs.cases import DEFAULT_CASES, load_cases


def assert_nonblank_png(png: bytes) -> None:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    nonwhite = (pixels < 0.94).any(axis=-1).mean()
    assert nonwhite > 0.02, f"only {nonwhite:.3%} of the pixels are not white"
    assert float(pixels.std()) > 0.05


def _point(point: dict, kernels=(), figures=(), series=()) -> PointData:
    r = Result("w", "k", 100.0, "x", tuple(kernels), tuple(figures), tuple(series))
    return PointData(point, r, None, r.to_dict())


def test_headlines_against_a_swept_field_are_a_nonblank_png(deepep_sweep_dir):
    folder = load_folder(deepep_sweep_dir)
    assert plots.sweep_fields(folder.points, folder.params) == ["num_ranks"]
    published = published_records()
    png = plots.sweep_png(folder.points, "num_ranks", published)
    assert_nonblank_png(png)
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
    assert got == [{"metric": "combine_GBps", "workload": "deepep-normal", "set": {"num_ranks": 32},
                    "published": 123.0, "tolerance_frac": 0.1, "source": "test"}]


def test_a_series_heat_map_is_a_nonblank_png(deepep_run_dir):
    series = load_folder(deepep_run_dir).points[0].result.series
    links = [s for s in series if s.name == "link_util"]
    assert [s.kernel for s in links] == ["dispatch", "combine"]
    assert_nonblank_png(plots.series_png(links))


def test_heat_map_rows_busiest_first_and_grouped():
    rows = {f"l{i}": [i / 10, i / 10] for i in range(10)}
    assert plots.order_rows(rows, 3) == ["l9", "l8", "l7"]
    grouped = {f"rank{r}.{x}": [r / 10 + (x == "urma") / 100] * 2 for r in range(4) for x in ("hbm", "urma")}
    assert plots.order_rows(grouped, 4) == ["rank3.hbm", "rank3.urma", "rank2.hbm", "rank2.urma"]
    s = Series("u", "k", "fraction", (0.0, 10.0, 20.0), rows)
    assert plots.series_png([s], max_rows=3) != plots.series_png([s], max_rows=10)


def test_fraction_bars_group_by_key_prefix():
    pts = [_point({"x": i}, [KernelRecord("gemm", 1.0, figures=(Figure(
        "pipe_busy_frac", {"aic.m": 0.9 - i / 10, "aiv.v": 0.3 + i / 10}, "fraction", headline=True),),
        flat="top")]) for i in range(3)]
    assert plots.fraction_bar_candidates(pts) == [("gemm", "pipe_busy_frac")]
    assert_nonblank_png(plots.fraction_bars_png(pts, "gemm", "pipe_busy_frac"))


def test_roofline_is_a_nonblank_png(gemm_run_dir):
    points = load_folder(gemm_run_dir).points
    assert plots.roofline_points(points)
    assert_nonblank_png(plots.roofline_png(points))


def test_nothing_to_plot_is_a_value_error(deepep_run_dir):
    points = load_folder(deepep_run_dir).points          # DeepEP: no FLOPs, no fraction bars
    assert not plots.roofline_points(points) and not plots.fraction_bar_candidates(points)
    with pytest.raises(ValueError, match="flops"):
        plots.roofline_png(points)
    with pytest.raises(ValueError, match="series"):
        plots.series_png([])
    with pytest.raises(ValueError, match="headline"):
        plots.sweep_png(points, "num_ranks")             # one point: nothing to draw a line of


def test_a_decode_layer_breakdown_is_a_nonblank_png():
    """The decode layer's breakdown_us per point: its main stream stacked kernel by kernel,
    the shared stream and the layer beside it."""
    parts = {"dispatch": 9.0, "gemm1": 66.0, "swiglu": 5.0, "gemm2": 35.0, "combine": 13.0,
             "shared_stream": 55.0, "exposed_comm": 13.0, "layer": 128.0}
    pts = [_point({"tokens_per_rank": t}, figures=[Figure("breakdown_us", {k: v * t for k, v in parts.items()}, "us")])
           for t in (1, 2)]
    assert plots.has_decode(pts)
    assert_nonblank_png(plots.decode_breakdown_png(pts, "decode"))
    assert not plots.has_decode([_point({}, figures=[Figure("layer_ns", 1.0, "ns")])])
