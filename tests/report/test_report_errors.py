"""``simnode report``: user mistakes found by fuzzing, each one paragraph on stderr naming the
file or option, the field, the value and what was expected, exit 2, no traceback.

- corrupted result folders: fields of another type (result.json, network_util.json,
  sweep.json), files that are not UTF-8 or not JSON, sweep points outside the sweep folder;
- a sweep whose points are of different kinds is not an error: its page is drawn;
- bad output paths (``-o``): empty, an existing folder, a missing folder, a write that fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simnode.report import html, plots
from simnode.report.folder import load_folder



@pytest.fixture
def error(user_error):
    """user_error, and the message (for further checks)."""
    def check(res, *needles: str) -> str:
        assert "Traceback" not in res.err
        user_error(res, *needles, nothing_ran=True)
        return res.err
    return check


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# -- result.json: fields of another type ----------------------------------------------------

@pytest.mark.parametrize("change, needles", [
    ({"kind": 5, "makespan_ns": "x"}, ["kind = 5", "expected a string"]),
    ({"makespan_ns": "x"}, ["makespan_ns = 'x'", "expected a number"]),
    ({"roofline_ns": [1, 2]}, ["roofline_ns = '<a JSON list of 2 items>'", "expected a number"]),
    ({"l2_util_frac": float("nan")}, ["l2_util_frac = nan", "expected a number"]),
    ({"hbm_bytes": 2**63}, [f"hbm_bytes = {2**63}", "expected a number"]),
    ({"tflops": True}, ["tflops = True", "expected a number"]),
    ({"bottleneck": None}, ["bottleneck = None", "expected a string"]),
    ({"pipe_busy_frac": "abc"}, ["pipe_busy_frac = 'abc'", "expected an object {name: busy fraction}"]),
    ({"pipe_busy_frac": {"aic.m": "x"}}, ["pipe_busy_frac.aic.m = 'x'", "expected busy fraction"]),
    ({"busiest_pipe_by_unit": {"aic": 3}}, ["busiest_pipe_by_unit.aic = 3", "expected pipe name"]),
    ({"bottleneck_util_frac": "x"}, ["bottleneck_util_frac = 'x'", "a number (busy fraction) or null"]),
])
def test_chip_result_field_of_another_type(gemm_run_dir, cli, error, change, needles):
    edit_json(gemm_run_dir / "result.json", lambda r: r.update(change))
    err = error(cli("report", gemm_run_dir), str(gemm_run_dir / "result.json"), *needles)
    assert "was the file edited or corrupted?" in err
    assert not (gemm_run_dir / "report.html").exists()


def _drop(key):
    return lambda r: r.pop(key)


@pytest.mark.parametrize("change, needles", [
    (lambda r: r.update(dispatch_hottest_links="abc"),
     ["dispatch_hottest_links = 'abc'", 'expected a list of {"link": name']),
    (lambda r: r["combine_hottest_links"][1].update(bytes="x"),
     ["combine_hottest_links[1].bytes = 'x'", "expected a number (bytes)"]),
    (lambda r: r["dispatch_hottest_links"][0].pop("link"),
     ["dispatch_hottest_links[0].link = '<missing>'", "expected a link name (string)"]),
    (lambda r: r.update(combine_phases_us="abc"), ["combine_phases_us = 'abc'", "{name: time in us}"]),
    (lambda r: r["dispatch_phases_us"].update(x="y"), ["dispatch_phases_us.x = 'y'", "expected time in us"]),
    (lambda r: r.update(dispatch_chip_util_frac=[0.5]), ["dispatch_chip_util_frac = '<a JSON list of 1 items>'"]),
    (lambda r: r.update(combine_chip_busiest={"hbm": 1}), ["combine_chip_busiest.hbm = 1", "expected resource name"]),
    (lambda r: r.update(dispatch_GBps="fast"), ["dispatch_GBps = 'fast'", "expected a number"]),
    (_drop("bound_combine_ns"), ["bound_combine_ns = '<missing>'", "every deepep result with combine_ns"]),
    (lambda r: r.update(num_ranks="8"), ["num_ranks = '8'", "a positive integer"]),
])
def test_network_result_field_of_another_type(deepep_run_dir, cli, error, change, needles):
    edit_json(deepep_run_dir / "result.json", change)
    error(cli("report", deepep_run_dir), str(deepep_run_dir / "result.json"), *needles)


@pytest.mark.parametrize("change, needles", [
    (lambda r: r.update(per_rank=[1, 2]), ["per_rank = '<a JSON list of 2 items>'",
                                           "a mapping of per-rank number lists"]),
    (lambda r: r["per_rank"].update(compute_ns=[1.0, "x", 2.0, 3.0]),
     ["per_rank.compute_ns[1] = 'x'", "a number (one per rank)"]),
])
def test_layer_result_field_of_another_type(layer_sweep_dir, cli, error, change, needles):
    point = layer_sweep_dir / "points" / "001" / "result.json"
    edit_json(point, change)
    error(cli("report", layer_sweep_dir), str(point), *needles)


# -- network_util.json ------------------------------------------------------------------------

def _first_link(u):
    return next(iter(u["dispatch"]["links"]))


@pytest.mark.parametrize("change, needles", [
    (lambda u: u["dispatch"]["links"].update({_first_link(u): ["a"] * 12}),
     ["dispatch.links.", "[0] = 'a'", "expected a number (busy fraction)"]),
    (lambda u: u["combine"].update(bin_edges_ns=["0"] * 13),
     ["combine.bin_edges_ns[0] = '0'", "expected a number (time bin edge in ns)"]),
    (lambda u: u["combine"].update(chip={"hbm": [0.1] * 12}),
     ["combine.chip.hbm = 'hbm'", 'a series named "rankR.resource"']),
])
def test_network_util_of_another_type(deepep_run_dir, cli, error, change, needles):
    edit_json(deepep_run_dir / "network_util.json", change)
    error(cli("report", deepep_run_dir), str(deepep_run_dir / "network_util.json"), *needles)


# -- files that are not UTF-8 JSON ------------------------------------------------------------

@pytest.mark.parametrize("name", ["result.json", "config.json"])
def test_file_that_is_not_utf8_is_an_error(gemm_run_dir, cli, error, name):
    (gemm_run_dir / name).write_bytes(b"\xff\xfe\x00{\x80garbage")
    error(cli("report", gemm_run_dir), str(gemm_run_dir / name),
          "'<not UTF-8 text: byte 0xff at offset 0>'", "expected UTF-8 JSON text")


@pytest.mark.parametrize("text, needle", [
    ('{"kind": "gemm", ', "'<invalid JSON at line 1 column 18"),
    ("[" * 100_000, "'<JSON nested too deeply to read>'"),
    ("[1, 2]", "'<a JSON list>': expected a JSON object holding a run result"),
])
def test_result_that_is_not_a_json_object_is_an_error(deepep_sweep_dir, cli, error, text, needle):
    path = deepep_sweep_dir / "points" / "001" / "result.json"
    path.write_text(text)
    err = error(cli("report", deepep_sweep_dir), str(path), needle)
    assert "was the file edited or corrupted?" in err


# -- sweep.json -------------------------------------------------------------------------------

@pytest.mark.parametrize("outside", ["../run_d", "points/../../run_d", "ABSOLUTE"])
def test_sweep_point_outside_the_sweep_folder_is_an_error(deepep_sweep_dir, gemm_run_dir, cli, error, outside):
    run_d = gemm_run_dir.rename(deepep_sweep_dir.parent / "run_d")     # a valid run, outside the sweep
    target = str(run_d) if outside == "ABSOLUTE" else outside
    edit_json(deepep_sweep_dir / "sweep.json", lambda s: s["points"][1].update(dir=target))
    error(cli("report", deepep_sweep_dir), str(deepep_sweep_dir / "sweep.json"),
          f"points[1].dir = {target!r}", "expected a folder inside the sweep folder")


def test_sweep_params_that_are_not_lists_is_an_error(deepep_sweep_dir, cli, error):
    edit_json(deepep_sweep_dir / "sweep.json", lambda s: s["params"].update(num_ranks=8))
    error(cli("report", deepep_sweep_dir), str(deepep_sweep_dir / "sweep.json"),
          "params.num_ranks = 8", "expected a list of the swept values")


def test_sweep_of_mixed_kinds_is_drawn(deepep_sweep_dir, gemm_result, cli):
    """A chip point among DeepEP points: its tables and plots, and the DeepEP bandwidth plot
    of the points that have an EP size."""
    (deepep_sweep_dir / "points" / "002").mkdir()
    (deepep_sweep_dir / "points" / "002" / "result.json").write_text(json.dumps(gemm_result))
    edit_json(deepep_sweep_dir / "sweep.json",
              lambda s: s["points"].append({"point": {"num_ranks": 32}, "dir": "points/002"}))
    res = cli("report", deepep_sweep_dir)
    assert res.code == 0, res.err
    page = (deepep_sweep_dir / "report.html").read_text()
    assert "(deepep/gemm sweep)" in page
    for alt in ("bandwidth vs EP size", "pipe busy fractions", "roofline position"):
        assert f'alt="{alt}"' in page
    assert page.count('alt="link utilization') == 2


def test_bandwidth_plot_leaves_out_points_without_an_ep_size(deepep_sweep_dir, gemm_run_dir):
    points = load_folder(deepep_sweep_dir).points
    chip = load_folder(gemm_run_dir).points
    assert plots.bandwidth_points(chip + points) == points
    assert plots.bandwidth_vs_ep_png(chip + points) == plots.bandwidth_vs_ep_png(points)
    dispatch_only = [type(p)(p.point, {k: v for k, v in p.result.items() if not k.startswith("combine")})
                     for p in points[:1]]
    assert plots.has_bandwidth(dispatch_only + points[1:])
    plots.bandwidth_vs_ep_png(dispatch_only + points[1:])        # combine of one point only: drawn


def test_what_the_checks_miss_names_the_point(deepep_sweep_dir, cli, error, monkeypatch):
    """A field combination the checks let through and the page cannot draw: a user error
    naming the point's result.json (not a traceback)."""
    real = html.network_kernel_bottleneck

    def fragile(result, kernel):
        if result["num_ranks"] == 16:
            raise TypeError("unsupported operand")
        return real(result, kernel)
    monkeypatch.setattr(html, "network_kernel_bottleneck", fragile)
    error(cli("report", deepep_sweep_dir), str(deepep_sweep_dir / "points" / "001" / "result.json"),
          "'<TypeError: unsupported operand>'", "with the fields the report reads")


# -- RESULT_DIR and -o --------------------------------------------------------------------------

def test_empty_result_dir_is_an_error(cli, error):
    error(cli("report", ""), "RESULT_DIR = ''", "expected the path of a folder written by `simnode run --out`")


def test_empty_output_is_an_error(gemm_run_dir, cli, error):
    error(cli("report", gemm_run_dir, "-o", ""), "-o: output = ''", "expected the path of the HTML file")
    assert not (gemm_run_dir / "report.html").exists()


def test_output_is_checked_before_the_folder_is_read(tmp_path, cli, error):
    error(cli("report", tmp_path / "nope", "-o", ""), "-o: output = ''")
    error(cli("report", tmp_path / "nope", "-o", tmp_path), f"-o: output = '{tmp_path}'")


def test_output_that_is_a_folder_is_an_error(gemm_run_dir, tmp_path, cli, error):
    error(cli("report", gemm_run_dir, "-o", tmp_path), f"-o: output = '{tmp_path}'",
          "expected the path of a file, not of an existing folder", str(tmp_path / "report.html"))
    error(cli("report", gemm_run_dir, "-o", f"{tmp_path}/new/"), "ends in a slash")


def test_default_output_that_is_a_folder_is_an_error(gemm_run_dir, cli, error):
    (gemm_run_dir / "report.html").mkdir()
    error(cli("report", gemm_run_dir), "-o (default RESULT_DIR/report.html)", str(gemm_run_dir / "report.html"))


def test_output_in_a_missing_folder_names_it(gemm_run_dir, tmp_path, cli, error):
    error(cli("report", gemm_run_dir, "-o", tmp_path / "no" / "r.html"),
          f"-o: output = '{tmp_path / 'no' / 'r.html'}'", f"({tmp_path / 'no'} is not one)")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_write_failure_is_an_error(gemm_run_dir, cli, error):
    error(cli("report", gemm_run_dir, "-o", "/dev/full"), "-o: output = '/dev/full'",
          "expected a file the report can be written to (No space left on device)")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_output_where_no_file_can_be_made_is_an_error(gemm_run_dir, cli, error):
    error(cli("report", gemm_run_dir, "-o", "/proc/simnode-report.html"),
          "-o: output = '/proc/simnode-report.html'", "expected a file the report can be written to (")

