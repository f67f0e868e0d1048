"""Imports every built-in workload kind so that it registers itself."""

from simnode.workloads import gemm  # noqa: F401
from simnode.workloads import sparse_mla  # noqa: F401
from simnode.workloads import topk  # noqa: F401
from simnode.workloads import deepep  # noqa: F401
from simnode.workloads import transport  # noqa: F401
from simnode.workloads import tile  # noqa: F401
