"""Parameter declarations (simnode.config.params): units from names, ranges, reading with
the file's errors, optional keys and the resolved configuration derived from one place."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import pytest

from simnode.config import params
from simnode.config.chip import ChipSpec, load_chip
from simnode.config.fields import Reader
from simnode.config.params import Param, param, section
from simnode.errors import ConfigError


@dataclass(frozen=True)
class _Inner:
    latency_ns: float = param(doc="a latency", min=0)
    mode: str = param("a", "a mode", choices=("a", "b"))


@dataclass(frozen=True)
class _Outer:
    rate_GBps: float = param(doc="a rate", positive=True)
    per_dtype: Mapping[str, int] = param(doc="by dtype", unit="MAC/cycle", keys=("bf16", "fp8"), min=1,
                                         check=lambda n: "even" if n % 2 else None)
    inner: _Inner = section(_Inner, "nested")
    count: int = param(4, "a count", unit="items", min=1, max=8)


def test_units_come_from_the_name_or_the_declaration():
    got = {k: p.unit for k, p in params.walk(_Outer)}
    assert got == {"rate_GBps": "GB/s", "count": "items", "per_dtype.bf16": "MAC/cycle",
                   "per_dtype.fp8": "MAC/cycle", "inner.latency_ns": "ns", "inner.mode": ""}
    assert list(got)[-1] == "count"
    assert params.unit_of("urma_wqe_ns_per_peer") == "ns/peer"
    assert params.unit_of("num_ranks") is None


def test_ranges_as_describe_prints_them():
    got = {k: p.range_text() for k, p in params.walk(_Outer)}
    assert got == {"rate_GBps": "0.001..1e+06", "count": "1..8", "per_dtype.bf16": "1..2,147,483,647",
                   "per_dtype.fp8": "1..2,147,483,647", "inner.latency_ns": "0..1e+09",
                   "inner.mode": "one of a, b"}


def test_read_builds_the_object_and_errors_name_the_key_path():
    data = {"rate_GBps": 2, "per_dtype": {"bf16": 2, "fp8": 4}, "inner": {"latency_ns": 5}}
    obj = params.build(_Outer, Reader(data, "f.yaml"))
    assert obj == _Outer(2.0, MappingProxyType({"bf16": 2, "fp8": 4}), _Inner(5.0, "a"), 4)
    assert params.resolved(obj) == {"rate_GBps": 2.0, "count": 4, "per_dtype": {"bf16": 2, "fp8": 4},
                                    "inner": {"latency_ns": 5.0, "mode": "a"}}
    bad = {**data, "per_dtype": {"bf16": 3, "fp8": 4}}
    with pytest.raises(ConfigError, match=r"f.yaml: per_dtype.bf16 = 3: expected even"):
        params.build(_Outer, Reader(bad, "f.yaml"))
    with pytest.raises(ConfigError, match=r"count = 9: expected an integer <= 8"):
        params.build(_Outer, Reader({**data, "count": 9}, "f.yaml"))
    with pytest.raises(ConfigError, match=r"inner.speed = 1: expected no such key; valid keys here: latency_ns, mode"):
        params.build(_Outer, Reader({**data, "inner": {"latency_ns": 1, "speed": 1}}, "f.yaml"))


def test_optional_keys_are_those_with_a_default():
    assert params.optional_keys(_Outer) == ("inner.mode", "count")


def test_a_declaration_needs_a_known_type_and_origin():
    with pytest.raises(TypeError):
        Param("x", "float", "doc")
    with pytest.raises(TypeError):
        Param("x", "int", "doc", origin="guessed")


def test_the_chip_file_resolves_to_its_declared_values(topology_path):
    chip = load_chip(topology_path)
    values = params.resolved(chip)
    assert values["memory"]["hbm_bandwidth_GBps"] == chip.memory.hbm_bandwidth_GBps
    assert values["paths"]["gm_to_l1"]["min_issue_interval_cycles"] == 64
    keys = [k for k, _ in params.walk(ChipSpec)]
    assert len(keys) == len(set(keys)) and "cube.macs_per_cycle.fp4" in keys
    assert all(p.doc for _, p in params.walk(ChipSpec))
