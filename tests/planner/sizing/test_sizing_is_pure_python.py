from __future__ import annotations

import ast
from pathlib import Path

SIZING = Path(__file__).resolve().parents[3] / "planner" / "sizing"


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_sizing_engine_imports_nothing_from_django_or_the_apps():
    modules = sorted(SIZING.glob("*.py"))
    assert len(modules) > 10
    for module in modules:
        forbidden = _imported_roots(module) & {"django", "rest_framework", "planner", "monitor", "kvdash"}
        assert not forbidden, f"{module.name} imports {forbidden}"
