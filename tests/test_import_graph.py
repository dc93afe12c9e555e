"""collsim's modules import each other in one direction only: the import graph has no cycle.

Every ``import`` and ``from ... import`` statement of every module under
``collsim/`` is an edge, wherever it stands: at module level, inside a
function, under ``if TYPE_CHECKING:``. An import inside a function still runs
(later) and still couples the two modules, so hiding a cycle in a function
does not remove it. ``from x import y`` is an edge to ``x.y`` when ``y`` is a
submodule, else to ``x``; relative imports are resolved; importing a
submodule is not counted as importing its parent package (``from a.b import
c`` is an edge to ``a.b`` or ``a.b.c`` only), since packages importing their
own submodules would otherwise make every package a cycle.

Packages are layered as well: with every subpackage of collsim (and every
top-level module, and the facade ``collsim``) taken as one node, the graph
has no cycle either, so no package imports a package that imports it back.

A function-level import kept to make start-up cheaper (the CLI imports every
command module; ``import collsim`` should not import the simulator) says so
on its line: ``# lazy: start-up`` (any ``# lazy: <reason>``). It counts for
cycles like any other import. Modules named as data and imported with
``importlib`` (the model registry discovering ``collsim.analytic`` and
``collsim.sim``, the protocol registry discovering ``protocols/``) are
plugin discovery, not imports: the discovered package imports the registry,
never the reverse by statement.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "collsim"

#: Cycles allowed while the code around them is restructured (each entry is the set of modules of one cycle,
#: i.e. one strongly connected component). It is empty and should stay so; an entry
#: that no longer is a cycle fails test_known_cycles_are_still_cycles, so it cannot outlive its fix.
KNOWN_CYCLES: list[frozenset[str]] = []

#: Modules whose function-level imports have not been reviewed yet (each import there either hides nothing and
#: moves to the top of its module, or is lazy for start-up and gets its ``# lazy:`` marker). It is empty and
#: should stay so; a module listed here that has no unmarked function-level import fails
#: test_unreviewed_list_is_current.
UNREVIEWED_FUNCTION_IMPORTS: frozenset[str] = frozenset()

LAZY_MARKER = "# lazy:"


@dataclass(frozen=True)
class Import:
    """One import statement's edge: who imports what, where, and whether it runs inside a function."""

    source: str
    target: str
    path: Path
    line: int
    text: str
    in_function: bool

    @property
    def marked_lazy(self) -> bool:
        return LAZY_MARKER in self.text

    def where(self) -> str:
        return f"{self.path.relative_to(self.path.parents[len(self.source.split('.')) - 1])}:{self.line}: " \
               f"{self.text.strip()}"


def module_files(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is a package)}`` of every module under ``package_dir``."""
    base = package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module ``name`` is, or the innermost module that holds it (``a.b.attr`` -> ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, modules: dict[str, tuple[Path, bool]], root: str) -> list[Import]:
    """Every import statement of ``module`` that reaches a module of the ``root`` package."""
    path, is_package = modules[module]
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(path))
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(sub) for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom)))
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        text = " ".join(lines[node.lineno - 1:node.end_lineno or node.lineno])
        for name in names:
            if name != root and not name.startswith(root + "."):
                continue
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.append(Import(module, target, path, node.lineno, text, id(node) in inside))
    return found


def import_graph(package_dir: Path) -> nx.DiGraph:
    """The module import graph of the package at ``package_dir``; each edge's ``imports`` lists its statements."""
    modules = module_files(package_dir)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module in modules:
        for imp in imports_of(module, modules, package_dir.name):
            if graph.has_edge(imp.source, imp.target):
                graph.edges[imp.source, imp.target]["imports"].append(imp)
            else:
                graph.add_edge(imp.source, imp.target, imports=[imp])
    return graph


def cycles(graph: nx.DiGraph) -> list[frozenset[str]]:
    """The modules of each import cycle (strongly connected components of more than one module)."""
    return sorted((frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1), key=sorted)


def describe_cycle(graph: nx.DiGraph, members: frozenset[str]) -> str:
    """One cycle through ``members``, each step with the import lines that make it."""
    edges = nx.find_cycle(graph.subgraph(members))
    out = [" -> ".join([edges[0][0]] + [b for _, b in edges])]
    for a, b in edges:
        for imp in graph.edges[a, b]["imports"]:
            out.append(f"    {imp.where()}{'  (inside a function)' if imp.in_function else ''}")
    return "\n".join(out)


def package_of(module: str) -> str:
    """The unit of the package-level graph a module belongs to: ``collsim.report.data`` -> ``collsim.report``,
    ``collsim.models`` -> itself, the facade ``collsim`` -> itself."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """The import graph with every subpackage of collsim (and every top-level module) as one node; each edge's
    ``imports`` lists the statements that make it. Imports within one package are not edges."""
    packages = nx.DiGraph()
    packages.add_nodes_from({package_of(m) for m in graph})
    for a, b, data in graph.edges(data=True):
        pa, pb = package_of(a), package_of(b)
        if pa == pb:
            continue
        if not packages.has_edge(pa, pb):
            packages.add_edge(pa, pb, imports=[])
        packages.edges[pa, pb]["imports"].extend(data["imports"])
    return packages


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph(PACKAGE)


def test_no_import_cycles(graph):
    found = [c for c in cycles(graph) if not any(c <= known for known in KNOWN_CYCLES)]
    assert not found, "import cycles among collsim's modules:\n" + "\n".join(describe_cycle(graph, c) for c in found)


def test_known_cycles_are_still_cycles(graph):
    """An allowed cycle that is gone is removed from KNOWN_CYCLES (so a new one cannot hide under its name)."""
    present = cycles(graph)
    stale = [sorted(known) for known in KNOWN_CYCLES if not any(known & c for c in present)]
    assert not stale, f"these KNOWN_CYCLES are no longer cycles; remove them: {stale}"


def test_function_level_imports_say_why(graph):
    """An import inside a function is there for start-up time and says so; one that only hid a cycle is gone."""
    unmarked = [imp for _, _, data in graph.edges(data=True) for imp in data["imports"]
                if imp.in_function and not imp.marked_lazy and imp.source not in UNREVIEWED_FUNCTION_IMPORTS]
    assert not unmarked, (
        f"imports inside functions without a '{LAZY_MARKER} <reason>' marker (move them to the top of the module, "
        "or mark them if they are there for start-up time):\n"
        + "\n".join(f"    {imp.where()}" for imp in sorted(unmarked, key=lambda i: (str(i.path), i.line))))


def test_unreviewed_list_is_current(graph):
    have_unmarked = {imp.source for _, _, data in graph.edges(data=True) for imp in data["imports"]
                     if imp.in_function and not imp.marked_lazy}
    done = sorted(UNREVIEWED_FUNCTION_IMPORTS - have_unmarked)
    assert not done, f"no unmarked function-level imports left in these; remove them from the list: {done}"


def test_no_package_imports_a_package_that_imports_it_back(graph):
    """Packages are layered too: no package (collsim.report, collsim.tune, ...; a top-level module counts as
    one, and so does the facade ``collsim``) reaches itself through another, function-level imports included."""
    packages = package_graph(graph)
    found = cycles(packages)
    assert not found, "import cycles among collsim's packages:\n" + "\n".join(
        describe_cycle(packages, c) for c in found)


def test_results_layers(graph):
    """The results files' schema (and their loader) is a leaf below report/, tune/ and calibrate/; nothing in
    collsim goes through the old name."""
    assert set(graph.successors("collsim.resultsfile")) <= {"collsim.atomicfile", "collsim.errors", "collsim.version"}
    for reader in ("collsim.tune.source", "collsim.calibrate.compare"):
        assert "collsim.resultsfile" in set(graph.successors(reader)), reader
        assert not any(m.startswith("collsim.report") for m in graph.successors(reader)), reader
    report = [m for m in graph if m == "collsim.report" or m.startswith("collsim.report.")]
    above_report = {"collsim.runner", "collsim.runner.run", "collsim.runner.rows", "collsim.results",
                    "collsim.scenario", "collsim.scenario.loader", "collsim.rowcache"}
    for module in report:
        assert not set(graph.successors(module)) & above_report, module
    assert not list(graph.predecessors("collsim.results")), "collsim.results is for users; collsim imports the " \
        "modules it re-exports"


def test_workers_do_not_import_the_report_stack(graph):
    """A worker unpickling a row imports collsim.runner (the package) and collsim.runner.rows: neither reaches
    the scenario run, the report (pandas, plotly) or the scenario loader."""
    heavy = {m for m in graph if m.startswith(("collsim.report", "collsim.runner.run", "collsim.scenario"))}
    for module in ("collsim.runner", "collsim.runner.rows"):
        reached = nx.descendants(graph, module) & heavy
        assert not reached, f"{module} imports {sorted(reached)}"


@pytest.mark.parametrize("module,kept_out", [
    # the imports marked lazy for start-up keep these out of `collsim --help` ...
    ("collsim.cli", ("pandas", "numpy", "networkx", "z3", "simpy", "pydantic", "plotly", "yaml")),
    # ... and a worker unpickling a row loads the results schema's columns without pandas
    ("collsim.runner.rows", ("pandas", "plotly", "z3")),
])
def test_lazy_imports_keep_heavy_libraries_out(module, kept_out):
    code = f"import sys, {module}; print(' '.join(m for m in {kept_out!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == [], f"importing {module} loads {done.stdout.strip()}"


def test_old_results_names_still_import():
    import collsim.results as old
    from collsim import resultsfile
    from collsim.runner import run, rows

    assert old.COLUMNS is resultsfile.COLUMNS and old.run_scenario is run.run_scenario
    assert old.expand_rows is rows.expand_rows and callable(old.merge_costs)


# ---------------------------------------------------------------------------
# the detector itself, on a package made for it


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_detector_finds_a_cycle_hidden_in_a_function(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "low.py": """\
            def helper():
                from pkg.sub import high  # the import that closes the cycle
                return high.VALUE
            """,
        "sub/__init__.py": "",
        "sub/high.py": "from .. import low\nVALUE = 1\n",
    })
    graph = import_graph(root)
    assert cycles(graph) == [frozenset({"pkg.low", "pkg.sub.high"})]
    text = describe_cycle(graph, cycles(graph)[0])
    assert "low.py:2: from pkg.sub import high" in text and "(inside a function)" in text
    assert "high.py:1: from .. import low" in text
    # ``from pkg.sub import high`` is an edge to the submodule, not to the package pkg.sub
    assert graph.has_edge("pkg.low", "pkg.sub.high") and not graph.has_edge("pkg.low", "pkg.sub")


def test_detector_reads_attributes_markers_and_plain_imports(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from pkg.a import thing\n",
        "a.py": "import pkg.b\nthing = 1\n",
        "b.py": """\
            import json

            def later():
                from pkg.a import thing  # lazy: start-up
                return thing
            """,
    })
    graph = import_graph(root)
    assert graph.has_edge("pkg", "pkg.a") and graph.has_edge("pkg.a", "pkg.b")
    (imp,) = graph.edges["pkg.b", "pkg.a"]["imports"]
    assert imp.in_function and imp.marked_lazy
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.b"})]  # a marked lazy import still counts


def test_detector_finds_a_package_cycle_without_a_module_cycle(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/low.py": "VALUE = 1\n",
        "a/high.py": "from pkg.b import mid\n",
        "b/__init__.py": "",
        "b/mid.py": """\
            def later():
                from pkg.a import low  # lazy: start-up
                return low.VALUE
            """,
    })
    graph = import_graph(root)
    assert cycles(graph) == []  # a.high -> b.mid -> a.low: no module imports itself back
    packages = package_graph(graph)
    assert set(packages) == {"pkg", "pkg.a", "pkg.b"}
    assert cycles(packages) == [frozenset({"pkg.a", "pkg.b"})]
    text = describe_cycle(packages, cycles(packages)[0])
    assert "high.py:1: from pkg.b import mid" in text and "mid.py:2: from pkg.a import low" in text
