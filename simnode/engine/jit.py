"""Compile the engine's inner loops with numba, on demand.

The inner loops (``simnode.engine.maxmin``, ``simnode.engine.share``) are written once in
the subset of Python that numba compiles. They run interpreted on Python lists, which is
fastest for small problems, and compiled on numpy arrays once a run is large enough to
repay numba's import (~0.5 s) and its cached code. ``compile_functions(funcs)`` returns
compiled clones of the given functions (same code objects) bound to a namespace where
they call each other's compiled forms, or None if numba is not installed: the
interpreted forms then serve, with the same results.
"""

from __future__ import annotations

import heapq
import math
import types

_CACHE: dict = {}


def compile_functions(funcs, constants: dict) -> dict | None:
    """{name: compiled function} for ``funcs`` (module-level functions calling each other by
    name), or None without numba. ``constants``: the other globals they read."""
    key = tuple(f.__qualname__ + "@" + f.__module__ for f in funcs)
    if key in _CACHE:
        return _CACHE[key]
    try:
        import numba
    except ImportError:                         # the interpreted forms serve
        _CACHE[key] = None
        return None
    jit = numba.njit(cache=True, nogil=True)
    space = {"heapq": heapq, "math": math, **constants}
    out = {}
    for f in funcs:
        clone = types.FunctionType(f.__code__, space, f.__name__, f.__defaults__)
        clone.__qualname__ = f.__qualname__
        clone.__module__ = f.__module__
        space[f.__name__] = out[f.__name__] = jit(clone)
    _CACHE[key] = out
    return out
