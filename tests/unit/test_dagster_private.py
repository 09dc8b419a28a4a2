"""Dagster's public API only: the private names the project still needs are imported in
defs/dagster_private.py and nowhere else in the package, exactly the ones listed here, each with one
comment line saying why and which Dagster issue asks for a public route; the tests' own are imported in
tests/support/dagster_private.py and nowhere else in tests/, each with one comment line saying which
test needs it for what. A new `dagster._` anywhere else fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pin_chessboard_pipelines
from pin_chessboard_pipelines.defs import dagster_private
from tests.support import dagster_private as tests_dagster_private

PACKAGE = Path(pin_chessboard_pipelines.__file__).parent
PRIVATE_MODULE = PACKAGE / "defs" / "dagster_private.py"
TESTS = Path(__file__).resolve().parents[1]
TESTS_PRIVATE_MODULE = TESTS / "support" / "dagster_private.py"
COMMENT = re.compile(r"#\s*\S")
PRIVATE = re.compile(r"\bdagster\._")  # dagster._core, dagster._utils, dagster._serdes, ...
WHY = re.compile(r"#.*\((https://github\.com/dagster-io/dagster/issues/\d+|no issue found)\)\s*$")

ALLOWED = {
    "AssetCheckEvaluationTargetMaterializationData",
    "AssetGraph",
    "JobPythonOrigin",
    "LoadableTargetOrigin",
    "ManagedGrpcPythonEnvCodeLocationOrigin",
    "ReconstructableRepository",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "UnresolvedAssetJobDefinition",
    "execute_run",
    "get_transitive_required_resource_keys",
    "wrap_resources_for_execution",
}

ALLOWED_IN_TESTS = {
    "CheckStepHealthResult",
    "EngineEventData",
    "ExecuteStepArgs",
    "JobFailureData",
    "LOG_RECORD_METADATA_ATTR",
    "PlanData",
    "PlanOrchestrationContext",
    "ReconstructableJob",
    "ReconstructableRepository",
    "RetryMode",
    "RunFailureReason",
    "StepDelegatingExecutor",
    "StepHandler",
    "StepHandlerContext",
    "auto_reexecution_should_retry_run",
    "check_run_timeout",
    "create_context_free_log_manager",
    "create_execution_plan",
    "create_run_for_test",
    "process_config",
    "resolve_to_config_type",
}


def _private_imports(tree: ast.Module) -> list[tuple[ast.stmt, ast.alias]]:
    found: list[tuple[ast.stmt, ast.alias]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and PRIVATE.match(f"{node.module or ''}."):
            found.extend((node, alias) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((node, alias) for alias in node.names if PRIVATE.match(f"{alias.name}."))
    return found


def _offenders(root: Path, allowed: set[Path]) -> list[str]:
    return [
        f"{path.relative_to(root.parent)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path not in allowed
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]


def test_no_other_module_names_a_private_dagster_module():
    offenders = _offenders(PACKAGE, {PRIVATE_MODULE})
    assert offenders == [], "import it in defs/dagster_private.py, with the reason, or use a public route"


def test_no_other_test_module_names_a_private_dagster_module():
    # this module names `dagster._` in its own patterns and examples
    offenders = _offenders(TESTS, {TESTS_PRIVATE_MODULE, Path(__file__).resolve()})
    assert offenders == [], (
        "import it in tests/support/dagster_private.py, with the reason, or use a public route"
    )


def test_the_one_module_imports_exactly_the_allowed_names():
    tree = ast.parse(PRIVATE_MODULE.read_text(encoding="utf-8"))
    imported = [alias.asname or alias.name for _, alias in _private_imports(tree)]
    assert sorted(imported) == sorted(ALLOWED)
    assert set(dagster_private.__all__) == ALLOWED


def test_the_tests_one_module_imports_exactly_the_allowed_names():
    tree = ast.parse(TESTS_PRIVATE_MODULE.read_text(encoding="utf-8"))
    imported = [alias.asname or alias.name for _, alias in _private_imports(tree)]
    assert sorted(imported) == sorted(ALLOWED_IN_TESTS)
    assert set(tests_dagster_private.__all__) == ALLOWED_IN_TESTS


def _names_without_a_comment_above(path: Path, why: re.Pattern[str]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    missing = []
    for node, alias in _private_imports(ast.parse(text)):
        shared_line = [a for a in node.names if a.lineno == alias.lineno]
        # the comment above the name, or above its statement when the statement imports it alone
        above = {
            lines[n - 2].strip() for n in {alias.lineno, node.lineno if len(node.names) == 1 else 0} if n >= 2
        }
        if len(shared_line) > 1:
            missing.append(f"{alias.name}: one name per line, each with its comment")
        elif not any(why.match(line) for line in above):
            missing.append(f"{alias.name}: {sorted(above)}")
    return missing


def test_each_private_name_has_its_reason_and_issue_on_the_line_above():
    assert _names_without_a_comment_above(PRIVATE_MODULE, WHY) == []


def test_each_private_name_of_the_tests_has_its_reason_on_the_line_above():
    assert _names_without_a_comment_above(TESTS_PRIVATE_MODULE, COMMENT) == []


def test_the_scan_sees_a_private_import():
    assert PRIVATE.search("from dagster._core.errors import DagsterError")
    assert PRIVATE.search("import dagster._utils")
    assert not PRIVATE.search("import dagster as dg; dg.execute_job")
    assert not PRIVATE.search("from dagster_k8s import k8s_job_executor")
