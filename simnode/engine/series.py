"""Per-resource byte counts in fixed time bins, with bounded memory.

``BinnedSeries(num_series, max_bins, bin_ns)`` accumulates the bytes each resource
moves into time bins of ``bin_ns``. When time runs past ``max_bins`` bins, adjacent
bins are merged pairwise and ``bin_ns`` doubles, so memory stays at
``max_bins x num_series`` floats however long the run. ``utilization()`` turns the
bins into busy fractions given the capacities.
"""

from __future__ import annotations

import numpy as np


def _add_at(a, rows, cols, vals):
    """``np.add.at(a, (rows, cols), vals)``: the same additions in the same order (numba
    compiles it; ``BinnedSeries.use_compiled``)."""
    for i in range(len(vals)):
        a[rows[i], cols[i]] += vals[i]


class BinnedSeries:
    """Bytes per (time bin, series); see the module docstring."""

    def __init__(self, num_series: int, max_bins: int = 256, bin_ns: float = 1000.0):
        if max_bins < 2 or max_bins % 2:
            raise ValueError(f"max_bins must be an even number >= 2, not {max_bins}")
        if not bin_ns > 0:
            raise ValueError(f"bin_ns must be > 0, not {bin_ns}")
        self.max_bins = max_bins
        self.bin_ns = float(bin_ns)
        self.bytes = np.zeros((max_bins, num_series))
        self.end_ns = 0.0                       #: latest time accounted for
        self._add_at = None                     # compiled _add_at, if any

    def use_compiled(self) -> None:
        """Accumulate spans with the compiled ``_add_at`` (a long run's many spans; same
        results as ``np.add.at``); no-op without numba."""
        from simnode.engine.jit import compile_functions
        fns = compile_functions((_add_at,), {})
        if fns:
            self._add_at = fns["_add_at"]

    def grow(self, num_series: int) -> None:
        """Make room for more series (new resources), keeping the recorded ones."""
        extra = num_series - self.bytes.shape[1]
        if extra > 0:
            self.bytes = np.hstack([self.bytes, np.zeros((self.max_bins, extra))])

    def _fit(self, t_ns: float) -> None:
        while t_ns >= self.max_bins * self.bin_ns:
            # Every add writes bins at or before ``end_ns`` (the bin of t is t // bin_ns), so
            # the rows after it hold zeros, whose pairwise sums are zeros: merge only the rows
            # up to it (one row of margin) and clear what they leave. The same values as
            # merging all max_bins rows, without touching the empty ones (a run's first span
            # may double the bins several times over thousands of series: 128-rank all-to-all).
            used = min(self.max_bins, int(self.end_ns // self.bin_ns) + 2)
            k = (used + 1) // 2
            self.bytes[:k] = self.bytes[0:2 * k:2] + self.bytes[1:2 * k:2]
            self.bytes[k:used] = 0.0
            self.bin_ns *= 2

    def add_rates(self, t0_ns: float, t1_ns: float, rate_GBps: np.ndarray) -> None:
        """Spread ``rate x (t1 - t0)`` bytes over the bins that [t0, t1) covers."""
        if t1_ns <= t0_ns:
            return
        self._fit(t1_ns)
        self.end_ns = max(self.end_ns, t1_ns)
        n = rate_GBps.shape[0]
        t = t0_ns
        while t < t1_ns:
            b = min(int(t // self.bin_ns), self.max_bins - 1)
            edge = min((b + 1) * self.bin_ns, t1_ns)
            self.bytes[b, :n] += rate_GBps * (edge - t)
            t = edge

    def add_span(self, t0_ns: float, t1_ns: float, index: np.ndarray, size_bytes: np.ndarray) -> None:
        """Add ``size_bytes`` to series ``index``, spread evenly over [t0, t1) (a point if equal)."""
        self._fit(t1_ns)
        self.end_ns = max(self.end_ns, t1_ns)
        if t1_ns <= t0_ns:
            b = min(int(t1_ns // self.bin_ns), self.max_bins - 1)
            np.add.at(self.bytes[b], index, size_bytes)
            return
        t = t0_ns
        while t < t1_ns:
            b = min(int(t // self.bin_ns), self.max_bins - 1)
            edge = min((b + 1) * self.bin_ns, t1_ns)
            np.add.at(self.bytes[b], index, size_bytes * ((edge - t) / (t1_ns - t0_ns)))
            t = edge

    def add_spans(self, t0_ns: np.ndarray, t1_ns: float, index: np.ndarray,
                  size_bytes: np.ndarray) -> None:
        """``add_span`` for many spans ending at the same ``t1_ns``: span i adds
        ``size_bytes[i, j]`` to series ``index[i, j]`` (-1: none) spread over [t0[i], t1)."""
        t0 = np.asarray(t0_ns, dtype=float)
        if t0.size == 0:
            return
        self._fit(t1_ns)
        self.end_ns = max(self.end_ns, t1_ns)
        index = np.asarray(index)
        size_bytes = np.asarray(size_bytes, dtype=float)
        valid = index >= 0
        length = t1_ns - t0
        point = length <= 0
        b1 = min(int(t1_ns // self.bin_ns), self.max_bins - 1)
        if point.any():                                      # zero-length spans: one bin
            m = valid & point[:, None]
            np.add.at(self.bytes[b1], index[m], size_bytes[m])
        span = ~point
        if not span.any():
            return
        if span.all():                                       # (no copies of large releases)
            t0s, ls, idx, sz, ok = t0, length, index, size_bytes, valid
        else:
            t0s, ls = t0[span], length[span]
            idx, sz, ok = index[span], size_bytes[span], valid[span]
        b = np.minimum((t0s // self.bin_ns).astype(np.int64), self.max_bins - 1)
        t = t0s.copy()
        while True:
            live = t < t1_ns
            if not live.any():
                break
            edge = np.minimum((b + 1) * self.bin_ns, t1_ns)
            frac = np.where(live, (edge - t) / ls, 0.0)
            m = ok & live[:, None]
            rows = np.minimum(np.broadcast_to(b[:, None], idx.shape)[m], self.max_bins - 1)
            if self._add_at is not None:
                self._add_at(self.bytes, rows, idx[m], (sz * frac[:, None])[m])
            else:
                np.add.at(self.bytes, (rows, idx[m]), (sz * frac[:, None])[m])
            t = np.where(live, edge, t)
            b = np.minimum(b + 1, self.max_bins - 1)

    def add_points(self, t_ns: np.ndarray, index: np.ndarray, size_bytes: np.ndarray) -> None:
        """Add ``size_bytes[i]`` to series ``index[i]`` in the bin holding ``t_ns[i]``."""
        if t_ns.size == 0:
            return
        self._fit(float(t_ns.max()))
        self.end_ns = max(self.end_ns, float(t_ns.max()))
        b = np.minimum((t_ns // self.bin_ns).astype(np.int64), self.max_bins - 1)
        np.add.at(self.bytes, (b, index), size_bytes)

    def edges_ns(self) -> np.ndarray:
        """Bin edges up to the last bin with data (at least one bin)."""
        used = max(1, int(np.ceil(self.end_ns / self.bin_ns)))
        return np.arange(used + 1) * self.bin_ns

    def utilization(self, capacity_GBps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bin edges in ns, busy fraction per (bin, series)) = bytes / (capacity x bin)."""
        edges = self.edges_ns()
        used = edges.shape[0] - 1
        cap = np.asarray(capacity_GBps, dtype=float)
        return edges, self.bytes[:used, :cap.shape[0]] / (cap * self.bin_ns)
