"""Engine: the mechanisms every hardware model shares.

``share.Share``: the one engine for every shared rate (transfers on resources, max-min
fair or first come first served, event-driven, batched; a package of parts, one job each);
``maxmin``: its solvers behind one driver; ``jit``: compiling the inner loops with numba for
long runs; ``clock``: the one shim below SimPy's public API; ``mix``: splitmix64, the fixed
hash; ``series``: per-resource time series in bounded memory; ``trace``: Chrome Trace Event
JSON streamed to disk.
"""
