"""``simnode report``: user mistakes found by fuzzing, each one paragraph on stderr naming the
file or option, the field, the value and what was expected, exit 2, no traceback.

- corrupted result folders: fields of another type (result.json's typed record, series.json,
  sweep.json), files that are not UTF-8 or not JSON, sweep points outside the sweep folder;
- a sweep whose points are of different kinds is not an error: its page is drawn;
- bad output paths (``-o``): empty, an existing folder, a missing folder, a write that fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from simnode.report import html



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

def _kernel(r, i=0):
    return r["kernels"][i]


def _figure(r, name, i=0):
    return next(f for f in _kernel(r, i)["figures"] if f["name"] == name)


@pytest.mark.parametrize("change, needles", [
    (lambda r: r.update(kind=5, makespan_ns="x"), ["kind = 5", "expected a string"]),
    (lambda r: r.update(makespan_ns="x"), ["makespan_ns = 'x'", "expected a number"]),
    (lambda r: r.update(roofline_ns=[1, 2]), ["roofline_ns = '<a JSON list of 2 items>'", "a number or null"]),
    (lambda r: r.update(bottleneck=None), ["bottleneck = None", "expected a string"]),
    (lambda r: r.update(bottleneck_util_frac="x"), ["bottleneck_util_frac = 'x'", "a number or null"]),
    (lambda r: r.update(seed=1.5), ["seed = 1.5", "an integer or null"]),
    (lambda r: r.update(kernels="abc"), ["kernels = 'abc'", "a list of kernel records"]),
    (lambda r: _kernel(r).update(time_ns=float("nan")), ["kernels[0].time_ns = nan", "a number (ns)"]),
    (lambda r: _kernel(r).update(flat="sideways"), ["kernels[0].flat = 'sideways'", "one of prefixed, top"]),
    (lambda r: _figure(r, "tflops").update(value=[[1]]), ["kernels[0].figures[1].value",
                                                          "a number, string or bool, a mapping of them"]),
    (lambda r: _figure(r, "hbm_bytes").update(value=2**63), ["kernels[0].figures[6].value = 9223372036854775808"]),
    (lambda r: _figure(r, "tflops").update(unit=None), ["kernels[0].figures[1].unit = None", "a unit (string)"]),
    (lambda r: _figure(r, "tflops").pop("name"), ["kernels[0].figures[1].name = '<missing>'"]),
    (lambda r: _figure(r, "pipe_busy_frac").update(value={"aic.m": [1]}),
     ["kernels[0].figures[2].value = '<a JSON object of 1 entries>'"]),
    (lambda r: _figure(r, "tflops").update(headline="yes"), ["kernels[0].figures[1].headline = 'yes'",
                                                             "true or false"]),
])
def test_result_field_of_another_type(gemm_run_dir, cli, error, change, needles):
    edit_json(gemm_run_dir / "result.json", change)
    err = error(cli("report", gemm_run_dir), str(gemm_run_dir / "result.json"), *needles)
    assert "was the file edited or corrupted?" in err
    assert not (gemm_run_dir / "report.html").exists()


@pytest.mark.parametrize("change, needles", [
    (lambda r: _figure(r, "hottest_links", 1).update(value=[{"link": "a", "bytes": [1]}]),
     ["kernels[1].figures[9].value = '<a JSON list of 1 items>'"]),
    (lambda r: r["figures"][0].update(value=None), ["figures[0].value = None"]),
    (lambda r: _kernel(r, 1).pop("time_ns"), ["kernels[1].time_ns = '<missing>'", "a number (ns)"]),
])
def test_network_result_field_of_another_type(deepep_run_dir, cli, error, change, needles):
    edit_json(deepep_run_dir / "result.json", change)
    error(cli("report", deepep_run_dir), str(deepep_run_dir / "result.json"), *needles)


def _per_rank(record):
    return next(f for f in record["figures"] if f["name"] == "per_rank")


@pytest.mark.parametrize("change, needles", [
    (lambda r: _per_rank(r).update(value={"compute_ns": [1.0, 2.0]}),
     ["value = '<a JSON object", "a number, string or bool, a mapping of them, or a list of records"]),
    (lambda r: _per_rank(r).update(value=[{"rank": 0, "compute_ns": [1.0]}]),
     ["value = '<a JSON list of 1 item", "a list of records"]),
])
def test_layer_result_field_of_another_type(layer_sweep_dir, cli, error, change, needles):
    point = layer_sweep_dir / "points" / "001" / "result.json"
    edit_json(point, change)
    error(cli("report", layer_sweep_dir), str(point), *needles)


# -- series.json ------------------------------------------------------------------------------

@pytest.mark.parametrize("change, needles", [
    (lambda s: s[0]["rows"].update({next(iter(s[0]["rows"])): ["a"] * (len(s[0]["bin_edges_ns"]) - 1)}),
     ["[0].rows.", "[0] = 'a'", "expected a number (fraction)"]),
    (lambda s: s[1].update(bin_edges_ns=["0"] * 13), ["[1].bin_edges_ns[0] = '0'",
                                                      "expected a number (time bin edge in ns)"]),
    (lambda s: s[2].update(name=3), ["[2].name = 3", "expected a string"]),
    (lambda s: s.append({"name": "x"}), ["[4] = '<malformed>'"]),
])
def test_series_of_another_type(deepep_run_dir, cli, error, change, needles):
    edit_json(deepep_run_dir / "series.json", change)
    error(cli("report", deepep_run_dir), str(deepep_run_dir / "series.json"), *needles)


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
    """A chip point among DeepEP points: every kind's tables and plots on one page."""
    (deepep_sweep_dir / "points" / "002").mkdir()
    (deepep_sweep_dir / "points" / "002" / "result.json").write_text(json.dumps(gemm_result))
    edit_json(deepep_sweep_dir / "sweep.json",
              lambda s: s["points"].append({"point": {"num_ranks": 32}, "dir": "points/002"}))
    edit_json(deepep_sweep_dir / "sweep.json", lambda s: s["params"].update(num_ranks=[8, 16, 32]))
    res = cli("report", deepep_sweep_dir)
    assert res.code == 0, res.err
    page = (deepep_sweep_dir / "report.html").read_text()
    assert "(deepep/gemm sweep)" in page
    for alt in ("headline figures against num_ranks", "gemm pipe_busy_frac", "roofline position"):
        assert f'alt="{alt}"' in page
    assert page.count('alt="link_util') == 2 and "Kernel gemm" in page and "Kernel dispatch" in page


def test_what_the_checks_miss_names_the_point(deepep_sweep_dir, cli, error, monkeypatch):
    """A field combination the checks let through and the page cannot draw: a user error
    naming the point's result.json (not a traceback)."""
    real = html.kernel_group

    def fragile(points, kernel):
        if any(p.point.get("num_ranks") == 16 for p in points):
            raise TypeError("unsupported operand")
        return real(points, kernel)
    monkeypatch.setattr(html, "kernel_group", fragile)
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

