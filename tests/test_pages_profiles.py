"""docs/moe-layer-decode.md, "The reduced form at decode shapes": each figure of the section
is recomputed here as tests/moe/test_profiles.py computes its checks (the reduced form's
replay against the pipe-level engine, 2048 x 2048 per expert) and must be the page's, to its
printed digits: within one unit of the quoted figure's last digit (or 1%)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from simnode.kernels.grouped_gemm import GroupedGemmParams, grouped_gemm_schedule
from simnode.moe import decode_profiles
from tests.moe.test_profiles import CHIP, DECODE_KERNELS, pipe_level, replay, with_hbm, zipf_counts

PAGE = Path(__file__).resolve().parents[1] / "docs" / "moe-layer-decode.md"
TEXT = " ".join(PAGE.read_text().split())
HALF = CHIP.memory.hbm_bandwidth_GBps / 2


def params(kernel: str, counts: tuple) -> GroupedGemmParams:
    return GroupedGemmParams(counts, 2048, 2048, **DECODE_KERNELS[kernel])


@cache
def errors(kernel: str, mean_rows: int) -> tuple[float, float]:
    """The replay's error against the pipe-level engine, % alone and % with half the HBM,
    for 16 zipf-like experts of ``mean_rows`` rows on average."""
    p = params(kernel, zipf_counts(16, mean_rows))
    segs, gap = decode_profiles.segments(CHIP, p)
    alone = replay(segs, CHIP.memory.hbm_bandwidth_GBps, gap_frac=gap)
    slow = with_hbm(CHIP, HALF)
    contended = replay(segs, CHIP.memory.hbm_bandwidth_GBps, competitor_GBps=HALF, gap_frac=gap)
    return (100 * (alone / pipe_level(CHIP, grouped_gemm_schedule(CHIP, p))[0] - 1),
            100 * (contended / pipe_level(slow, grouped_gemm_schedule(slow, p))[0] - 1))


def pipe_us(counts: tuple) -> float:
    return pipe_level(CHIP, grouped_gemm_schedule(CHIP, params("cann-w4a8", counts)))[0] / 1e3


def gap_percent(kernel: str) -> float:
    return 100 * decode_profiles.segments(CHIP, params(kernel, (16,) * 8))[1]


#: (the words before the quoted figure on the page, how the figure is computed)
FIGURES = [
    (r"16 zipf-like experts of 16 rows on average: ", lambda: errors("cann-w4a8", 16)[0]),
    (r"S3's Dequant-B at 16 rows has a gap of ~", lambda: gap_percent("s3-w4a8")),
    (r"CANN's kernel \(4 UB buffers\) ~", lambda: gap_percent("cann-w4a8")),
    (r"16 experts of even rows at 64: ", lambda: pipe_us((64,) * 16)),
    (r"of rows 48, 50, \.\., 78: ", lambda: pipe_us(tuple(range(48, 80, 2)))),
    (r"the replay of uneven experts there is ", lambda: errors("cann-w4a8", 64)[0]),
    (r"there is [-+]?[\d.]+% alone \(", lambda: errors("cann-w4a8", 256)[0]),
    (r"two full blocks\): ", lambda: errors("s3-w8a8", 64)[0]),
    (r"two full blocks\): [-+]?[\d.]+% alone and ", lambda: errors("s3-w8a8", 64)[1]),
    (r"with half the HBM at 64 rows, ", lambda: errors("s3-w8a8", 256)[1]),
]


@pytest.mark.parametrize("before, compute", FIGURES, ids=[f[0] for f in FIGURES])
def test_the_reduced_form_figure_is_what_the_runs_give(before, compute):
    m = re.search(before + r"([-+]?\d+(?:\.\d+)?)", TEXT)
    assert m, f"the page no longer says {before!r}"
    quoted, now = m.group(1), compute()
    unit = 10.0 ** -len(quoted.split(".")[1]) if "." in quoted else 1.0
    assert abs(float(quoted) - now) <= max(unit, 0.01 * abs(now)), \
        f"{before}: the page says {quoted}, the runs {now:.3g}"
