"""Band rows: per point and figure, the lowest and highest of the overlays' values."""

from simnode.calibrate.band import band_columns, band_rows, format_band_rows


def test_band_rows_take_the_extremes_and_keep_each_overlay():
    points = [{"num_ranks": 8}, {"num_ranks": 16}]
    values = {(0, "a"): {"dispatch_GBps": 370.0}, (0, "b"): {"dispatch_GBps": 372.0},
              (1, "a"): {"dispatch_GBps": 340.0}, (1, "b"): {"dispatch_GBps": 355.5}}
    rows = band_rows(points, ["dispatch_GBps"], values, ["a", "b"])
    assert rows[1].figures["dispatch_GBps"] == (340.0, 355.5, {"a": 340.0, "b": 355.5})
    text = format_band_rows(rows, ["a", "b"])
    assert "16" in text and "340.0" in text and "355.5" in text
    assert band_columns("dispatch_GBps") == ("dispatch_GBps_lo", "dispatch_GBps_hi")


def test_a_figure_one_overlay_lacks_is_left_out():
    rows = band_rows([{"x": 1}], ["f"], {(0, "a"): {"f": 1.0}, (0, "b"): {}}, ["a", "b"])
    assert rows[0].figures == {}

