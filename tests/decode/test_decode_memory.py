"""HBM footprint: KV bytes per token, cache accounting, the refusal and the largest batch."""

import dataclasses

import pytest

from simnode.config.chip import load_chip
from simnode.decode import deployment as D
from simnode.decode import memory as Mem
from simnode.decode import model as M
from simnode.errors import ConfigError

CHIP = load_chip("topologies/ascend950dt.yaml")
FLASH, PRO = M.preset("v4-flash"), M.preset("v4-pro")


def test_kv_entry_layouts():
    assert Mem.kv_entry_bytes(FLASH, "fmla_fp8") == 584        # facts v4-decode 1 (FMLA tests/quant.py)
    assert Mem.kv_entry_bytes(FLASH, "ascend_fp8") == 640      # CR-code: align_up(448 + 128 + 14, 128)
    assert Mem.kv_entry_bytes(FLASH, "bf16") == 1024


@pytest.mark.parametrize("model, exact, approx_kb", [
    # 21 x (584 + 132) / 4 + 20 x 584 / 128 and 30 x (584 + 132) / 4 + 31 x 584 / 128
    (FLASH, 21 * 716 / 4 + 20 * 584 / 128, 3.9),
    (PRO, 30 * 716 / 4 + 31 * 584 / 128, 5.5),
])
def test_kv_bytes_per_context_token_are_the_facts_derived_figures(model, exact, approx_kb):
    per_token = Mem.kv_bytes_per_token(model)
    assert per_token == exact
    assert per_token / 1000 == pytest.approx(approx_kb, abs=0.05)


def test_cache_accounting_per_sequence():
    d = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)
    c = Mem.cache_bytes_per_sequence(FLASH, d)
    # 8194 tokens: CSA pages of 512 tokens (17 x 128 entries), HCA one page of 16384 tokens
    assert c["kv_compressed"] == 21 * 17 * 128 * 640 + 20 * 128 * 640
    assert c["indexer_cache"] == 21 * 17 * 128 * 132
    # window: (2 + 128 + 127) // 128 + 1 = 3 blocks of 128, in the 43 layers and the MTP layer
    assert c["kv_window"] == 44 * 3 * 128 * 640


def test_weights_split_experts_over_ep_only():
    d = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)
    d64 = D.load_deployment({**D.FLASH_16_MTP1, "chips": 64, "attn_dp": 64, "moe_ep": 64,
                             "global_batch": 64}, FLASH)
    experts = (43 + 1) * 256 * 3 * 2048 * 4096 * (0.5 + 1 / 32)
    assert Mem.weight_bytes(FLASH, d) - Mem.weight_bytes(FLASH, d64) == pytest.approx(experts * (1 / 16 - 1 / 64))


def test_comm_windows_follow_crs_formula():
    d = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)
    dispatch = 16 * 360 * 16 * 8704          # align512(align32(8192) + 44) = 8704
    combine = 6 * 360 * 8192
    assert Mem.comm_window_bytes(FLASH, d) == (-(-(dispatch + combine) * 2 // 2**20) + 11) * 2**20
    small = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)
    assert Mem.comm_window_bytes(FLASH, small) == 200 * 2**20


def test_published_rows_fit():
    for preset in (D.FLASH_16_MTP3, D.FLASH_16_MTP1):
        fp = Mem.check_fits(FLASH, D.load_deployment(dict(preset), FLASH), CHIP)
        assert 0 < fp.capacity_frac < 1


def test_largest_batch_is_the_edge_of_fitting():
    d = D.load_deployment(dict(D.FLASH_16_MTP1), FLASH)
    best = Mem.largest_batch(FLASH, d, CHIP)
    assert best % 16 == 0
    assert Mem.footprint(FLASH, dataclasses.replace(d, global_batch=best), CHIP).fits()
    assert not Mem.footprint(FLASH, dataclasses.replace(d, global_batch=best + 16), CHIP).fits()


def test_a_batch_that_does_not_fit_is_refused_with_the_largest_that_does():
    d = D.load_deployment({**D.FLASH_16_MTP1, "global_batch": 16 * 4000}, FLASH)
    best = Mem.largest_batch(FLASH, d, CHIP)
    with pytest.raises(ConfigError) as err:
        Mem.check_fits(FLASH, d, CHIP)
    msg = str(err.value)
    assert msg.startswith("deployment: global_batch = 64000: expected a batch whose HBM footprint "
                          "fits one ascend950dt's 144.0 GB: 4000 sequences per chip of DeepSeek-V4-Flash "
                          "at context 8192 need ")
    assert "compressor state" in msg and "weights" in msg
    assert msg.endswith(f"The largest global batch that fits at context 8192 is {best} ({best // 16} per chip).")


def test_weights_that_alone_do_not_fit_say_so():
    small = dataclasses.replace(CHIP, memory=dataclasses.replace(CHIP.memory, hbm_capacity_GB=16))
    d = D.load_deployment(dict(D.FLASH_16_MTP3), FLASH)
    assert Mem.largest_batch(FLASH, d, small) == 0
    with pytest.raises(ConfigError, match="Not even one sequence per chip fits at context 8192: the weights "
                                          r"alone take 18\.\d GB"):
        Mem.check_fits(FLASH, d, small)
