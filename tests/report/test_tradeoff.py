"""A trade-off a kind declares on a figure (decode: TPOT against tokens/s per chip, with its
SLO lines) survives the result's typed form and is drawn by the report of a sweep."""

from __future__ import annotations

import json

from simnode.report import plots
from simnode.report.folder import load_folder
from simnode.report.result import Result, fig, from_record

TOPOLOGY = "topologies/atlas950-supernode.yaml"
FLASH = "workloads/v4-flash-decode.yaml"


def test_a_trade_off_survives_the_typed_form_and_only_it_carries_the_keys():
    r = Result("w", "k", 1.0, "", figures=(
        fig("tpot_ms", 5.0, "ms", against="tokens_per_s_per_chip", limits=(10, 20)),
        fig("tokens_per_s_per_chip", 100.0, "tokens/s")))
    rec = r.to_record()
    assert rec["figures"][0]["against"] == "tokens_per_s_per_chip" and rec["figures"][0]["limits"] == [10, 20]
    assert "against" not in rec["figures"][1] and "limits" not in rec["figures"][1]
    back = from_record(json.loads(json.dumps(rec)))
    assert back.figures[0].against == "tokens_per_s_per_chip" and back.figures[0].limits == (10, 20)


def test_a_decode_sweep_report_draws_tpot_against_throughput_with_the_slos(cli, repo_root, tmp_path):
    out = tmp_path / "sweep"
    res = cli("sweep", repo_root / TOPOLOGY, repo_root / FLASH, "--param", "global_batch=16,64",
              "--set", "num_layers=1", "--set", "next_n=0", "--set", "accepted_tokens=0", "--out", out)
    assert res.code == 0, res.err
    folder = load_folder(out)
    assert plots.tradeoff_candidates(folder.points) == [("tpot_ms", "tokens_per_s_per_chip", (10.0, 20.0, 50.0))]
    png = plots.tradeoff_png(folder.points, "global_batch", "tpot_ms", "tokens_per_s_per_chip", (10, 20, 50))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = tmp_path / "report.html"
    rep = cli("report", out, "-o", page)
    assert rep.code == 0, rep.err
    html = page.read_text()
    assert 'alt="tpot_ms against tokens_per_s_per_chip"' in html and "dashed lines at 10, 20, 50" in html
