"""Time every distinct kernel of a V4 decode step with today's simnode models and sum a step.

    python docs/decode_measure.py topologies/ascend950dt.yaml OUT.json

For the two published V4-Flash rows (16 950DT chips, Hybrid MXFP8-MXFP4, context 8192:
global batch 16 with next_n 3, and 2880 with next_n 1; simnode.decode.deployment presets),
each distinct kernel of ``simnode.decode.kernels.step_segments`` is run once with the kind
that models it (``simnode run <topology> <preset workload> --set ... --json``), or, where
simnode has no model, bounded by its roofline at the chip's rates; MoE dispatch and combine
(no model yet: issue 33) are an estimate scaled from the A3 low-latency figures
(``comm_estimate_us``, marked as such). The step is the sum over segments of
launches x time, in three forms: every kernel back to back (serial), the side streams'
kernels hidden (streams), and the streams form plus a per-launch gap (``GAP_US``). A
measurement to read, not a model: its numbers go to the decode-step design note.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from simnode.config.chip import load_chip
from simnode.decode import deployment as D
from simnode.decode import kernels as K
from simnode.decode import model as M

CASES = {"a: batch 16, MTP3": D.FLASH_16_MTP3, "b: batch 2880, MTP1": D.FLASH_16_MTP1}
PUBLISHED_TPOT_MS = {"a: batch 16, MTP3": 6.55, "b: batch 2880, MTP1": 25.54}   # facts v4-decode 2
#: per-launch gap of the third form: kernel launch + InitSocState, measured in DeepEP-Ascend's
#: code comments (facts ascend950 1.2, S6); sparse_mla's runs already include it
GAP_US = 1.9

# A3 low-latency dispatch / combine, 128 tokens per rank, hidden 7168, top-8, INT8 dispatch,
# BF16 combine (facts v4-decode 3): EP8 132 / 126 us, EP32 153 / 151 us; EP16 taken halfway
# (log scale). Rows: 128 x 8 = 1024 (token, expert) writes of a 512-B-aligned slot: INT8 row +
# fp32 scale -> 7680 B; BF16 combine rows 14336 B.
A3_EP16_US = {"dispatch": (132 + 153) / 2, "combine": (126 + 151) / 2}
A3_ROWS, A3_ROW_BYTES = 1024, {"dispatch": 7680, "combine": 14336}
#: the part of a call that does not grow with rows (reasoned, no source: launch 1.9 us, one
#: status write and poll round trip, the all-core sync, the window copy's start)
COMM_FIXED_US = 10.0


def comm_estimate_us(call: K.KernelCall, bandwidth_ratio: float = 1.0) -> float:
    """Dispatch or combine at the A3's per-row cost scaled by row bytes (an ESTIMATE):
    fixed + rows x (A3 per-row cost) x (V4 row bytes / A3 row bytes) / bandwidth_ratio."""
    shape = dict(call.shape)
    rows = shape["tokens"] * shape["top_k"]
    h = shape["hidden"]
    row_bytes = -(-(h + h // 32) // 512) * 512 if call.op == "dispatch" else 2 * h
    per_row = (A3_EP16_US[call.op] - COMM_FIXED_US) / A3_ROWS * row_bytes / A3_ROW_BYTES[call.op]
    return COMM_FIXED_US + rows * per_row / bandwidth_ratio


def run_kind(topology: str, call: K.KernelCall) -> dict:
    args = ["simnode", "run", topology, K.PRESET_WORKLOADS[call.model], "--json"]
    for key, value in call.settings:
        args += ["--set", f"{key}={json.dumps(value) if isinstance(value, list) else value}"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip()[-300:]}
    d = json.loads(out.stdout)
    return {"ns": d["makespan_ns"], "bottleneck": d.get("bottleneck", "")}


def rest_ns(call: K.KernelCall, chip) -> float:
    """The roofline of what a partial model leaves out: hc_pre's mix GEMM, RMS and lane sum
    (the whole op's roofline; the Sinkhorn is a few ops per token); the compressor's state
    traffic and vector work beyond its two linears."""
    if call.op == "compressor":
        s = dict(call.shape)
        weights_and_x = s["n"] * s["k"] * 2 + s["m"] * s["k"] * 2
        rest = replace(call, flops=0.0, hbm_bytes=call.hbm_bytes - weights_and_x)
        return K.roofline_ns(rest, chip)[0]
    return K.roofline_ns(call, chip)[0]


def measure(topology: str, preset: dict) -> dict:
    chip = load_chip(topology)
    m = M.preset("v4-flash")
    d = D.load_deployment(dict(preset), m)
    segments = K.step_segments(m, d)
    rows = {}
    for key, (call, launches) in K.distinct(segments).items():
        roof, bound = K.roofline_ns(call, chip)
        row = {"name": call.name, "op": call.op, "status": call.status, "model": call.model,
               "stream": call.stream, "launches": launches, "roofline_us": roof / 1e3, "roof_bound": bound}
        if call.op in ("dispatch", "combine"):
            row.update(time_us=comm_estimate_us(call), time_950_us=comm_estimate_us(call, 2.5),
                       source="estimate (A3 scale)")
        elif call.model == "none":
            row.update(time_us=roof / 1e3, source="roofline")
        else:
            r = run_kind(topology, call)
            if "error" in r:
                row.update(time_us=roof / 1e3, source="roofline (run failed: " + r["error"] + ")")
            else:
                extra = rest_ns(call, chip) if call.status == "partial" else 0.0
                row.update(time_us=(r["ns"] + extra) / 1e3, model_us=r["ns"] / 1e3,
                           bottleneck=r["bottleneck"], source=call.model)
        rows[key] = row
        print(f"{launches:4d} {row['time_us']:9.2f} us  {key}", file=sys.stderr)
    return {"deployment": dict(preset), "M": d.tokens_per_chip, "segments":
            [{"name": s.name, "repeat": s.repeat,
              "calls": [{"key": c.key, "name": c.name, "stream": c.stream} for c in s.kernels]}
             for s in segments], "kernels": rows}


def step_sums(res: dict) -> dict:
    """Sums over the step's launches; each launch's stream is its own call's (one key may run
    on two streams: wq_a's and wkv's input quantization)."""
    k = res["kernels"]
    out = dict.fromkeys(("serial_us", "side_streams_us", "comm_us", "comm_950_us"), 0.0)
    launches = gapped = 0
    for seg in res["segments"]:
        for c in seg["calls"]:
            r, n = k[c["key"]], seg["repeat"]
            out["serial_us"] += r["time_us"] * n
            launches += n
            if c["stream"] != "main":
                out["side_streams_us"] += r["time_us"] * n
            elif r["model"] != "sparse_mla":            # sparse_mla's runs include their launch
                gapped += n
            if r["op"] in ("dispatch", "combine"):
                out["comm_us"] += r["time_us"] * n
                out["comm_950_us"] += r["time_950_us"] * n
    out["streams_us"] = out["serial_us"] - out["side_streams_us"]
    out["gaps_us"] = gapped * GAP_US
    out["with_gaps_us"] = out["streams_us"] + out["gaps_us"]
    out["launches"], out["main_launches_gapped"] = launches, gapped
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    topology, out = argv
    results = {}
    for name, preset in CASES.items():
        res = measure(topology, preset)
        res["sums"] = step_sums(res)
        accepted = preset["accepted_tokens"]
        res["published_step_us"] = PUBLISHED_TPOT_MS[name] * 1e3 * (1 + accepted)
        results[name] = res
        s = res["sums"]
        print(f"{name}: serial {s['serial_us']:.0f} us, streams {s['streams_us']:.0f}, "
              f"+gaps {s['with_gaps_us']:.0f}; published step {res['published_step_us']:.0f} us")
    with open(out, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
