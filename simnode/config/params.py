"""Parameters declared once, as gem5 declares its Params: type, unit, range, default, doc
and where the value comes from, in one place; everything else is derived from it.

A parameter is a field of a frozen dataclass declared with ``param``::

    @dataclass(frozen=True)
    class MemorySpec:
        hbm_bandwidth_GBps: float = param(doc="HBM bandwidth of the chip", positive=True)
        hbm_arbitration: str = param("fair", "how HBM shares itself ...", choices=("fcfs", "fair"))

``section(Cls)`` nests another declared dataclass (``chip.memory``) and ``section(Cls,
keys=(...))`` a mapping of them (``chip.paths.gm_to_l1``). A kind whose parameters are a
flat list (no dataclass) builds ``Param`` records directly (``Param.flat``). From the
declaration come:

- the YAML reader: ``read(Cls, reader)`` -> keyword values (every type and range checked
  by ``simnode.config.fields.Reader``, so errors name file, key path, value, expectation);
- the ``--set`` checks and the keys a file may leave out: ``optional_keys(Cls)``;
- the resolved configuration: ``resolved(obj)``, a plain mapping of the values;
- the table of ``simnode describe``: ``walk(Cls)`` yields (dotted key, ``Param``).

``Param.unit`` comes from the name's suffix (``latency_ns`` -> ns, ``bandwidth_GBps`` ->
GB/s; ``UNIT_SUFFIXES``) or is given; ``Param.origin`` says where a value comes from:
``sourced`` (a published source), ``reasoned`` (chosen by a stated argument, nothing
published gives it), ``calibrated`` (set to match named measurement cases) or ``setting``
(what a user asks for: a shape, a policy, a seed). A topology or workload file may state
it per value in its comments (``simnode.config.comments``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from simnode.config.fields import Reader

REQUIRED = object()

#: where a parameter's value comes from (``Param.origin``)
ORIGINS = {
    "sourced": "from a published source (facts section, source id)",
    "reasoned": "chosen by a stated argument; nothing published gives it",
    "calibrated": "set to match named measurement cases",
    "setting": "what the user asks for (a shape, a policy, a seed)",
}
#: parameter types and the Reader getter of each
TYPES = ("int", "number", "bool", "str", "ints")
_ANNOTATIONS = {"int": "int", "float": "number", "bool": "bool", "str": "str",
                "tuple": "ints", "tuple[int, ...]": "ints"}

#: units read off a name's suffix (longest first); 1 GB = 1e9 B (simnode.units)
UNIT_SUFFIXES = (
    ("_B_per_cycle", "B/cycle"), ("_ns_per_token", "ns/token"), ("_ns_per_peer", "ns/peer"),
    ("_ops_per_B", "ops/B"), ("_flop_per_B", "FLOP/B"), ("_per_cycle", "1/cycle"),
    ("_GBps", "GB/s"), ("_GHz", "GHz"), ("_KiB", "KiB"), ("_MiB", "MiB"), ("_GB", "GB"),
    ("_bytes", "B"), ("_cycles", "cycles"), ("_ns", "ns"), ("_us", "us"), ("_frac", "fraction"),
)


#: the bounds of a numeric parameter whose declaration gives none, by unit: (the least value
#: of a ``positive`` one, the largest value), so every numeric field of every kind and
#: topology is bounded and ``simnode describe`` prints the range. Rates below the least make
#: one transfer outlast any run (1 MB/s moves a 100 MB EP buffer in 100 simulated seconds);
#: rates, capacities and costs above the largest are at least 250x beyond any chip or link in
#: facts/ (HBM 4 TB/s, 1.85 GHz, a 512 KiB L1, a kernel launch of ~2 us), where times fall
#: below the clock's resolution or sums overflow.
UNIT_RANGES = {
    "GB/s": (1e-3, 1e6), "B/cycle": (1e-3, 1e6), "ops/cycle": (1e-3, 1e6), "GHz": (1e-3, 1e3),
    "instructions/cycle": (1e-3, 1e3), "KiB": (1e-3, 2.0 ** 20), "MiB": (1e-3, 2.0 ** 20),
    "GB": (1e-3, 1e6), "ns": (1e-3, 1e9), "ns/peer": (1e-3, 1e9), "ns/token": (1e-3, 1e9),
    "us": (1e-6, 1e6), "cycles": (1e-3, 1e9), "ops/element": (1e-3, 1e6), "ops/B": (1e-3, 1e6),
    "FLOP/B": (1e-3, 1e6), "fraction": (1e-9, 1.0),
}
#: the largest integer a parameter without a declared maximum takes: a signed 32-bit int.
#: Sizes are counts of elements, tokens, rows or ranks; 2^31 of anything is already 2 GiB at
#: one byte each, and each kind's size check multiplies them exactly (Python integers)
#: before any array is made
INT_MAX = 2 ** 31 - 1
#: the largest value of a number without a declared maximum or a unit in ``UNIT_RANGES``
NUMBER_MAX = 1e9


def unit_of(name: str) -> str | None:
    """The unit a parameter name states by its suffix, or None."""
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return None


@dataclass(frozen=True)
class Param:
    """One declared parameter; ``name`` is filled in from the dataclass field it declares."""
    name: str
    type: str                                 #: one of TYPES
    doc: str
    unit: str = ""                            #: "" for strings and booleans
    default: Any = REQUIRED
    min_value: float | None = None
    max_value: float | None = None
    positive: bool = False
    choices: tuple = ()
    #: one of ORIGINS, or "" where the file that gives the value states it (its comments:
    #: hardware and supernode values, each commented with its source in topologies/)
    origin: str = "setting"
    cite: str = ""                            #: sources or cases behind the declared value
    #: a further check of the read value: returns what was expected when it fails, else None
    check: Callable[[Any], str | None] | None = None
    #: for a parameter without a constant default that a file may still leave out: what it
    #: then is ("leaf_radix"); its reader passes the value (``read(..., defaults=)``)
    omitted: str = ""

    def __post_init__(self):
        if self.type not in TYPES:
            raise TypeError(f"parameter {self.name}: type {self.type!r} is not one of {TYPES}")
        if self.origin and self.origin not in ORIGINS:
            raise TypeError(f"parameter {self.name}: origin {self.origin!r} is not one of {tuple(ORIGINS)}")

    @classmethod
    def flat(cls, name: str, type: str, default: Any = REQUIRED, doc: str = "", choices=(),  # noqa: A002
             min_value: float | None = None, **kw) -> "Param":
        """A parameter declared outside a dataclass (a flat list of a kind's fields); the
        unit comes from the name unless given."""
        unit = kw.pop("unit", None)
        return cls(name, type, doc, _unit(name, type, unit), default, min_value,
                   choices=tuple(choices), **kw)

    @property
    def required(self) -> bool:
        """Whether every file must give it (no default, constant or not)."""
        return self.default is REQUIRED and not self.omitted

    @property
    def bounds(self) -> tuple:
        """(least, largest) value a numeric parameter takes: its declared ``min``/``max``, else
        those of its unit (``UNIT_RANGES``; the least only for a ``positive`` one) or of its
        type (``INT_MAX``, ``NUMBER_MAX``)."""
        least, largest = UNIT_RANGES.get(self.unit, (None, None))
        if self.type in ("int", "ints"):
            largest = INT_MAX if largest is None else min(int(largest), INT_MAX)
            least = None
        elif largest is None:
            largest = NUMBER_MAX
        lo = self.min_value if self.min_value is not None else (least if self.positive else None)
        hi = self.max_value if self.max_value is not None else largest
        return lo, hi

    def read(self, r: Reader, default: Any = REQUIRED):
        """The value of this parameter in ``r``'s mapping (``default`` replaces the declared one)."""
        default = self.default if default is REQUIRED else default
        kw = {} if default is REQUIRED else {"default": default}
        lo, hi = self.bounds
        if self.type == "int":
            value = r.integer(self.name, min_value=lo, max_value=hi, **kw)
        elif self.type == "number":
            value = r.number(self.name, min_value=lo, max_value=hi, positive=self.positive, **kw)
        elif self.type == "bool":
            value = r.boolean(self.name, **kw)
        elif self.type == "ints":
            value = r.integer_list(self.name, min_value=lo, max_value=hi, **kw)
        else:
            value = r.string(self.name, choices=self.choices or None, **kw)
        if self.check is not None:
            expected = self.check(value)
            if expected:
                raise r.error(self.name, value, expected)
        return value

    def range_text(self) -> str:
        """The allowed values, as ``simnode describe`` prints them."""
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.type not in ("int", "number", "ints"):
            return ""
        lo, hi = self.bounds
        if lo is not None:
            return f"{_num(lo)}..{_num(hi)}"
        return f"> 0, <= {_num(hi)}" if self.positive else f"<= {_num(hi)}"

    def describe(self) -> dict:
        """The declaration as a plain record (``simnode describe --json``)."""
        return {"type": self.type, "unit": self.unit, "range": self.range_text(),
                "default": (None if self.default is REQUIRED else _plain(self.default)) if not self.omitted
                else self.omitted, "origin": self.origin,
                "cite": self.cite, "doc": self.doc}


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else f"{x:,}" if abs(x) >= 10 ** 6 else str(x)


def _unit(name: str, type_: str, unit: str | None) -> str:
    if unit is not None:
        return unit
    if type_ in ("str", "bool"):
        return ""
    return unit_of(name) or ""


def _plain(value):
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


class FrozenMap(dict):
    """A read-only mapping that pickles (a ``MappingProxyType`` does not), for the mapping
    parameters of frozen specs (``chip.cube.macs_per_cycle``, ``chip.paths``): a run spec
    goes to worker processes whole."""

    def _read_only(self, *args, **kwargs):
        raise TypeError("a parameter mapping is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self):
        return (FrozenMap, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"


# -- declaring ------------------------------------------------------------------------------

_PARAM, _SECTION = "simnode.param", "simnode.section"


def param(default: Any = REQUIRED, doc: str = "", *, unit: str | None = None,
          min: float | None = None, max: float | None = None, positive: bool = False,  # noqa: A002
          choices=(), origin: str = "setting", cite: str = "", keys: tuple = (),
          check: Callable | None = None, omitted: str = "", repr: bool = True):  # noqa: A002
    """Declare a dataclass field as a parameter. ``keys``: the value is a mapping with
    exactly these keys, each of the field's element type (``macs_per_cycle: {bf16: ..}``)."""
    spec = {"default": default, "doc": doc, "unit": unit, "min_value": min, "max_value": max,
            "positive": positive, "choices": tuple(choices), "origin": origin, "cite": cite,
            "keys": tuple(keys), "check": check, "omitted": omitted}
    kw = {} if default is REQUIRED else {"default": default}
    return dataclasses.field(metadata={_PARAM: spec}, repr=repr, **kw)


def section(cls, doc: str = "", *, keys: tuple = (), key_field: str = "", repr: bool = True):  # noqa: A002
    """Declare a dataclass field as a nested section of declared parameters (``cls``), or
    with ``keys`` a mapping of such sections, one per key; ``key_field`` names the field of
    ``cls`` that receives the key (``PathSpec.name``)."""
    return dataclasses.field(metadata={_SECTION: {"cls": cls, "doc": doc, "keys": tuple(keys),
                                                  "key_field": key_field}}, repr=repr)


def _element_type(annotation: str) -> str:
    text = str(annotation).replace("typing.", "")
    if text.startswith("Mapping[str, ") and text.endswith("]"):
        text = text[len("Mapping[str, "):-1]
    try:
        return _ANNOTATIONS[text]
    except KeyError:
        raise TypeError(f"no parameter type for the annotation {annotation!r}") from None


@dataclass(frozen=True)
class Section:
    """A field declared with ``section``: a nested declared dataclass, or a mapping of them."""
    name: str
    cls: type
    doc: str
    keys: tuple = ()
    key_field: str = ""


def declared(cls) -> tuple:
    """The declarations of ``cls``, in field order: ``Param`` and ``Section`` records
    (``Param`` of a mapping field has ``keys``, see ``mapping_keys``)."""
    cached = _DECLARED.get(cls)
    if cached is not None:
        return cached
    out = []
    for f in dataclasses.fields(cls):
        if _PARAM in f.metadata:
            spec = dict(f.metadata[_PARAM])
            keys = spec.pop("keys")
            type_ = _element_type(f.type)
            p = Param(f.name, type_, spec.pop("doc"), _unit(f.name, type_, spec.pop("unit")), **spec)
            if keys:
                _MAPPING_KEYS[(cls, f.name)] = keys
            out.append(p)
        elif _SECTION in f.metadata:
            out.append(Section(f.name, **f.metadata[_SECTION]))
    _DECLARED[cls] = out = tuple(out)
    return out


_DECLARED: dict = {}
_MAPPING_KEYS: dict = {}


def mapping_keys(cls, name: str) -> tuple:
    """The keys of a mapping parameter (``()`` for a plain one)."""
    declared(cls)
    return _MAPPING_KEYS.get((cls, name), ())


def declared_param(cls, name: str) -> Param:
    """The declaration of parameter ``name`` of ``cls``."""
    for p in declared(cls):
        if p.name == name and isinstance(p, Param):
            return p
    raise KeyError(f"{cls.__name__} declares no parameter {name!r}")


def params_of(cls) -> tuple[Param, ...]:
    """The plain (non-section) parameters of ``cls``."""
    return tuple(p for p in declared(cls) if isinstance(p, Param))


# -- reading ----------------------------------------------------------------------------------

def read(cls, r: Reader, defaults: Mapping | None = None, skip: tuple = ()) -> dict:
    """Keyword values of every declared field of ``cls`` read from ``r`` (sections recursed);
    ``defaults`` replaces declared defaults (a default that depends on another value);
    fields in ``skip`` are left to the caller. ``r.finish()`` is the caller's."""
    defaults = defaults or {}
    out = {}
    for d in declared(cls):
        if d.name in skip:
            continue
        if isinstance(d, Section):
            out[d.name] = _read_section(d, r)
            continue
        keys = mapping_keys(cls, d.name)
        if keys:
            m = r.section(d.name)
            one = dataclasses.replace(d, name="")
            values = {}
            for key in keys:
                values[key] = dataclasses.replace(one, name=key).read(m)
            m.finish()
            out[d.name] = FrozenMap(values)
        else:
            out[d.name] = d.read(r, defaults.get(d.name, REQUIRED))
    return out


def _read_section(d: Section, r: Reader):
    s = r.section(d.name)
    if not d.keys:
        obj = d.cls(**read(d.cls, s))
        s.finish()
        return obj
    out = {}
    for key in d.keys:
        one = s.section(key)
        kw = read(d.cls, one)
        if d.key_field:
            kw[d.key_field] = key
        out[key] = d.cls(**kw)
        one.finish()
    s.finish()
    return FrozenMap(out)


def build(cls, r: Reader, **fixed):
    """``cls`` built from ``r`` (every declared field) and ``fixed`` values; finishes ``r``."""
    obj = cls(**read(cls, r, skip=tuple(fixed)), **fixed)
    r.finish()
    return obj


# -- derived views ----------------------------------------------------------------------------

def walk(cls, prefix: str = "") -> Iterator[tuple[str, Param]]:
    """(dotted key, Param) for every leaf parameter of ``cls``, sections and mappings expanded."""
    for d in declared(cls):
        key = f"{prefix}{d.name}"
        if isinstance(d, Section):
            if d.keys:
                for k in d.keys:
                    yield from walk(d.cls, f"{key}.{k}.")
            else:
                yield from walk(d.cls, key + ".")
            continue
        keys = mapping_keys(cls, d.name)
        if keys:
            for k in keys:
                yield f"{key}.{k}", dataclasses.replace(d, name=k)
        else:
            yield key, d


def optional_keys(cls, prefix: str = "") -> tuple[str, ...]:
    """Dotted keys a file may leave out (they have a declared default)."""
    return tuple(k for k, p in walk(cls, prefix) if not p.required)


def resolved(obj) -> dict:
    """The declared values of a built object, as a plain nested mapping (JSON-ready)."""
    out = {}
    for d in declared(type(obj)):
        value = getattr(obj, d.name)
        if isinstance(d, Section):
            out[d.name] = ({k: resolved(v) for k, v in value.items()} if d.keys else resolved(value))
        else:
            out[d.name] = _plain(value)
    return out
