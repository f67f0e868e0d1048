"""No module imports a layer above its own (design.md's layers, bottom up).

Every import statement of simnode/, at module level or inside a function, is read from the
source (ast) and checked against ``LAYERS``: a module may import its own layer and those
below. A package's ``__init__`` and its modules share the package's layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simnode"

#: bottom up; the first matching prefix (longest first) names a module's layer
LAYERS = (
    ("base", ("simnode", "simnode.units", "simnode.errors", "simnode.progress", "simnode.forked")),
    ("config", ("simnode.config",)),                         # parameter declarations, specs, files
    ("engine, instructions", ("simnode.engine", "simnode.instr")),   # instr: records, schedules
    ("hardware, network", ("simnode.hardware", "simnode.network")),
    ("kernels, tile, moe", ("simnode.kernels", "simnode.tile", "simnode.moe")),
    ("decode", ("simnode.decode",)),                         # a decode step's model, kernels, memory
    ("report", ("simnode.report",)),                         # the result shape and its renderers
    ("workloads", ("simnode.workloads",)),
    # calibrate: the fit's solver, cases and report, which run cases through the commands'
    # executor and read validation files (simnode calibrate, sweep --band)
    ("commands", ("simnode.commands", "simnode.calibrate", "simnode.cli", "simnode.__main__")),
)
_PREFIXES = sorted(((p, rank) for rank, (_, ps) in enumerate(LAYERS) for p in ps),
                   key=lambda pr: -len(pr[0]))

def layer(module: str) -> int:
    for prefix, rank in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported simnode module, line) for every import of ``path``."""
    out = []
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("simnode")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            if not base.startswith("simnode"):
                continue
            for a in node.names:        # `from simnode.instr import isa` imports simnode.instr.isa
                sub = f"{base}.{a.name}"
                out.append((sub if (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                            or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else base, node.lineno))
    return out


def upward_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_name(path)
        for target, line in imports(path):
            if layer(target) > layer(me):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {me} ({LAYERS[layer(me)][0]}) "
                             f"imports {target} ({LAYERS[layer(target)][0]})")
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


def test_the_walk_finds_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a config module importing workloads is found."""
    fake = PACKAGE / "config" / "_layers_probe.py"
    fake.write_text("def f():\n    from simnode.workloads.registry import get_kind\n")
    try:
        assert any("_layers_probe.py:2: simnode.config._layers_probe (config) imports "
                   "simnode.workloads.registry (workloads)" in f for f in upward_imports())
    finally:
        fake.unlink()
