"""The engine's modules import one another without a cycle, counting imports inside functions (a deferred
import is still a cycle: plan -> search -> plan made search borrow a private builder from plan)."""

from __future__ import annotations

import ast
from pathlib import Path

SIZING = Path(__file__).resolve().parents[3] / "planner" / "sizing"


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                continue  # annotations only: never executed
            if isinstance(child, ast.ImportFrom) and child.level == 1:
                if child.module:
                    found.add(child.module.split(".")[0])
                else:
                    found.update(alias.name for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_no_module_of_the_engine_imports_back_into_a_cycle():
    graph = {path.stem: _imports(path) for path in SIZING.glob("*.py") if path.stem != "__init__"}
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def walk(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target] if target in trail else [module, target])
            elif target not in state:
                walk(target, [*trail, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def test_search_uses_the_public_builder():
    assert "_build_plan" not in (SIZING / "search.py").read_text(encoding="utf-8")
