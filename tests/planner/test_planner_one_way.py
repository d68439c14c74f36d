"""One way to do each thing (issue 12, items 14 and 15), checked on the source.

Outside the engine, ``PlanInputs`` is built in one place (``planner/plan_inputs.py``) and scenarios are
written by ``planner/services.py`` only; ``build_plan`` is a sequence of named steps, not one long body."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("planner", "monitor", "kvdash")


def _sources() -> list[Path]:
    return [
        path
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and "sizing" not in path.relative_to(ROOT).parts[:2]
    ]


def _calls(path: Path) -> list[str]:
    return [
        ast.unparse(node.func)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
    ]


def test_plan_inputs_are_built_only_by_the_builder():
    builders = {str(path.relative_to(ROOT)) for path in _sources() if "PlanInputs" in _calls(path)}
    assert builders == {"planner/plan_inputs.py"}


def test_scenarios_are_created_only_by_the_services_module():
    writers = {
        str(path.relative_to(ROOT))
        for path in _sources()
        if {"Scenario.objects.create", "Scenario.objects.get_or_create", "Scenario.objects.bulk_create"}
        & set(_calls(path))
    }
    assert writers == set()


def test_build_plan_is_a_sequence_of_named_steps():
    tree = ast.parse((ROOT / "planner" / "sizing" / "plan.py").read_text(encoding="utf-8"))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    build = functions["build_plan"]
    called = {ast.unparse(node.func) for node in ast.walk(build) if isinstance(node, ast.Call)}
    steps = {"_kv_shape", "_state_layout", "_unified_block_sizes", "_memory", "_in_flight_tokens", "_blocks"}
    steps |= {"_context_table", "_fit", "_allocation", "_speed_model", "_speed", "_reported_tokens"}
    assert steps <= called
    assert steps <= set(functions)
    # The body without the Plan(...) it returns: the steps and the wiring between them.
    returned = next(node for node in build.body if isinstance(node, ast.Return))
    wiring = (returned.lineno - build.lineno) + 1
    assert wiring <= 90, f"build_plan has {wiring} lines before its Plan(...)"
    # No step is itself a long body (the original was 365 lines).
    longest = max(node.end_lineno - node.lineno + 1 for node in functions.values())  # type: ignore[operator]
    assert longest <= 130
