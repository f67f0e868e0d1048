"""Every parameter is declared once (simnode.config.params) and everything else derives from
that declaration: each kind's fields, the chip and supernode specs, and what the code reads.

- a kind's fields are declarations, each name once, with a doc and (numbers) a unit;
- no dataclass that carries a kind's parameters declares a default of its own beside the
  declaration (two defaults of one parameter drift apart);
- every ``params["name"]`` a kind's module reads is one of its declared fields;
- a field name means one thing: two kinds that declare it (simnode's own, or plugged in
  through ``SIMNODE_KINDS``) give it the same type, unit, bounds and choices;
- the chip and supernode specs are read only through their declarations (no hand-written
  ``r.number("key")`` reader), and every key of a shipped topology file is declared.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from simnode.config import comments, params
from simnode.config.chip import ChipSpec
from simnode.config.params import Param
from simnode.config.supernode import SupernodeSpec
from simnode.workloads import registry
from simnode.workloads.registry import all_kinds, kind_module

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simnode"
KINDS = all_kinds()


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _dataclass_fields():
    """(file, class, field, how) for every annotated field of every dataclass in simnode/:
    how = "param" (declared: ``param()``, ``section()``, or a shared declaration's factory
    named ``*_param``, e.g. ``kernels.num_cores_param``), "none" (no default) or "default"."""
    out = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ClassDef) and _is_dataclass(node)):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    v = stmt.value
                    if v is None:
                        how = "none"
                    elif isinstance(v, ast.Call) and (getattr(v.func, "id", "") in ("param", "section")
                                                       or getattr(v.func, "id", "").endswith("_param")):
                        how = "param"
                    else:
                        how = "default"
                    out.append((path.relative_to(ROOT), node.name, stmt.target.id, how))
    return out


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_kinds_fields_are_declarations_each_named_once(name):
    fields = KINDS[name].fields
    assert all(isinstance(f, Param) for f in fields)
    names = [f.name for f in fields]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for f in fields:
        assert f.doc, f"{name}.{f.name} has no doc"
        if f.type in ("int", "number", "ints"):
            assert f.unit, f"{name}.{f.name} has no unit (say '1' for a plain number)"


def _module_file(name: str) -> Path:
    return Path(kind_module(name).__file__)


def _built_by(module: Path) -> set[str]:
    """Names of the classes a module calls (``GemmParams(...)``, ``kernels.X(...)``)."""
    out = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
    return out


@pytest.mark.parametrize("name", sorted(KINDS))
def test_no_dataclass_redeclares_a_kinds_parameter_with_its_own_default(name):
    """The dataclasses a kind fills from its parameters (its kernel's params, DeepEP's plan
    and costs) are either the declaration or plain records: no default of their own."""
    kind = KINDS[name]
    names = {f.name for f in kind.fields}
    built = _built_by(_module_file(name)) | {c.__name__ for c in kind.records}
    by_class: dict = {}
    for file, cls, fld, how in _dataclass_fields():
        if fld in names and cls in built:
            by_class.setdefault((file, cls), []).append((fld, how))
    for (file, cls), fields in by_class.items():
        if len(fields) < 2:             # a record that shares one name by chance (a result's seed)
            continue
        second = [fld for fld, how in fields if how == "default"]
        assert not second, (f"{file}:{cls} declares {second} with defaults of its own beside "
                            f"the {name} kind's declaration: declare them with param() there, "
                            f"or leave them without a default")


def _subscripted_params(path: Path) -> set[str]:
    """Names read as ``params["name"]`` (or ``params.get("name")``) in a module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == "params" and isinstance(node.slice, ast.Constant)):
            out.add(node.slice.value)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "params"
                and node.args and isinstance(node.args[0], ast.Constant)):
            out.add(node.args[0].value)
    return out


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_parameter_a_kind_reads_is_declared(name):
    kind = KINDS[name]
    module = _module_file(name)
    read = _subscripted_params(module)
    declared = {f.name for f in kind.fields}
    if kind.more_fields is not None:      # a tile program declares its own, in its signature
        declared |= read - {"program"}
    assert read <= declared, f"{module} reads undeclared parameters {sorted(read - declared)}"


#: what two declarations of one field name must share (defaults and docs may differ); a
#: dtype field's choices are the dtypes its kernel implements, so they may differ by kind
SAME_IN_EVERY_KIND = ("type", "unit", "min_value", "max_value", "positive", "choices")
DTYPE_SHARED = tuple(a for a in SAME_IN_EVERY_KIND if a != "choices")



def declaration_differences(kinds: dict) -> dict[str, list[str]]:
    """Field name -> how kinds declare it differently from its first declaration (kinds in
    name order): "kind_a/kind_b: unit 'rows' / 'items'"."""
    first: dict = {}
    out: dict = {}
    for kind in (kinds[k] for k in sorted(kinds)):
        for f in kind.fields:
            if f.name not in first:
                first[f.name] = (kind.name, f)
                continue
            owner, g = first[f.name]
            shared = DTYPE_SHARED if f.name == "dtype" or f.name.endswith("_dtype") else SAME_IN_EVERY_KIND
            differ = [f"{a} {getattr(g, a)!r} / {getattr(f, a)!r}" for a in shared
                      if getattr(g, a) != getattr(f, a)]
            if differ:
                out.setdefault(f.name, []).append(f"{owner}/{kind.name}: " + ", ".join(differ))
    return out


def test_a_field_name_is_declared_alike_by_every_kind():
    found = declaration_differences(KINDS)
    assert not found, f"fields declared differently by two kinds: {found}"


def test_a_plugged_in_kind_is_held_to_the_same_declarations(tmp_path, monkeypatch, repo_root):
    """Plug-ins count: the toy supernode kind declares its fields as simnode's kinds do, and
    a plug-in whose ``n`` is a number where the GEMM's is a column count is found."""
    odd = tmp_path / "odd_columns.py"
    odd.write_text("from simnode.workloads.registry import Field, WorkloadKind\n"
                   "KIND = WorkloadKind('odd_columns', (Field('n', 'number', 1.0, 'n as a float', "
                   "unit='1'),), run=None)\n")
    monkeypatch.setenv(registry.PLUGINS_VARIABLE, f"{repo_root / 'tests/kinds/toy_ring.py'},{odd}")
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    kinds = all_kinds()
    assert {"toy_ring", "odd_columns"} <= set(kinds)
    found = declaration_differences(kinds)
    assert set(found) == {"n"}
    assert found["n"] == ["gemm/odd_columns: type 'int' / 'number', unit 'columns' / '1', "
                          "min_value 1 / None"]


def test_the_topology_specs_are_read_only_through_their_declarations():
    keys = [k for k, _ in params.walk(ChipSpec, "chip.")] + [k for k, _ in params.walk(SupernodeSpec, "supernode.")]
    assert len(keys) == len(set(keys))
    for module in ("config/chip.py", "config/topology.py", "config/supernode.py"):
        tree = ast.parse((PACKAGE / module).read_text())
        hand = [node.func.attr for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("integer", "number", "string", "boolean", "integer_list")]
        assert not hand, f"{module} reads {hand} by hand instead of through a declaration"


@pytest.mark.parametrize("topology", sorted(p.name for p in (ROOT / "topologies").glob("*.yaml")))
def test_every_key_of_a_shipped_topology_is_declared(topology):
    declared = {k for k, _ in params.walk(ChipSpec, "chip.")} | {k for k, _ in params.walk(SupernodeSpec, "supernode.")}
    prefixes = {k.rsplit(".", i)[0] for k in declared for i in range(1, k.count(".") + 1)}
    for key in comments.annotate(ROOT / "topologies" / topology).lines:
        assert key in declared or key in prefixes, f"{topology}: {key} is not declared"


def test_a_declaration_states_units_the_names_do_not():
    for k, p in list(params.walk(ChipSpec)) + list(params.walk(SupernodeSpec)):
        if p.type in ("int", "number"):
            assert p.unit, f"{k} has no unit"
