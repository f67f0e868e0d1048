"""The decode step's sparse attention is the v4 kernel (sparse_mla mode v4) at the call's
shape: its profile is what a direct run of the v4 preset at that shape gives, with the
graph replay's cold start and the launch left to the step's gap."""

from __future__ import annotations

import json

import pytest

from simnode.config.topology import load_topology
from simnode.decode import deployment as D
from simnode.decode import kernels as K
from simnode.decode import model as M
from simnode.decode import program as P
from simnode.decode import timing as T

FLASH = M.preset("v4-flash")
MTP3 = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)


def _attn(dep, layer_type: str) -> K.KernelCall:
    return {c.name: c for c in K.layer_kernels(FLASH, dep, layer_type)}["sparse_attn"]


def test_the_call_carries_what_the_v4_kernel_needs():
    csa = _attn(MTP3, "csa")
    assert csa.dims() == {"layer": "csa", "batch": 1, "s_q": 4, "heads": 64, "dim": 512, "context": 8192,
                          "window": 128, "ratio": 4, "topk": 512}
    assert csa.dtype == "ascend_fp8"
    p = T.v4_attention_params(csa)
    assert (p.mode, p.layer, p.main_dtype, p.extra_dtype, p.csa_ratio, p.topk_extra) == \
        ("v4", "csa", "c8", "c8", 4, 512)
    assert (p.b_topk, p.heads_per_core, p.skip_scale_threshold, p.split_kv) == (128, 64, 0, False)
    # one graph replay: its cold start, and no launch of its own (the step's gap is it)
    assert p.graph_replay and p.kernel_launch_ns == 0
    assert P.Gaps().launch_gap_ns == 1900.0
    hca = T.v4_attention_params(_attn(MTP3, "hca"))
    assert (hca.layer, hca.hca_ratio) == ("hca", 128)
    fp4 = D.load_deployment({**D.FLASH_16_MTP3, "kv_cache": "fp4_compressed"}, FLASH)
    p4 = T.v4_attention_params(_attn(fp4, "csa"))
    assert (p4.main_dtype, p4.extra_dtype) == ("c8", "fp4")


@pytest.mark.parametrize("layer_type", ["csa", "hca", "window"])
def test_the_steps_profile_is_a_direct_run_of_the_preset(cli, topology_path, repo_root, layer_type):
    chip = load_topology(topology_path).chip
    prof = T.profile(chip, _attn(MTP3, layer_type))
    assert (prof.model, prof.source) == (T.PIPE, "sparse_mla_v4")
    preset = repo_root / "workloads" / "v4-attention-decode-b1.yaml"
    sets = [f"layer={layer_type}", "graph_replay=true", "kernel_launch_ns=0"]
    direct = json.loads(cli("run", topology_path, preset, *[a for s in sets for a in ("--set", s)],
                            "--json").out)
    assert prof.ns == pytest.approx(direct["makespan_ns"], abs=0.01)
    assert prof.aic == direct["cores_used"] == 4
    # with its own launch, the preset is the step's gap + the profile: counted once
    launched = json.loads(cli("run", topology_path, preset, *[a for s in sets[:2] for a in ("--set", s)],
                              "--json").out)
    assert launched["makespan_ns"] == pytest.approx(prof.ns + P.Gaps().launch_gap_ns, abs=0.01)


def test_the_fp4_what_if_reads_smaller_rows(topology_path):
    chip = load_topology(topology_path).chip
    fp4 = D.load_deployment({**D.FLASH_16_MTP3, "kv_cache": "fp4_compressed"}, FLASH)
    c8, f4 = T.profile(chip, _attn(MTP3, "csa")), T.profile(chip, _attn(fp4, "csa"))
    assert f4.ns < c8.ns and f4.hbm_bytes < c8.hbm_bytes
