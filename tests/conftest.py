import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the project (REPAIR_SHARED_DATA names another folder)
SHARED_DATA = Path(os.environ.get("REPAIR_SHARED_DATA") or REPO.parent / "shared" / "data")
# Set by .ci/run, which always has the real data and every dependency: a test that would skip fails instead, its
# reason in the failure. Elsewhere (a user's clone without ../shared/data) the tests skip, their reasons printed
# (`make test` runs pytest -rs).
NO_SKIP = "REPAIR_NO_SKIP"


def no_skip() -> bool:
    return os.environ.get(NO_SKIP, "") not in ("", "0")


def need_shared(*paths: Path) -> None:
    """Skips the test (fails it under REPAIR_NO_SKIP=1) where one of these files or folders of the real data is
    absent."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} absent (real data for tests lives beside the project, in {SHARED_DATA})")


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the project; tests that need it skip when it is absent."""
    need_shared(SHARED_DATA)
    return SHARED_DATA


def _why(longrepr) -> str:
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if no_skip() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"{NO_SKIP}=1 (CI runs every test) and this test would skip: {_why(report.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if no_skip() and report.skipped:  # a module skipped whole (pytest.importorskip at its top)
        report.outcome = "failed"
        report.longrepr = f"{NO_SKIP}=1 (CI runs every test) and {collector.nodeid} would skip: {_why(report.longrepr)}"
