"""The suite's three tiers (unit, workflow, system) and the fast-first run that stops after a
failed tier. Hooks imported by tests/conftest.py, so the rules stay beside the fixtures.

A test's tier is read from what it uses, so a new test lands in the right tier without anyone
remembering to mark it: a test that (through its fixtures or the helpers in tests/ it calls)
starts a process, drives the browser or runs the demo is `system`; one that needs the
Temporal dev server (`temporal_env`, so `harness` and friends) is `workflow`; the rest is
`unit`. An explicit `pytest.mark.unit/workflow/system` wins where the guess is wrong (a helper
outside tests/, say bench/, that starts processes). tests/test_tiers.py pins a few."""

from __future__ import annotations

import inspect
import time
import types
from collections.abc import Generator, Iterable, Iterator

import pytest

TIERS = ("unit", "workflow", "system")
# The run's stages, fastest first: `soak` tests run after every tier, whatever their tier.
STAGES = (*TIERS, "soak")

# Names whose use means a test starts another process (or a browser, itself one).
SPAWNS = frozenset(
    {
        "subprocess",
        "Popen",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "fork",
        "multiprocessing",
        "ProcessPoolExecutor",
        "async_playwright",
        "sync_playwright",
    }
)
# Fixtures and names that mean the Temporal dev server.
NEEDS_SERVER = frozenset({"temporal_env", "WorkflowEnvironment"})

_STAGE_OF = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="run every tier even after one failed (by default the run stops after a tier with a failure)",
    )


def _own(obj: object) -> bool:
    """Defined in the tests package: the code worth following (not the library's)."""
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "tests"


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(obj: object) -> Iterable[types.FunctionType]:
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type):
        for member in vars(obj).values():
            member = getattr(member, "__func__", member)  # staticmethod / classmethod
            if isinstance(member, property):
                member = member.fget
            if isinstance(member, types.FunctionType):
                yield member


def names_used(functions: Iterable[object]) -> set[str]:
    """Every global and attribute name the functions use, following the functions and
    classes of tests/ they name (the helper a test calls, the class a fixture builds)."""
    seen: set[int] = set()
    names: set[str] = set()
    todo = [f for obj in functions for f in _functions(inspect.unwrap(obj))]  # type: ignore[arg-type]
    while todo:
        func = todo.pop()
        if id(func) in seen:
            continue
        seen.add(id(func))
        for code in _codes(func.__code__):
            for name in code.co_names:
                names.add(name)
                target = func.__globals__.get(name)
                if target is not None and _own(target):
                    todo.extend(_functions(target))
    return names


def guess_tier(item: pytest.Item) -> str:
    function = getattr(item, "function", None)
    if function is None:
        return "unit"
    fixturedefs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    fixtures = [d.func for defs in fixturedefs.values() for d in defs if _own(d.func)]
    used = names_used([function, *fixtures]) | set(getattr(item, "fixturenames", ()))
    if used & SPAWNS:
        return "system"
    if used & NEEDS_SERVER:
        return "workflow"
    return "unit"


def tier_of(item: pytest.Item) -> str:
    explicit = [name for name in TIERS if item.get_closest_marker(name) is not None]
    if len(explicit) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one tier marker {explicit}")
    return explicit[0] if explicit else guess_tier(item)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RUN] = _TierRun()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so `-m unit` sees the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)
        item.stash[_STAGE_OF] = "soak" if item.get_closest_marker("soak") else tier
    # Stable: within a stage the order pytest chose (modules together, fixtures shared) stays.
    items.sort(key=lambda item: STAGES.index(item.stash[_STAGE_OF]))


class _TierRun:
    """Per stage: tests run, failures, seconds; and which stage stopped the run."""

    def __init__(self) -> None:
        self.tests: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.stopped_by: str | None = None
        self.failing: set[str] = set()


_RUN = pytest.StashKey[_TierRun]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    run = item.config.stash[_RUN]
    stage = item.stash.get(_STAGE_OF, "unit")
    start = time.monotonic()
    yield
    run.seconds[stage] = run.seconds.get(stage, 0.0) + time.monotonic() - start
    run.tests[stage] = run.tests.get(stage, 0) + 1
    if item.nodeid in run.failing:
        run.failed[stage] = run.failed.get(stage, 0) + 1
    last_of_stage = nextitem is None or nextitem.stash.get(_STAGE_OF, "unit") != stage
    if last_of_stage and run.failed.get(stage) and nextitem is not None and not item.config.getoption("all_tiers"):
        run.stopped_by = stage
        later = STAGES[STAGES.index(stage) + 1 :]
        item.session.shouldfail = (
            f"tier {stage!r} failed ({run.failed[stage]} tests): stopped before {', '.join(later)}"
            " (pytest --all-tiers runs them anyway)"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:  # in setup, call or teardown
        item.config.stash[_RUN].failing.add(item.nodeid)
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash.get(_RUN, None)
    if run is None or not run.tests:
        return
    terminalreporter.write_sep("=", "tiers (fast first)")
    for stage in STAGES:
        if stage in run.tests:
            failed = run.failed.get(stage, 0)
            line = f"{stage:9} {run.tests[stage]:5} tests {run.seconds[stage]:8.1f} s"
            line += f"  {failed} failed" if failed else ""
            line += "  <- stopped the run here" if stage == run.stopped_by else ""
            terminalreporter.write_line(line)
