"""Fixtures of the calibration tests: a small DeepEP case file made from the model itself."""

from __future__ import annotations

import pytest
import yaml

from simnode.workloads.loader import load_inputs

SMALL = {"tokens_per_rank": 256, "batch_window_ns": 0}
TOPO = "topologies/atlas950-supernode.yaml"
WORK = "workloads/deepep-normal.yaml"


def model(repo_root, **sets) -> dict:
    """The result of the small EP8 DeepEP run with ``sets`` (topology.* or workload keys)."""
    from simnode.config.overrides import assignment_text
    over = {**SMALL, **sets}
    return load_inputs(str(repo_root / TOPO), str(repo_root / WORK),
                       [assignment_text(k, v) for k, v in over.items()]).run().to_dict()


@pytest.fixture
def synthetic_cases(tmp_path, repo_root):
    """synthetic_cases(tolerance, **truth): a cases file whose measured values are the model's
    own at ``truth``; returns its path."""
    def make(tolerance: float = 0.03, name: str = "cases.yaml", **truth) -> object:
        out = model(repo_root, **truth)
        cases = [{"id": f"ep8-{m}", "source": f"the model at {truth}", "topology": TOPO,
                  "workload": WORK, "set": dict(SMALL), "metric": f"{m}_GBps",
                  "published": out[f"{m}_GBps"], "tolerance": tolerance}
                 for m in ("dispatch", "combine")]
        path = tmp_path / name
        path.write_text(yaml.safe_dump({"version": 1, "cases": cases}, sort_keys=False))
        return path
    return make
