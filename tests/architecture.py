"""The house's shape, measured: the declared layer order of crashlab's packages and the import
graph read from the source with ast (nothing is imported). tests/test_architecture.py holds the
code to the order; benchmarks/bench_house.py prints the house's figures (arrows back up, circles,
long functions), measured the same way before and after.

A unit is a package directly under crashlab/ or a top-level module. LAYERS lists them from the
bottom up: a unit may import any unit listed before it; an import of a unit listed after it is an
"arrow back up". A circle is a set of units (or of modules) that import each other, directly or
through others (a strongly connected component of more than one member).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "crashlab"

#: Bottom to top. Words every layer shares come first, then the libraries with no opinion about
#: crashes, then what the GPU ran (a cubin read alone, the coredump reader, the SASS of a dump's
#: code), the published model and its builder and views, the analyses over it, the verbs, and the
#: command line last.
LAYERS = (
    # words and small leaves
    "vocabulary", "errors", "escape", "wrap", "version", "notation", "logpatterns", "toolpath",
    "demangle", "launchline", "published", "stdout", "console", "textsize", "hardening",
    # libraries
    "picklesafe", "privacy",
    # what the GPU ran: each cubin, the coredump reader that hands out a dump's, and their SASS
    "cubin", "coredump", "sass",
    # the published model, its builder and its views
    "report",
    # analyses over the model
    "explain", "waits", "gdb", "signature", "hangs", "incidents", "env", "owner", "advice",
    # verbs
    "api", "crashlab", "wrongverb", "replay", "index", "supervise", "bisect", "issue", "ui",
    # the command line
    "helpformat", "guard", "cli", "__main__",
)


@dataclass
class ImportGraph:
    """Module-level edges (importer -> imported), both as dotted names inside crashlab."""

    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def units(self) -> dict[str, set[str]]:
        graph: dict[str, set[str]] = defaultdict(set)
        for source, targets in self.edges.items():
            for target in targets:
                if unit_of(source) != unit_of(target):
                    graph[unit_of(source)].add(unit_of(target))
        return graph


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, modules: set[str]) -> str | None:
    """The module an import names: `from crashlab.report import model` names crashlab.report.model."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def read_graph(package: Path = PACKAGE) -> ImportGraph:
    paths = sorted(package.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = ImportGraph()
    for path in paths:
        module = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, path.name == "__init__.py", node)
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                # `from package import module` runs the package's __init__ only as every import
                # of a submodule does; a name that is not a module is read from `base` itself.
                named = submodules + ([base] if any(name not in modules for name in submodules) else [])
            else:
                continue
            for name in named:
                target = _known(name, modules)
                if target and target != module:
                    graph.edges[module].add(target)
    return graph


def arrows_back_up(graph: ImportGraph) -> list[tuple[str, str, list[str]]]:
    """Unit arrows that point up the layer order, each with the module imports that make it."""
    rank = {unit: index for index, unit in enumerate(LAYERS)}
    found = defaultdict(list)
    for source, targets in graph.edges.items():
        for target in targets:
            low, high = unit_of(source), unit_of(target)
            if low != high and rank.get(high, -1) > rank.get(low, len(LAYERS)):
                found[(low, high)].append(f"{source} -> {target}")
    return [(low, high, sorted(why)) for (low, high), why in sorted(found.items())]


def undeclared_units(graph: ImportGraph) -> set[str]:
    every = {unit_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    return every - set(LAYERS)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


#: SQL that reads or changes the database: a statement's verb and the word naming its table,
#: as crashlab writes them (keywords in capitals).
SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\b[\s\S]*\bSET\b|"
                 r"\bDELETE\s+FROM\b|\b(CREATE|ALTER)\s+TABLE\b")


def _texts(tree: ast.AST):
    """(line, text) of every string literal in TREE; an f-string's text parts joined, each value
    written as {}."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(part.value if isinstance(part, ast.Constant) else "{}"
                                       for part in node.values)


def sql_outside(owner: str, package: Path = PACKAGE) -> list[str]:
    """Every string literal holding SQL in a module of PACKAGE outside its subpackage OWNER:
    "path:line: text"."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == owner:
            continue
        lines = {line: text for line, text in _texts(ast.parse(path.read_text(encoding="utf-8")))
                 if SQL.search(text)}  # an f-string's text is found again in its parts
        found += [f"{path.relative_to(package.parent)}:{line}: {text[:80]!r}"
                  for line, text in sorted(lines.items())]
    return found
