"""Every user mistake of ``simnode calibrate`` and of an overlay: one paragraph naming the
file or option, the key, the value and what was expected; exit 2; nothing runs."""

from __future__ import annotations

import pytest
import yaml

TOPO = "topologies/atlas950-supernode.yaml"


@pytest.fixture
def cases(tmp_path):
    def write(**over):
        case = {"id": "c1", "source": "test", "topology": TOPO, "workload": "workloads/deepep-normal.yaml",
                "set": {"tokens_per_rank": 256}, "metric": "dispatch_GBps", "published": 300.0,
                "tolerance": 0.05}
        case.update(over)
        path = tmp_path / "cases.yaml"
        path.write_text(yaml.safe_dump({"version": 1, "cases": [case]}, sort_keys=False))
        return path
    return write


@pytest.fixture
def calibrate(cli, repo_root, cases):
    def run(*extra, case=None):
        return cli("calibrate", repo_root / TOPO, case or cases(), *extra)
    return run


@pytest.mark.parametrize("spec, needles", [
    ("topology.supernode.urma_payload_GBps", ("--fit", "expected KEY=VALUE")),
    ("topology.supernode.urma_payload_GBps=300", ("--fit: topology.supernode.urma_payload_GBps = '300'",
                                                  "expected LO:HI")),
    ("topology.supernode.urma_payload_GBps=400:200", ("'400:200'", "LO < HI")),
    ("topology.supernode.urma_payload_GBps=a:b", ("'a:b'", "two finite numbers")),
    ("topology.supernode.nosuch=0:1", ("--fit: topology.supernode.nosuch = '0:1'", "bounds the run accepts",
                                       "case 'c1'")),
    ("topology.supernode.urma_payload_GBps=-5:10", ("'-5:10'", "at -5", "a number >= 0")),
    ("topology.supernode.urma_context_cache_entries=0.5:10", ("'0.5:10'", "integer")),
])
def test_a_bad_fit_names_the_key_and_the_bounds(calibrate, user_error, spec, needles):
    user_error(calibrate("--fit", spec), *needles, nothing_ran=True)


def test_a_key_fitted_twice(calibrate, user_error):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400",
                         "--fit", "topology.supernode.urma_payload_GBps=300:400"), "each key once")


def test_no_fit_at_all(calibrate, user_error):
    user_error(calibrate(), "--fit", "at least one --fit KEY=LO:HI", nothing_ran=True)


def test_a_case_on_another_topology(calibrate, cases, user_error):
    path = cases(topology="topologies/ascend950dt.yaml", workload="workloads/gemm-bf16-4096x7168x16384.yaml",
                 set={}, metric="tflops")
    user_error(calibrate("--fit", "topology.chip.aic_freq_GHz=1:2", case=path),
               "case 'c1'", "cases[0].topology = 'topologies/ascend950dt.yaml'",
               "the topology being calibrated", "--only")


def test_an_only_pattern_matching_no_case(calibrate, user_error):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400", "--only", "nope*"),
               "--only", "'nope*'", "c1")


@pytest.mark.parametrize("date", ["2026-13-01", "yesterday"])
def test_a_bad_date(calibrate, user_error, date):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400", "--date", date),
               "--date", repr(date))


def test_a_bad_source_date_epoch(calibrate, user_error, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400"), "SOURCE_DATE_EPOCH",
               "'soon'", "seconds since 1970")


def test_an_output_in_a_missing_folder(calibrate, user_error, tmp_path):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400", "-o",
                         tmp_path / "no" / "o.yaml"), "--output", "an existing folder", nothing_ran=True)


# -- overlays -------------------------------------------------------------------------------

def _overlay(tmp_path, **over):
    body = {"overlay": 1, "topology": TOPO, "values": {"topology.supernode.urma_payload_GBps": 300.0}}
    body.update(over)
    path = tmp_path / "ov.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@pytest.mark.parametrize("over, needles", [
    ({"overlay": 2}, ("overlay = 2", "format version 1")),
    ({"values": [1]}, ("values = [1]", "non-empty mapping")),
    ({"values": {"topology.supernode.urma_payload_GBps": [1]}},
     ("values.topology.supernode.urma_payload_GBps = [1]", "a number, string or boolean")),
    ({"fit": {"cases": [{"id": "x"}]}}, ("fit.cases[0].metric", "this key to be present")),
    ({"nosuch": 1}, ("nosuch = 1", "no such key")),
])
def test_a_malformed_overlay_names_the_file_and_key(calibrate, user_error, tmp_path, over, needles):
    path = _overlay(tmp_path, **over)
    user_error(calibrate("--fit", "topology.supernode.doorbell_ns=0:500", "--topology-overlay", path),
               str(path), *needles)


def test_an_overlay_key_the_run_does_not_have(calibrate, user_error, tmp_path):
    path = _overlay(tmp_path, values={"topology.supernode.urma_payload_GBs": 300.0})
    user_error(calibrate("--fit", "topology.supernode.doorbell_ns=0:500", "--topology-overlay", path),
               str(path), "urma_payload_GBs", "Did you mean 'topology.supernode.urma_payload_GBps'")


def test_a_missing_overlay_file(calibrate, user_error, tmp_path):
    user_error(calibrate("--fit", "topology.supernode.doorbell_ns=0:500", "--topology-overlay",
                         tmp_path / "none.yaml"), "--topology-overlay", "none.yaml", "an existing overlay file")


@pytest.mark.parametrize("start, needles", [
    ("topology.supernode.urma_payload_GBps", ("--start", "expected KEY=VALUE")),
    ("topology.supernode.wqe_processing_ns=20", ("--start: topology.supernode.wqe_processing_ns = '20'",
                                                 "a key fitted with --fit",
                                                 "topology.supernode.urma_payload_GBps")),
    ("topology.supernode.urma_payload_GBps=500", ("'500'", "within the --fit bounds 200..400")),
    ("topology.supernode.urma_payload_GBps=fast", ("'fast'", "within the --fit bounds")),
])
def test_a_bad_start_names_the_key_and_the_bounds(calibrate, user_error, start, needles):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400", "--start", start),
               *needles, nothing_ran=True)


def test_a_start_given_twice(calibrate, user_error):
    user_error(calibrate("--fit", "topology.supernode.urma_payload_GBps=200:400",
                         "--start", "topology.supernode.urma_payload_GBps=250",
                         "--start", "topology.supernode.urma_payload_GBps=260"), "each key once",
               nothing_ran=True)


def test_a_fractional_start_for_an_integer_key(calibrate, user_error):
    user_error(calibrate("--fit", "topology.supernode.urma_context_cache_entries=8:64",
                         "--start", "topology.supernode.urma_context_cache_entries=9.5"),
               "'9.5'", "a whole number", nothing_ran=True)
