"""Chrome Trace Event JSON: the ``Tracer`` on its own, and the trace of a small GEMM
written by ``simnode run --trace``: well-formed events, named processes and threads,
counter tracks, in-order pipes whose spans never overlap, scope filtering and
byte-identical output across runs."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from collections import defaultdict

import pytest

from simnode.cli import main
from simnode.engine.trace import NULL_TRACER, Tracer


def _cli_trace(topology, workload, path, *extra) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", str(topology), str(workload), "--json", "--trace", str(path), *extra])
    assert code == 0
    return out.getvalue()


def _thread_names(events) -> dict:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}


@pytest.fixture(scope="module")
def gemm_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("work") / "gemm-small.yaml"
    path.write_text("kind: gemm\nm: 256\nn: 512\nk: 1024\ndtype: bf16\n")
    return path


@pytest.fixture(scope="module")
def traced(tmp_path_factory, gemm_file, topology_path):
    """(trace dict, --json result dict) of one traced small GEMM."""
    path = tmp_path_factory.mktemp("trace") / "gemm.json"
    out = _cli_trace(topology_path, gemm_file, path)
    return json.loads(path.read_text()), json.loads(out)


# -- the Tracer on its own ---------------------------------------------------------------

def test_tracer_writes_valid_json_with_metadata(tmp_path):
    path = tmp_path / "t.json"
    tr = Tracer(path)
    pid = tr.process("chip0")
    assert tr.process("chip0") == pid == 1                 # metadata written once
    a = tr.thread(pid, "core00.aic.m")
    b = tr.thread(pid, "core00.aic.mte2")
    assert (a, b) == (1, 2) and tr.thread(pid, "core00.aic.m") == 1
    tr.span(pid, a, "mmad", 1000.0, 310.30303, {"m": 128})
    tr.counter(pid, "HBM bandwidth", 500.0, {"GB/s": 1.5})
    tr.flow("s", 7, pid, a, 1000.0)
    tr.flow("f", 7, pid, b, 2000.0)
    tr.close()
    tr.close()                                              # idempotent
    data = json.loads(path.read_text())
    assert data["displayTimeUnit"] == "ns"
    ev = data["traceEvents"]
    assert tr.events_written == len(ev) == 2 + 4 + 4
    span = next(e for e in ev if e["ph"] == "X")
    assert span == {"ph": "X", "pid": 1, "tid": 1, "name": "mmad", "ts": 1.0, "dur": 0.3103,
                    "args": {"m": 128}}
    counter = next(e for e in ev if e["ph"] == "C")
    assert counter["ts"] == 0.5 and counter["args"] == {"GB/s": 1.5}
    s, f = [e for e in ev if e["ph"] in "sf"]
    assert (s["id"], f["id"], f["bp"], s["ts"], f["ts"]) == (7, 7, "e", 1.0, 2.0)
    names = _thread_names(ev)
    assert names == {(1, 1): "core00.aic.m", (1, 2): "core00.aic.mte2"}


def test_tracer_scope_filter(tmp_path):
    tr = Tracer(tmp_path / "t.json", ["core01.*"])
    pid = tr.process("chip0")
    assert tr.thread(pid, "core00.aic.m") is None
    assert tr.thread(pid, "core01.aic.m") == 1              # tids count traced threads only
    assert tr.thread(pid, "core00.aic.mte2") is None
    tr.close()
    names = _thread_names(json.loads((tmp_path / "t.json").read_text())["traceEvents"])
    assert list(names.values()) == ["core01.aic.m"]


def test_null_tracer_is_off():
    assert not NULL_TRACER.enabled
    assert NULL_TRACER.thread(NULL_TRACER.process("chip0"), "core00.aic.m") is None


# -- a GEMM's trace through the CLI -------------------------------------------------------

def test_trace_events_are_well_formed(traced):
    data, _ = traced
    assert data["displayTimeUnit"] == "ns"
    events = data["traceEvents"]
    assert events
    for e in events:
        assert e["ph"] in ("X", "C", "M", "s", "f"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert isinstance(e["name"], str) and e["name"], e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e


def test_trace_names_processes_and_pipes(traced):
    data, _ = traced
    events = data["traceEvents"]
    procs = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert procs == ["chip0"]
    names = set(_thread_names(events).values())
    assert {"core00.aic.mte2", "core00.aic.mte1", "core00.aic.m", "core00.aic.fix"} <= names
    # 256x512 in blocks chosen by the heuristic: every used core has its four AIC pipes
    cores = {n.split(".")[0] for n in names}
    assert all({f"{c}.aic.mte2", f"{c}.aic.m"} <= names for c in cores)
    tids_with_spans = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    assert tids_with_spans <= set(_thread_names(events))    # no span on an unnamed thread


def test_trace_has_bandwidth_counters(traced, chip):
    data, result = traced
    counters = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "C" and "bandwidth" in e["name"]:
            counters[e["name"]].append(e)
    assert set(counters) == {"L2 bandwidth", "HBM bandwidth"}
    caps = {"L2 bandwidth": chip.memory.l2_bandwidth_GBps,
            "HBM bandwidth": chip.memory.hbm_bandwidth_GBps}
    end_us = result["makespan_ns"] / 1000
    for name, evs in counters.items():
        values = [e["args"]["GB/s"] for e in evs]
        assert all(0 <= v <= caps[name] + 1e-6 for v in values), name
        assert max(values) > 0
        assert values[-1] == 0.0                            # idle once the last transfer ends
        assert all(e["ts"] <= end_us for e in evs)
        assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs)


def test_trace_has_an_mte2_queue_counter_per_unit(traced, chip):
    data, _ = traced
    depth = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "C" and e["name"].endswith("MTE2 outstanding"):
            depth[e["name"]].append(e["args"]["requests"])
    assert "core00.aic MTE2 outstanding" in depth
    for values in depth.values():
        assert 0 <= min(values) and max(values) <= chip.sync.mte2_outstanding_per_aic
        assert values[-1] == 0


def test_copy_spans_carry_bytes_and_completion(traced):
    data, result = traced
    names = _thread_names(data["traceEvents"])
    copies = [e for e in data["traceEvents"] if e["ph"] == "X" and "path" in e.get("args", {})]
    assert {e["args"]["path"] for e in copies} == {"gm_to_l1", "l1_to_l0", "l0c_to_gm"}
    for e in copies:
        assert e["args"]["bytes"] > 0
        assert e["args"]["done_us"] >= e["ts"] + e["dur"] - 2e-4     # completes after it streams
        assert e["args"]["done_us"] <= result["makespan_ns"] / 1000 + 1e-4
        assert names[(e["pid"], e["tid"])].endswith({"gm_to_l1": "mte2", "l1_to_l0": "mte1",
                                                      "l0c_to_gm": "fix"}[e["args"]["path"]])


def _worst_overlap_us(events) -> tuple[float, str]:
    names = _thread_names(events)
    spans = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            spans[(e["pid"], e["tid"])].append(e)
    worst, where = 0.0, ""
    for key, evs in spans.items():
        evs.sort(key=lambda e: e["ts"])
        for a, b in zip(evs, evs[1:]):
            over = a["ts"] + a["dur"] - b["ts"]
            if over > worst:
                worst, where = over, f"{names[key]}: {a} then {b}"
    return worst, where


def test_pipe_spans_never_overlap(traced):
    """An in-order pipe runs one instruction at a time, so its spans are disjoint in the
    file too (ts and dur are printed to 0.1 ns: dur is rounded end - rounded start)."""
    worst, where = _worst_overlap_us(traced[0]["traceEvents"])
    assert worst <= 1e-6, where


def test_trace_scope_keeps_only_matching_threads(tmp_path, gemm_file, topology_path, traced):
    path = tmp_path / "scoped.json"
    out = _cli_trace(topology_path, gemm_file, path, "--trace-scope", "core00.*")
    events = json.loads(path.read_text())["traceEvents"]
    names = _thread_names(events)
    assert sorted(names.values()) == ["core00.aic.fix", "core00.aic.m", "core00.aic.mte1",
                                      "core00.aic.mte2"]
    assert {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"} <= set(names)
    full = [e for e in traced[0]["traceEvents"] if e["ph"] == "X"]
    full_names = _thread_names(traced[0]["traceEvents"])
    core00 = [e for e in full if full_names[(e["pid"], e["tid"])].startswith("core00.")]
    assert len([e for e in events if e["ph"] == "X"]) == len(core00)
    assert json.loads(out)["makespan_ns"] == traced[1]["makespan_ns"]   # tracing changes nothing


def test_traced_runs_are_byte_identical(tmp_path, gemm_file, topology_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    out_a = _cli_trace(topology_path, gemm_file, a)
    out_b = _cli_trace(topology_path, gemm_file, b)
    assert a.read_bytes() == b.read_bytes()
    assert out_a == out_b


def test_a_gz_trace_is_the_same_json_compressed_and_byte_identical_across_runs(
        tmp_path, gemm_file, topology_path, traced):
    plain = tmp_path / "t.json"
    a, b = tmp_path / "a" / "t.json.gz", tmp_path / "b" / "t.json.gz"
    a.parent.mkdir()
    b.parent.mkdir()                     # another folder and time: the header names neither
    _cli_trace(topology_path, gemm_file, plain)
    _cli_trace(topology_path, gemm_file, a)
    _cli_trace(topology_path, gemm_file, b)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes()[:2] == b"\x1f\x8b"                    # gzip magic
    assert gzip.decompress(a.read_bytes()) == plain.read_bytes()
    assert a.stat().st_size < plain.stat().st_size / 4


def test_a_heavy_plain_trace_gets_a_note_on_stderr_and_a_gz_one_does_not(
        tmp_path, gemm_file, topology_path, monkeypatch, capsys):
    import simnode.commands.run
    monkeypatch.setattr(simnode.commands.run, "HEAVY_TRACE_BYTES", 1000)   # the small GEMM's trace is larger
    _cli_trace(topology_path, gemm_file, tmp_path / "t.json")
    err = capsys.readouterr().err
    assert "simnode: note: trace" in err and "*.json.gz" in err and "--trace-scope" in err
    _cli_trace(topology_path, gemm_file, tmp_path / "t.json.gz")
    assert capsys.readouterr().err == ""
