"""Deployments: derived shapes, quantization parts, and bad input."""

import pytest

from simnode.decode import deployment as D
from simnode.decode import model as M
from simnode.errors import ConfigError

FLASH = M.preset("v4-flash")


@pytest.mark.parametrize("preset, per_chip, m, rows", [
    (D.FLASH_16_MTP3, 1, 4, 24),          # 16 / 16 sequences x (1 + 3) tokens, x top-6
    (D.FLASH_16_MTP1, 180, 360, 2160),    # 2880 / 16 x (1 + 1)
])
def test_tokens_per_chip_and_expert_rows(preset, per_chip, m, rows):
    d = D.load_deployment(dict(preset), FLASH)
    assert (d.batch_per_chip, d.tokens_per_chip, d.expert_rows_per_chip(FLASH)) == (per_chip, m, rows)
    assert d.local_experts(FLASH) == 16 and d.attn_tp == d.moe_tp == 1


def test_every_weight_part_has_a_format_in_every_scheme():
    parts = {w.part for w in M.all_weights(FLASH)}
    for scheme in D.SCHEMES.values():
        assert parts <= set(scheme) == set(D.QUANT_PARTS)
        assert all(fmt in D.FORMATS for fmt in scheme.values())


def test_hybrid_scheme_is_crs():
    q = D.quantization(D.load_deployment(dict(D.FLASH_16_MTP3), FLASH))
    assert (q["attn_proj"], q["routed_experts"], q["shared_expert"], q["compressor"], q["lm_head"]) == \
        ("mxfp8", "mxfp4", "mxfp8", "bf16", "bf16")
    assert D.format_bytes("mxfp4") == 0.5 + 1 / 32


@pytest.mark.parametrize("over, message", [
    ({"global_batch": 2881}, "global_batch = 2881: expected a multiple of attn_dp (16)"),
    ({"moe_ep": 3, "chips": 3, "attn_dp": 3, "global_batch": 3}, "moe_ep = 3: expected a divisor of the model's 256"),
    ({"attn_dp": 5}, "attn_dp = 5: expected a divisor of chips (16)"),
    ({"accepted_tokens": 1.5}, "accepted_tokens = 1.5: expected at most next_n (1)"),
    ({"shared_expert": "inline", "shared_expert_aic": 8}, "shared_expert_aic = 8: expected 0 unless"),
    ({"kv_cache": "fp4"}, "kv_cache = 'fp4': expected one of 'ascend_fp8', 'fmla_fp8', 'bf16'"),
])
def test_bad_deployments_are_refused(over, message):
    with pytest.raises(ConfigError) as err:
        D.load_deployment({**D.FLASH_16_MTP1, **over}, FLASH)
    assert message in str(err.value)
