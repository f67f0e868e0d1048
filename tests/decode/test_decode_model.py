"""The V4 model as data: layer types and order, parameter counts, and bad input."""

import pytest

from simnode.decode import model as M
from simnode.errors import ConfigError


@pytest.mark.parametrize("name, counts", [
    ("v4-flash", {"window": 2, "csa": 21, "hca": 20}),      # facts v4-decode 1 [derived count]
    ("v4-pro", {"window": 0, "csa": 30, "hca": 31}),
])
def test_layer_type_counts_are_the_published_ones(name, counts):
    assert M.preset(name).type_counts() == counts


def test_layer_order_follows_the_published_compress_ratios():
    flash, pro = M.preset("v4-flash"), M.preset("v4-pro")
    assert flash.layer_types[:4] == ("window", "window", "csa", "hca")
    assert flash.layer_types[-2:] == ("hca", "csa")
    assert pro.layer_types[:4] == ("hca", "hca", "csa", "hca")
    assert pro.layer_types[-1] == "csa"
    # the first 3 layers are hash-routed: 2 window + 1 CSA (Flash), 2 HCA + 1 CSA (Pro)
    assert flash.layer_groups() == {("window", True): 2, ("csa", True): 1, ("hca", False): 20,
                                    ("csa", False): 20}
    assert pro.layer_groups() == {("hca", True): 2, ("csa", True): 1, ("hca", False): 29,
                                  ("csa", False): 29}


def test_parameter_count_is_the_closed_form_sum():
    m = M.preset("v4-flash")
    h, d = 4096, 512
    attn = 1024 * h + 64 * d * 1024 + d * h + 8 * 1024 * 4096 + h * 8192
    experts = 256 * 3 * 2048 * h
    per_layer_core = attn + experts + 3 * 2048 * h + 256 * h       # + shared + gate
    csa_extra = 2 * 2 * d * h + 64 * 128 * 1024 + 64 * h + 2 * 2 * 128 * h
    hca_extra = 2 * d * h
    closed = 43 * per_layer_core + 21 * csa_extra + 20 * hca_extra + 2 * 129280 * h
    small = M.total_params(m) - closed          # norms, mHC, ape, sinks, gate biases
    assert 0 < small < 0.001 * closed


@pytest.mark.parametrize("name, published, rel", [
    # (ctx, not in the facts: secondary sources such as vLLM's recipes and llama.cpp's
    # release notes give 284B total / 13B activated and 1.6T / 49B; "1.6T" is rounded)
    ("v4-flash", 284e9, 0.005),
    ("v4-pro", 1.6e12, 0.03),
])
def test_totals_land_on_the_published_model_sizes(name, published, rel):
    assert M.total_params(M.preset(name)) == pytest.approx(published, rel=rel)


def test_activated_params_count_top_k_of_the_routed_experts():
    m = M.preset("v4-flash")
    routed = 43 * 256 * 3 * 2048 * 4096
    assert M.activated_params(m) == M.total_params(m) - routed + routed * 6 // 256
    assert 13e9 < M.activated_params(m) < 14e9


def test_mtp_layer_is_counted_only_when_asked():
    m = M.preset("v4-flash")
    mtp = sum(w.count for w in M.weights(m, "window") + M.mtp_extra_weights(m))
    assert M.total_params(m, mtp=True) - M.total_params(m) == mtp


def _flash(**over):
    return {**M.V4_FLASH, **over}


def test_compress_ratios_of_the_wrong_length_are_refused():
    with pytest.raises(ConfigError, match=r"compress_ratios = .*one ratio per layer \(num_layers = 43, 42 given\)"):
        M.load_model(_flash(compress_ratios=[0] * 42))


def test_an_unknown_ratio_is_refused():
    with pytest.raises(ConfigError, match=r"compress_ratios = 64: expected 0 \(window-only\), 4 \(csa_ratio\) "
                                          r"or 128 \(hca_ratio\)"):
        M.load_model(_flash(compress_ratios=[0, 64] + [4] * 41))


def test_an_unknown_key_names_the_closest():
    data = _flash()
    data["num_layer"] = data.pop("num_layers")
    with pytest.raises(ConfigError, match="num_layers = '<missing>'"):
        M.load_model(data)
    with pytest.raises(ConfigError, match="Did you mean 'top_k'"):
        M.load_model(_flash(topk=6))


def test_an_unknown_preset_lists_the_known():
    with pytest.raises(ConfigError, match="one of v4-flash, v4-pro. Did you mean 'v4-flash'"):
        M.preset("v4-flsh")
