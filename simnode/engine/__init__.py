"""Engine: the mechanisms every hardware model shares.

``share.Share``: the one engine for every shared rate (transfers on resources, max-min
fair or first come first served, event-driven, batched); ``maxmin``: its solver;
``jit``: compiling the inner loops with numba for long runs; ``clock``: the one shim below
SimPy's public API; ``mix``: splitmix64; ``series``: per-resource
time series in bounded memory; ``trace``: Chrome Trace Event JSON streamed to disk.
"""
