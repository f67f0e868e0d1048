"""Every import of simnode/ goes down the layers, and none closes a circle.

Every import statement of simnode/, at module level or inside a function, is read from the
source (ast). A module may import its own layer and those below (``LAYERS``, bottom up); a
package's ``__init__`` and its modules share the package's layer, and every package has a
layer of its own, so an import between two packages always has a direction. No import
circle: not between modules (a -> b -> a, however long, function-level imports included),
and not between packages (package A imports B and B imports A). No module imports a
command module (one with ``register``) but ``simnode.cli``, which finds them.

The walk takes the folder it reads, so the tests at the end plant an upward import and
circles in a copy of the package and see it fail.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simnode"

#: bottom up: (layer, the packages or modules it holds, what they are); a module's layer is
#: the one whose longest prefix names it. A package listed here may not exist yet.
LAYERS = (
    ("base", ("simnode", "simnode.units", "simnode.errors", "simnode.progress", "simnode.forked"),
     "the version, unit conversions, user-facing errors, the progress bar, a forked call"),
    ("config", ("simnode.config",), "parameters declared once; topology, overlay and YAML files"),
    ("engine", ("simnode.engine",), "the one sharing engine, its solvers, series, traces"),
    ("instr", ("simnode.instr",), "instruction records and schedules (what kernels emit)"),
    ("hardware", ("simnode.hardware",), "AI-core pipes, L2 and HBM: a chip running a schedule"),
    ("network", ("simnode.network",), "Clos and mesh topologies, routes, flows"),
    ("kernels", ("simnode.kernels",), "hand-written schedule generators (GEMM, sparse MLA, ...)"),
    ("tile", ("simnode.tile",), "the tile language and its programs, lowered to instructions"),
    ("ep", ("simnode.ep",), "the expert-parallel family: what every EP kernel shares"),
    ("moe", ("simnode.moe",), "the MoE layer (its kernels on one clock), its trace, kernel profiles"),
    ("decode", ("simnode.decode",), "a model's decode step: the model, deployment, kernel list, HBM footprint"),
    ("chakra", ("simnode.chakra",), "Chakra execution traces: ET files in and out, their replay"),
    ("report", ("simnode.report",), "the result shape, tables, plots, the HTML page"),
    ("workloads", ("simnode.workloads",), "workload kinds and a run parsed once (RunSpec)"),
    ("runs", ("simnode.runs",), "the executor, signals, validation cases, regression baselines"),
    ("calibrate", ("simnode.calibrate",), "fitting values on cases, bands of overlays"),
    ("commands", ("simnode.commands", "simnode.cli", "simnode.__main__"),
     "one module per command (argument parsing, printing) and the CLI that finds them"),
)
#: the layers that hold more than one package: the base modules, and the CLI with its commands
SHARED = {"base", "commands"}
_PREFIXES = sorted(((p, rank) for rank, (_, ps, _) in enumerate(LAYERS) for p in ps),
                   key=lambda pr: -len(pr[0]))
#: the modules that may import a command module
COMMAND_FINDERS = {"simnode.cli", "simnode.commands"}


def layer(module: str) -> int:
    for prefix, rank in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def package_of(module: str) -> str:
    """The top-level package (or base module) a module belongs to: ``simnode.engine``."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[str, int]]:
    """(imported simnode module, line) for every import of ``path``."""
    out = []
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
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
                where = root.parent / sub.replace(".", "/")
                out.append((sub if where.with_suffix(".py").exists() or where.is_dir() else base,
                            node.lineno))
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, str]]:
    """module -> {imported module: where (``FILE:LINE``, the first import of it)}."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        me = module_name(path, root)
        edges = graph.setdefault(me, {})
        for target, line in imports(path, root):
            if target != me:
                edges.setdefault(target, f"{path.relative_to(root.parent)}:{line}")
    return graph


def upward_imports(root: Path = PACKAGE) -> list[str]:
    found = []
    for me, edges in import_graph(root).items():
        for target, where in edges.items():
            if layer(target) > layer(me):
                found.append(f"{where}: {me} ({LAYERS[layer(me)][0]}) "
                             f"imports {target} ({LAYERS[layer(target)][0]})")
    return found


def circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One circle (a list of nodes, the first repeated at the end) per group of nodes that
    reach each other (a strongly connected component of more than one node)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:           # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_way_back(graph, set(group), min(group)) for group in groups)


def _way_back(graph: dict[str, dict[str, str]], members: set[str], start: str) -> list[str]:
    """The shortest circle from ``start`` back to it through ``members`` (breadth first)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    return paths[v] + [start]
                if w in members and w not in paths:
                    paths[w] = paths[v] + [w]
                    step.append(w)
        frontier = step
    raise AssertionError(f"{start} is in no circle")


def _told(circle: list[str], graph: dict[str, dict[str, str]]) -> str:
    hops = "; ".join(f"{graph[a][b]}: {a} imports {b}" for a, b in zip(circle, circle[1:]))
    return " -> ".join(circle) + f" ({hops})"


def module_circles(root: Path = PACKAGE) -> list[str]:
    graph = import_graph(root)
    return [_told(c, graph) for c in circles(graph)]


def package_circles(root: Path = PACKAGE) -> list[str]:
    packages: dict[str, dict[str, str]] = {}
    for me, edges in import_graph(root).items():
        mine = packages.setdefault(package_of(me), {})
        for target, where in edges.items():
            if package_of(target) != package_of(me):
                mine.setdefault(package_of(target), where)
    return [_told(c, packages) for c in circles(packages)]


def command_imports(root: Path = PACKAGE) -> list[str]:
    """Imports of a command module (a module of simnode.commands defining ``register``) by
    any module but those that find the commands."""
    commands = {module_name(p, root) for p in (root / "commands").glob("*.py")
                if any(isinstance(n, ast.FunctionDef) and n.name == "register"
                       for n in ast.parse(p.read_text()).body)}
    return [f"{where}: {me} imports the command module {target}"
            for me, edges in import_graph(root).items() if me not in COMMAND_FINDERS
            for target, where in edges.items() if target in commands]


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


def test_no_import_circle_between_modules():
    assert module_circles() == []


def test_no_import_circle_between_packages():
    assert package_circles() == []


def test_only_the_cli_imports_a_command_module():
    assert command_imports() == []


def test_every_package_has_a_layer_of_its_own():
    """Each package of simnode/ is in LAYERS, and only the base layer and the commands
    layer hold more than one (grouping two packages would hide an import between them)."""
    for path in PACKAGE.iterdir():
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            layer(module_name(path / "__init__.py" if path.is_dir() else path))
    for name, members, _ in LAYERS:
        assert len(members) == 1 or name in SHARED, f"layer {name} holds {members}"


def _copy(tmp_path: Path) -> Path:
    """A copy of the package's sources to plant imports in."""
    root = tmp_path / "simnode"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def test_the_walk_finds_an_upward_import(tmp_path):
    """A config module importing workloads (inside a function) is found."""
    root = _copy(tmp_path)
    (root / "config" / "_layers_probe.py").write_text(
        "def f():\n    from simnode.workloads.registry import get_kind\n")
    assert any("_layers_probe.py:2: simnode.config._layers_probe (config) imports "
               "simnode.workloads.registry (workloads)" in f for f in upward_imports(root))
    assert upward_imports(PACKAGE) == []


def test_the_walk_finds_a_circle_of_modules(tmp_path):
    """Three modules of one layer in a circle, one link inside a function, is named in order."""
    root = _copy(tmp_path)
    (root / "config" / "_probe_a.py").write_text("from simnode.config import _probe_b\n")
    (root / "config" / "_probe_b.py").write_text("import simnode.config._probe_c\n")
    (root / "config" / "_probe_c.py").write_text(
        "def f():\n    from simnode.config._probe_a import f\n")
    assert upward_imports(root) == []
    found = module_circles(root)
    assert len(found) == 1
    assert found[0].startswith("simnode.config._probe_a -> simnode.config._probe_b -> "
                               "simnode.config._probe_c -> simnode.config._probe_a (")
    assert "simnode/config/_probe_c.py:2: simnode.config._probe_c imports simnode.config._probe_a" \
        in found[0]


def test_the_walk_finds_a_circle_of_packages(tmp_path):
    """Two packages importing each other through different modules (no circle of modules)."""
    root = _copy(tmp_path)
    (root / "config" / "_probe.py").write_text("from simnode.engine import _probe\n")
    (root / "engine" / "_probe.py").write_text("import simnode.config.fields\n")
    assert module_circles(root) == []
    found = package_circles(root)
    assert len(found) == 1 and found[0].startswith("simnode.config -> simnode.engine -> simnode.config (")
    assert "simnode/config/_probe.py:1: simnode.config imports simnode.engine" in found[0]


def test_the_walk_finds_an_import_of_a_command(tmp_path):
    root = _copy(tmp_path)
    (root / "runs" / "_probe.py").write_text("def f():\n    from simnode.commands.run import cmd_run\n")
    assert command_imports(root) == ["simnode/runs/_probe.py:2: simnode.runs._probe imports the "
                                     "command module simnode.commands.run"]
