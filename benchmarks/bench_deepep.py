"""Benchmark: DeepEP dispatch + combine as a user runs them, EP8 .. EP128 (or any sizes).

workloads/deepep-normal.yaml (16384 tokens per rank, hidden 7168, top-6 of 256
experts, facts 2.4) with ``num_ranks`` = 8, 16, 32, 64, 128. Each EP size is one
``simnode run topologies/atlas950-supernode.yaml workloads/deepep-normal.yaml --set
num_ranks=N [--set num_experts=N] --json`` process, measured whole (``process.run_tree``):
wall time, CPU time (user + sys of the process and the child it forks: from EP64 on
combine runs beside dispatch, ``--jobs``), peak memory as the peak of the processes'
summed PSS (sampled; a page the fork shares counts once), and the kernel figures of its
JSON. The summary shows how wall time and peak memory grow from EP8.

Target: EP128 dispatch + combine <= 10 s wall; EP1024 <= 60 s and <= 2 GiB,
on a 2-core machine.

    python benchmarks/bench_deepep.py                  # EP8, 16, 32, 64, 128
    python benchmarks/bench_deepep.py --ep 8 --ep 128  # chosen sizes
    python benchmarks/bench_deepep.py --ep 256 --ep 512 --ep 1024   # past the published sizes
    python benchmarks/bench_deepep.py --kernels --ep 512   # both kernels timed in one process

256 experts place on at most 256 ranks, so past EP256 the benchmark gives every rank one
expert (num_experts = EP): a scaling probe of the simulator, not a published configuration.
``--kernels`` runs routing + plan, dispatch and combine one after the other in a child
process and times each (solver recomputes, SimPy events): where the time goes, not what a
user waits for.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CountingEnvironment, Stopwatch, peak_rss_MiB  # noqa: E402
from process import run_tree  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "topologies" / "atlas950-supernode.yaml"
WORKLOAD = ROOT / "workloads" / "deepep-normal.yaml"
EP_SIZES = (8, 16, 32, 64, 128)
TARGET_S = 10.0                 # EP128 dispatch + combine
TARGET_1024 = (60.0, 2048.0)    # EP1024: wall s, peak MiB (process.ROWS["deepep-ep1024"])
CHILD_TIMEOUT_S = 3600.0        # a size that takes longer is reported as a timeout


def measure(num_ranks: int) -> dict:
    """Run dispatch and combine at ``num_ranks`` in this process; returns the figures."""
    import simnode.ep.kernel as ep_kernel
    from simnode.ep.deepep import DeepEPCosts, DeepEPSim
    from simnode.ep.deepep_plan import DeepEPParams, build_plan
    from simnode.ep.fields import routes as build_routes
    from simnode.units import ns_to_us
    from simnode.workloads.loader import load_inputs

    class Simpy:                                  # the EP kernels build their env as simpy.Environment()
        Environment = CountingEnvironment
    ep_kernel.simpy = Simpy

    inp = load_inputs(TOPOLOGY, WORKLOAD, [f"num_ranks={num_ranks}",
                                           f"topology.supernode.num_ranks={num_ranks}",
                                           f"num_experts={max(256, num_ranks)}"])
    prm, chip = inp.params, inp.topology.chip
    with Stopwatch() as prep:
        dp = DeepEPParams(num_ranks, prm["tokens_per_rank"], prm["hidden"], prm["top_k"],
                          prm["num_experts"], prm["dispatch_dtype"], prm["combine_dtype"],
                          num_aiv=chip.num_ai_cores * chip.aiv_per_core,
                          wqebb_bytes=inp.topology.supernode.wqebb_bytes)
        plan = build_plan(build_routes(prm, num_ranks), dp, keep_aiv=False)   # as the deepep kind
    costs = DeepEPCosts(**{f: prm[f] for f in DeepEPCosts.__dataclass_fields__})
    out = {"ep": num_ranks, "prep_s": prep.wall_s}
    for kind in ("dispatch", "combine"):
        sim = DeepEPSim(inp.topology, plan, costs, batch_window_ns=prm["batch_window_ns"])
        with Stopwatch() as sw:
            run = sim.run(kind)
        out[kind] = {"wall_s": sw.wall_s, "recomputes": run.solver_recomputes,
                     "events": sim.env.events_scheduled, "transfers": run.transfers,
                     "kernel_us": ns_to_us(float(run.kernel_ns.mean())),
                     "GBps": float(run.GBps.mean()),
                     "sim_over_bound": float(run.kernel_ns.mean() / run.bound_ns)}
    out["peak_MiB"] = peak_rss_MiB()
    return out


def run_child(num_ranks: int) -> dict:
    cmd = [sys.executable, __file__, "--child", str(num_ranks)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"ep": num_ranks, "error": f"timeout after {CHILD_TIMEOUT_S:.0f} s"}
    if done.returncode != 0:
        return {"ep": num_ranks, "error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_user(num_ranks: int, sampler: str = "bounded") -> dict:
    """``simnode run`` at ``num_ranks`` as a user runs it, measured whole (``run_tree``;
    ``sampler``: how its memory is sampled, ``process.run_tree``)."""
    cmd = [sys.executable, "-m", "simnode", "run", str(TOPOLOGY), str(WORKLOAD),
           "--set", f"num_ranks={num_ranks}", "--json"]
    if num_ranks > 256:
        cmd[-1:-1] = ["--set", f"num_experts={num_ranks}"]
    try:
        got = run_tree(cmd, sampler=sampler)
    except RuntimeError as e:
        return {"ep": num_ranks, "error": str(e).strip().splitlines()[-1]}
    res = json.loads(got.pop("stdout"))
    return {"ep": num_ranks, **got, **{k: res[k] for k in (
        "dispatch_ns", "combine_ns", "dispatch_GBps", "combine_GBps", "dispatch_solver_recomputes",
        "combine_solver_recomputes")}}


def main_user(sizes, sampler: str = "bounded") -> int:
    print(f"DeepEP normal kernels as `simnode run` runs them, {WORKLOAD.name} (16384 tokens/rank, "
          f"top-6 of 256), uniform routing" + ("; past EP256 top-6 of EP experts" if max(sizes) > 256 else ""))
    print(f"{'EP':>4} {'wall s':>7} {'CPU s':>7} {'procs':>5} {'peak MiB':>9} {'1 proc MiB':>10} "
          f"{'solves d/c':>11} {'disp us':>8} {'comb us':>8} {'disp GB/s':>9} {'comb GB/s':>9}")
    ok = {}
    for n in sizes:
        r = run_user(n, sampler)
        if "error" in r:
            print(f"{n:>4} FAILED: {r['error']}")
            continue
        ok[n] = r
        print(f"{n:>4} {r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['processes']:>5} {r['peak_MiB']:>9.0f} "
              f"{r['max_rss_one_MiB']:>10.0f} {r['dispatch_solver_recomputes']:>5}/{r['combine_solver_recomputes']:<5} "
              f"{r['dispatch_ns'] / 1e3:>8.1f} {r['combine_ns'] / 1e3:>8.1f} {r['dispatch_GBps']:>9.1f} "
              f"{r['combine_GBps']:>9.1f}  ({r['pss_reads']} PSS reads)", flush=True)
    if 8 in ok and len(ok) > 1:
        b = ok[8]
        print("growth from EP8 (wall, peak memory): " + ", ".join(
            f"EP{n} x{ok[n]['wall_s'] / b['wall_s']:.1f} / x{ok[n]['peak_MiB'] / b['peak_MiB']:.1f}"
            for n in sorted(ok) if n != 8))
    verdicts = []
    if 128 in sizes:
        r = ok.get(128)
        verdicts.append(r is not None and r["wall_s"] <= TARGET_S)
        print(f"EP128 target <= {TARGET_S:.0f} s wall: " + ("MISSED (did not finish)" if r is None else
              f"{r['wall_s']:.2f} s: {'ok' if verdicts[-1] else 'MISSED'}"))
    if 1024 in sizes:
        r = ok.get(1024)
        verdicts.append(r is not None and r["wall_s"] <= TARGET_1024[0] and r["peak_MiB"] <= TARGET_1024[1])
        print(f"EP1024 target <= {TARGET_1024[0]:.0f} s wall, <= {TARGET_1024[1]:.0f} MiB: " + (
            "MISSED (did not finish)" if r is None else
            f"{r['wall_s']:.2f} s, {r['peak_MiB']:.0f} MiB: {'ok' if verdicts[-1] else 'MISSED'}"))
    return 0 if len(ok) == len(sizes) and all(verdicts) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ep", type=int, action="append", help="EP size (repeatable)")
    ap.add_argument("--kernels", action="store_true",
                    help="time routing + plan, dispatch and combine one after the other in one process")
    ap.add_argument("--sampler", choices=("bounded", "10hz", "none"), default="bounded",
                    help="how the process tree's peak memory is sampled (benchmarks/process.py): "
                         "PSS when it could set a peak, at most every 0.5 s (default); PSS at "
                         "10 Hz; not at all (the largest single process's max RSS)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    sizes = args.ep or list(EP_SIZES)
    if not args.kernels:
        return main_user(sizes, args.sampler)
    print(f"DeepEP normal kernels, {WORKLOAD.name} (16384 tokens/rank, top-6 of 256), uniform routing"
          + ("; past EP256 top-6 of EP experts" if max(sizes) > 256 else ""))
    print(f"{'EP':>4} {'plan s':>7} {'disp s':>7} {'comb s':>7} {'total s':>8} "
          f"{'recomputes d/c':>15} {'SimPy events d/c':>17} {'peak MiB':>9} "
          f"{'disp us':>8} {'comb us':>8} {'disp GB/s':>9} {'comb GB/s':>9}")
    rows = []
    for n in sizes:
        r = run_child(n)
        rows.append(r)
        if "error" in r:
            print(f"{n:>4} FAILED: {r['error']}")
            continue
        d, c = r["dispatch"], r["combine"]
        r["total_s"] = d["wall_s"] + c["wall_s"]
        print(f"{n:>4} {r['prep_s']:>7.2f} {d['wall_s']:>7.2f} {c['wall_s']:>7.2f} {r['total_s']:>8.2f} "
              f"{d['recomputes']:>7,d}/{c['recomputes']:<7,d} {d['events']:>8,d}/{c['events']:<8,d} "
              f"{r['peak_MiB']:>9.0f} {d['kernel_us']:>8.1f} {c['kernel_us']:>8.1f} "
              f"{d['GBps']:>9.1f} {c['GBps']:>9.1f}")
    ok = {r["ep"]: r for r in rows if "error" not in r}
    if 8 in ok:
        base = ok[8]["total_s"]
        growth = ", ".join(f"EP{n} x{ok[n]['total_s'] / base:.1f}" for n in sorted(ok) if n != 8)
        print(f"wall time growth from EP8 ({base:.2f} s): {growth or '-'}")
    if 128 in sizes:
        r = ok.get(128)
        verdict = ("MISSED (did not finish)" if r is None else
                   f"{r['total_s']:.2f} s (+{r['prep_s']:.2f} s routing + plan): "
                   f"{'ok' if r['total_s'] <= TARGET_S else 'MISSED'}")
        print(f"EP128 dispatch + combine target <= {TARGET_S:.0f} s wall: {verdict}")
        return 0 if r is not None and r["total_s"] <= TARGET_S else 1
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
