"""Tile program files: the ``@T.program`` function, its parameters, and building it.

``load(path, source)`` imports a program file and returns a ``ProgramSpec``: the function
and its parameters, read from its signature (the annotation or default gives the type;
``T.param(default, doc=, choices=, min=)`` documents one). ``spec.fields()`` turns them into
workload fields, so ``--set`` reaches them like any kind's. ``build(spec, chip, params)``
runs the program under a fresh ``Builder`` and returns it. Mistakes name the program's file
and line: a file that does not import (a ``ConfigError`` on the workload's ``program``
key), an error the language raises (a ``ScheduleError`` at the statement), or any other
exception of the program's own code (its innermost line in the program, as a
``ScheduleError``: no traceback reaches the user).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from simnode.config import params as declarations
from simnode.errors import ConfigError, ScheduleError, SimnodeError
from simnode.tile.site import FRAMEWORK, fmt

_REQUIRED = inspect.Parameter.empty
_TYPES = {int: "int", float: "number", bool: "bool", str: "str",
          "int": "int", "float": "number", "bool": "bool", "str": "str"}
RESERVED = ("kind", "program")


@dataclass(frozen=True)
class Param:
    """``T.param(default, doc=, choices=, min=, unit=)``: a documented program parameter."""
    default: object = _REQUIRED
    doc: str = ""
    choices: tuple = ()
    min: float | None = None
    unit: str | None = None              #: None: read off the name's suffix (``_ns``, ``_bytes``)


def param(default=_REQUIRED, doc: str = "", choices=(), min=None, unit=None) -> Param:  # noqa: A002
    return Param(default, doc, tuple(choices), min, unit)


def program(fn=None):
    """``@T.program``: marks the kernel function of a program file."""
    def mark(f):
        f.__tile_program__ = True
        return f
    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: str                 #: "int", "number", "bool", "str" (workload Field types)
    default: object           #: _REQUIRED when the workload must give it
    doc: str
    choices: tuple
    min: float | None
    unit: str | None = None


@dataclass(frozen=True)
class ProgramSpec:
    path: Path
    name: str                 #: the function's name
    fn: object
    params: tuple             #: ParamSpec

    def fields(self) -> tuple:
        """The parameters as workload fields (``simnode.config.params.Param``), declared by
        the program's signature."""
        return tuple(declarations.Param.flat(
            p.name, p.type, declarations.REQUIRED if p.default is _REQUIRED else p.default,
            p.doc or f"parameter of {self.path.name}", p.choices, p.min, unit=p.unit)
            for p in self.params)


def load(path, source: str, key: str = "program") -> ProgramSpec:
    """Import the program file at ``path``; ``source`` and ``key`` name it in errors."""
    p = Path(path)
    if not str(path).strip() or not p.is_file() or p.suffix != ".py":
        raise ConfigError(source, key, str(path), "an existing Python file (.py) holding a "
                          "@T.program function")
    p = p.resolve()
    name = "simnode_tile_program_" + hashlib.sha1(str(p).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as exc:
        raise ConfigError(source, key, str(path), f"a valid Python file ({fmt((str(p), exc.lineno or 0))}: "
                          f"{exc.msg})") from None
    except SimnodeError:
        raise
    except Exception as exc:        # the program's own code failed on import
        raise ScheduleError(_located(exc, p)) from None
    fns = [v for v in vars(mod).values()
           if callable(v) and getattr(v, "__tile_program__", False) and getattr(v, "__module__", "") == name]
    if len(fns) != 1:
        found = ", ".join(f.__name__ for f in fns) or "none"
        raise ConfigError(source, key, str(path), f"a file with exactly one @T.program function "
                          f"(found: {found})")
    fn = fns[0]
    return ProgramSpec(p, fn.__name__, fn, _params(fn, p, source, key))


def _params(fn, path: Path, source: str, key: str) -> tuple:
    out = []
    for name, prm in inspect.signature(fn).parameters.items():
        where = f"{fmt((str(path), fn.__code__.co_firstlineno))}: parameter '{name}'"
        if prm.kind in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD):
            raise ConfigError(source, key, str(path), f"named parameters only ({where} is *{name})")
        if name in RESERVED:
            raise ConfigError(source, key, str(path), f"no parameter named {name} ({where}): the "
                              f"workload uses that key itself")
        d = prm.default
        doc, choices, mn, unit = "", (), None, None
        if isinstance(d, Param):
            d, doc, choices, mn, unit = d.default, d.doc, d.choices, d.min, d.unit
        ann = prm.annotation
        typ = _TYPES.get(ann) if ann is not _REQUIRED else None
        if typ is None and ann is _REQUIRED and d is not _REQUIRED:
            typ = _TYPES.get(type(d))
        if typ is None:
            raise ConfigError(source, key, str(path), f"a type for every parameter: int, float, "
                              f"bool or str ({where} has {ann!r})")
        if d is not _REQUIRED and typ == "number" and isinstance(d, int) and not isinstance(d, bool):
            d = float(d)
        out.append(ParamSpec(name, typ, d, doc, choices, mn, unit))
    return tuple(out)


def build(spec: ProgramSpec, chip, params: dict, keep_meta: bool = False):
    """Run the program for ``params`` on ``chip``; returns the finished ``Builder``."""
    from simnode.tile.builder import Builder
    from simnode.tile.site import fail
    args = {}
    for prm in spec.params:
        if prm.name in params:
            args[prm.name] = params[prm.name]
        elif prm.default is _REQUIRED:
            raise ConfigError(str(spec.path), prm.name, "<missing>", "a value for this parameter")
        else:
            args[prm.name] = prm.default
    unknown = sorted(set(params) - set(args))
    if unknown:
        raise ConfigError(str(spec.path), unknown[0], params[unknown[0]],
                          f"one of the program's parameters ({', '.join(args) or 'none'})")
    b = Builder(chip, keep_meta)
    with b:
        try:
            spec.fn(**args)
        except SimnodeError:
            raise
        except Exception as exc:
            raise ScheduleError(_located(exc, spec.path)) from None
        if b.kernel is None:
            fail("the program launched no T.Kernel", (str(spec.path), spec.fn.__code__.co_firstlineno))
    return b


def _located(exc: BaseException, path: Path) -> str:
    """``file:line: Type: message`` at the program's innermost line in the traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if Path(f.filename).resolve() == path]
    user = mine or [f for f in frames if f.filename not in FRAMEWORK]
    f = user[-1] if user else (frames[-1] if frames else None)
    at = fmt((f.filename, f.lineno)) if f is not None else fmt((str(path), 0))
    return f"{at}: {type(exc).__name__}: {exc}"
