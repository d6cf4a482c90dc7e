"""The figures of the house, measured the same way before and after a refactor:
arrows back up the declared layer order, import circles, the largest module, functions over 60
lines, radon's D-or-worse blocks and the worst block, docstring coverage, schema-description
coverage, README lines; and the rooms (units of the layer order: a package directly under
crashlab/ or a top-level module) with the modules over 400 lines.

    .venv/bin/pip install radon && .venv/bin/python benchmarks/bench_house.py

The layer order and the import graph come from tests/architecture.py (the test holds the code to
the same table).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.architecture import PACKAGE, arrows_back_up, circles, read_graph, unit_of  # noqa: E402


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_functions(limit: int = 60) -> list[tuple[str, int]]:
    found = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append((f"{path.relative_to(ROOT)}:{node.name}", length))
    return sorted(found, key=lambda item: -item[1])


def radon_blocks(worst: str = "D") -> list[tuple[str, int]] | None:
    """Blocks ranked ``worst`` or worse, most complex first."""
    try:
        from radon.complexity import cc_rank, cc_visit
    except ImportError:
        return None
    found = []
    for path in sources():
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if cc_rank(block.complexity) >= worst:
                found.append((f"{path.relative_to(ROOT)}:{block.name}", block.complexity))
    return sorted(found, key=lambda item: -item[1])


def docstring_coverage() -> tuple[int, int]:
    """Modules, classes and functions (public or private, nested ones too) that carry a docstring."""
    have = total = 0
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                total += 1
                have += ast.get_docstring(node) is not None
    return have, total


def schema_properties(schema: dict) -> tuple[int, int]:
    """Properties with a description, over every property of the document and its $defs."""
    described = total = 0
    objects = [schema, *schema.get("$defs", {}).values()]
    for obj in objects:
        for prop in obj.get("properties", {}).values():
            total += 1
            described += bool(prop.get("description"))
    return described, total


def schema_coverage() -> dict[str, tuple[int, int]]:
    crashlab = str(Path(sys.executable).with_name("crashlab"))
    usage = subprocess.run([crashlab, "schema", "--help"], capture_output=True, text=True).stdout
    names = usage.split("[", 2)[2].split("]", 1)[0].replace("\n", "").replace(" ", "").split("|")
    found = {}
    for name in names:
        text = subprocess.run([crashlab, "schema", name], capture_output=True, text=True, check=True).stdout
        found[name] = schema_properties(json.loads(text))
    return found


def main() -> None:
    graph = read_graph()
    up = arrows_back_up(graph)
    print(f"arrows back up: {len(up)}")
    for low, high, why in up:
        print(f"  {low} -> {high}: {', '.join(why)}")
    unit_circles = circles(graph.units())
    module_circles = circles(graph.edges)
    print(f"package circles: {len(unit_circles)} {unit_circles}")
    print(f"module circles: {len(module_circles)} {module_circles}")
    rooms = {unit_of(module) for module in graph.edges} | {unit_of(t) for ts in graph.edges.values() for t in ts}
    print(f"rooms: {len(rooms)}")
    sizes = sorted(((len(p.read_text(encoding='utf-8').splitlines()), p) for p in sources()), reverse=True)
    print(f"modules: {len(sizes)}, lines: {sum(n for n, _ in sizes)}; largest: "
          + ", ".join(f"{p.relative_to(ROOT)} {n}" for n, p in sizes[:3]))
    large = [(n, p) for n, p in sizes if n > 400]
    print(f"modules over 400 lines: {len(large)}: "
          + ", ".join(f"{p.relative_to(ROOT)} {n}" for n, p in large))
    longs = long_functions()
    print(f"functions over 60 lines: {len(longs)}: " + ", ".join(f"{n} {k}" for n, k in longs))
    blocks = radon_blocks()
    print("radon D+ blocks: " + ("radon is not installed" if blocks is None else
                                 f"{len(blocks)}: " + ", ".join(f"{n} ({c})" for n, c in blocks)))
    if blocks:
        print(f"worst complexity: {blocks[0][1]} ({blocks[0][0]})")
    have, total = docstring_coverage()
    print(f"docstrings: {have}/{total} ({100 * have / total:.0f}%)")
    coverage = schema_coverage()
    described = sum(d for d, _ in coverage.values())
    every = sum(t for _, t in coverage.values())
    print(f"schema descriptions: {described}/{every} properties over {len(coverage)} schemas; "
          + ", ".join(f"{k} {d}/{t}" for k, (d, t) in coverage.items()))
    print(f"README lines: {len((ROOT / 'README.md').read_text(encoding='utf-8').splitlines())}")


if __name__ == "__main__":
    main()
