"""The L2 hit/miss model.

``L2Cache`` is an LRU over GM regions named by the schedule (``Copy.gm_key``,
one tile of one tensor), each with its size in bytes, bounded by the L2 capacity:

- a read of a region present in L2 hits (it is moved to most-recently-used);
- a read of an absent region misses, is fetched from HBM and, with the "normal"
  hint, allocated (evicting least-recently-used regions until it fits);
  concurrent readers of a region being fetched hit, as an L2 merges misses to
  one line;
- a write allocates the region in L2 ("normal" hint) and is also charged to HBM
  at write time (the eventual write-back, moved forward: a documented
  simplification that keeps HBM write traffic in the run that caused it);
- ``gm_key=None`` or the "notalloc" hint never allocates (facts 1.1, S3 NOTALLOC_*).

Regions are whole tiles, so partial overlap between regions is not modelled:
generators name regions at the granularity they copy.
"""

from __future__ import annotations

from collections import OrderedDict, deque


class L2Cache:
    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self._lru: OrderedDict = OrderedDict()
        self.used_bytes = 0
        self.hits = 0
        self.misses = 0
        self.hit_bytes = 0
        self.miss_bytes = 0
        self.evictions = 0          #: regions evicted so far

    def read(self, key, size_bytes: int, allocate: bool = True) -> bool:
        """Return True on a hit; on a miss allocate the region if asked."""
        lru = self._lru
        if key is not None and key in lru:
            lru.move_to_end(key)
            self.hits += 1
            self.hit_bytes += size_bytes
            return True
        self._miss(key, size_bytes, allocate)
        return False

    def read_many(self, keys, size_bytes, allocate: bool = True) -> int:
        """``read`` of each region of ``keys`` (``size_bytes`` each), in order; returns how
        many hit (one call for a multi-region descriptor)."""
        lru = self._lru
        hits = 0
        for key in keys:
            if key is not None and key in lru:
                lru.move_to_end(key)
                self.hits += 1
                self.hit_bytes += size_bytes
                hits += 1
                continue
            self._miss(key, size_bytes, allocate)
        return hits

    def _miss(self, key, size_bytes: int, allocate: bool) -> None:
        """A read of ``key`` missed: count it, and allocate the region if asked."""
        self.misses += 1
        self.miss_bytes += size_bytes
        if allocate and key is not None:
            self._insert(key, size_bytes)

    def read_all(self, keys, size_bytes, allocate: bool = True) -> int:
        """``read_many``, in one C-level pass when every region is present (the usual case:
        a lock-step group's shadows reading warm KV rows). Else the reads go one by one: the
        regions moved before the absent one are moved again, in the same order, so the LRU
        order is ``read_many``'s. Returns how many hit."""
        try:
            self.hit(keys, size_bytes)              # (KeyError at an absent region, or None)
        except KeyError:
            return self.read_many(keys, size_bytes, allocate)
        return len(keys)

    def present(self, keys) -> int:
        """How many leading regions of ``keys`` are in L2 (a lookup, nothing changes)."""
        lru = self._lru
        if all(map(lru.__contains__, keys)):        # (None is never in it)
            return len(keys)
        n = 0
        for key in keys:
            if key is None or key not in lru:
                break
            n += 1
        return n

    def hit(self, keys, size_bytes) -> None:
        """``read`` of each region of ``keys``, in order, all present (``present``): hits."""
        deque(map(self._lru.move_to_end, keys), 0)     # (each moved, in order; a C loop)
        self.hit_bytes += size_bytes * len(keys)
        self.hits += len(keys)

    def write(self, key, size_bytes: int, allocate: bool = True) -> None:
        if allocate and key is not None:
            if key in self._lru:
                self._lru.move_to_end(key)
            else:
                self._insert(key, size_bytes)

    def _insert(self, key, size_bytes: int) -> None:
        if size_bytes > self.capacity_bytes:
            return                                  # larger than L2: streams through
        lru = self._lru
        while self.used_bytes + size_bytes > self.capacity_bytes:
            _, old = lru.popitem(last=False)
            self.used_bytes -= old
            self.evictions += 1
        lru[key] = size_bytes
        self.used_bytes += size_bytes
