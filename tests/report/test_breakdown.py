"""simnode.report.breakdown: a run's time split into parts is found by what adds up, never by
a kind's or a figure's name (a MoE layer's straggler split and per-rank records; a step's
mapping of critical-path lines), and drawn in the summary of the page."""

from __future__ import annotations

import json

from simnode.report import timeplots
from simnode.report.breakdown import record_split, run_split, time_axis
from simnode.report.folder import PointData, load_folder
from simnode.report.html import write_report
from simnode.report.result import KernelRecord, Result, fig


def _step(batch: int) -> Result:
    """A kind the report has never heard of: its step in lines that add up (in us), a figure
    in us that does not, and per-chip records with their own field names."""
    lines = {"attention": 900.0 + batch, "moe": 1200.0, "exposed communication": 300.0, "launch gaps": 100.0}
    step_ns = sum(lines.values()) * 1e3
    chips = [{"chip": c, "busy_us": 2000.0 + 10 * c, "idle_us": step_ns / 1e3 - 2000.0 - 10 * c,
              "end_us": step_ns / 1e3, "tokens": 16} for c in range(40)]
    header = (fig("critical_us", lines, "us", "the slowest chip's main stream, split"),
              fig("stream_busy_us", {"main": 2000.0, "side": 500.0}, "us"),
              fig("per_chip", chips, "", "every chip's busy and idle time"),
              fig("slowest_chip", 39, "rank", "the chip that ends last"),
              fig("tpot_ms", 3.0, "ms", headline=True))
    k = KernelRecord("attention", 900e3, 800e3, "hbm", 0.9, (fig("GBps", 1000.0 + batch, "GB/s", headline=True),))
    return Result("step", "some_step", step_ns, "attention", (k,), header)


def _point(point: dict, r: Result) -> PointData:
    return PointData(point, r, None, r.to_dict())


def test_a_mapping_in_a_time_unit_that_adds_up_is_the_split():
    s = run_split(_step(16))
    assert s.figure == "critical_us" and s.parts == ("attention", "moe", "exposed communication", "launch gaps")
    assert s.values_ns == (916e3, 1200e3, 300e3, 100e3) and s.total_ns == sum(s.values_ns)


def test_records_whose_fields_add_up_split_per_record():
    rs = record_split(_step(16))
    assert (rs.figure, rs.parts, rs.total, rs.key) == ("per_chip", ("busy_us", "idle_us"), "end_us", "chip")
    assert rs.marks == (("slowest_chip", 39),) and len(rs.records) == 40


def test_what_does_not_add_up_is_no_split():
    r = Result("x", "k", 1000.0, "b", (), (fig("phase_us", {"a": 0.3, "b": 0.3}, "us"),
                                          fig("compute_ns", 600.0), fig("comm_ns", 300.0),
                                          fig("rows", [{"rank": 0, "a_ns": 1.0, "b_ns": 2.0, "end_ns": 9.0},
                                                       {"rank": 1, "a_ns": 1.0, "b_ns": 2.0, "end_ns": 3.0}])))
    assert run_split(r) is None and record_split(r) is None


def test_a_moe_layer_splits_its_straggler_and_every_rank(layer_sweep_dir):
    for p in load_folder(layer_sweep_dir).points:
        s, rs = run_split(p.result), record_split(p.result)
        assert s.parts == ("compute_ns", "exposed_comm_ns", "imbalance_wait_ns")
        assert abs(sum(s.values_ns) - p.result.makespan_ns) < 1e-6 * p.result.makespan_ns
        assert (rs.figure, rs.total, rs.key) == ("per_rank", "end_ns", "rank") and rs.parts == s.parts
        assert rs.marks == (("straggler_rank", p.flat["straggler_rank"]),)


def test_split_plots_are_nonblank_and_summarize_past_max_ranks(nonblank):
    a, b = _point({"batch": 16}, _step(16)), _point({"batch": 64}, _step(64))
    nonblank(timeplots.split_bars_png([a, b]))
    nonblank(timeplots.split_png(a))
    wide = timeplots.rank_strip_png(a)                       # 40 chips: 32 bars and one of the mean of 8
    nonblank(wide)
    assert wide != timeplots.rank_strip_png(a, max_ranks=40)
    assert time_axis(9.99e6) == (1e3, "us") and time_axis(1e7) == (1e6, "ms")


def test_the_page_of_an_unknown_kind_draws_its_split_in_the_summary(tmp_path):
    index = []
    for i, batch in enumerate((16, 64)):
        d = tmp_path / "points" / f"{i:03d}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps(_step(batch).to_record()))
        index.append({"point": {"batch": batch}, "dir": f"points/{i:03d}"})
    (tmp_path / "sweep.json").write_text(json.dumps({"params": {"batch": [16, 64]}, "points": index}))
    page = write_report(tmp_path).read_text()
    summary = page[page.index('<section id="summary"'):page.index("</section>")]
    assert 'alt="headline figures against batch"' in summary and 'alt="time split per run"' in summary
    assert "(the figure critical_us)" in summary
    assert page.count('alt="per-rank breakdown') == 2 and "slowest_chip 39" in page
