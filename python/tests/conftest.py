"""Shared fixtures of the coopsim package tests, and `--tap`: one TAP line per case on the process's
stdout (for Meson's protocol 'tap'; run_tap.py runs pytest with it, its own report sent to stderr).

Skips: a module that needs torch or pandas skips itself when they are missing (importorskip), and
the heavy cases (full-size LLM recordings) skip when COOPSIM_SANITIZE=1 (scripts/test.sh --sanitize)."""
import os
import sys

import pytest

from coopsim import read_trace as load_trace  # noqa: F401  (the tests' name for it)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

heavy = pytest.mark.skipif(os.environ.get("COOPSIM_SANITIZE") == "1",
                           reason="heavy case: not in the sanitizer pass (COOPSIM_SANITIZE=1)")


def peak_live(records, skip_roles=()):
    """The largest sum of live tensor bytes over the trace's alloc/free events (tensors of the roles in
    skip_roles not counted)."""
    sizes = {r["id"]: (0 if r.get("role") in skip_roles else r["bytes"]) for r in records if r["kind"] == "tensor"}
    live = peak = 0
    for r in records:
        if r["kind"] == "alloc":
            live += sizes[r["tensor"]]
            peak = max(peak, live)
        elif r["kind"] == "free":
            live -= sizes[r["tensor"]]
    return peak


@pytest.fixture(scope="session")
def coopsim_bin():
    """The `binary` argument for coopsim's calls: None when the native module is there (the calls
    then run in this process, spawning nothing), else the executable's path."""
    import coopsim
    from coopsim.sim import native_module
    if native_module() is not None:
        return None
    try:
        return coopsim.find_binary()
    except coopsim.CoopsimError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def coopsim_exe():
    """The coopsim executable's path, for tests that run it as a command."""
    import coopsim
    try:
        return coopsim.find_binary()
    except coopsim.CoopsimError as e:
        pytest.skip(str(e))


# --- TAP --------------------------------------------------------------------------------------------
def pytest_addoption(parser):
    parser.addoption("--tap", action="store_true", help="print one TAP line per case on stdout")


def pytest_configure(config):
    if config.getoption("--tap"):
        config.pluginmanager.register(Tap(), "coopsim-tap")


class Tap:
    def __init__(self):
        self.count = 0

    def emit(self, ok, name, directive="", detail=None):
        self.count += 1
        print(f"{'ok' if ok else 'not ok'} {self.count} - {name}{directive}", file=sys.__stdout__, flush=True)
        for line in (detail or "").splitlines()[-60:]:
            print(f"# {line}", file=sys.__stdout__, flush=True)

    @staticmethod
    def reason(report):
        longrepr = report.longrepr
        text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return text.removeprefix("Skipped: ")

    def pytest_collectreport(self, report):
        if report.failed:
            self.emit(False, f"collect {report.nodeid}", detail=str(report.longrepr))
        elif report.skipped:
            self.emit(True, report.nodeid, f" # SKIP {self.reason(report)}")

    def pytest_runtest_logreport(self, report):
        if report.skipped and report.when in ("setup", "call"):
            self.emit(True, report.nodeid, f" # SKIP {self.reason(report)}")
        elif report.when == "call" or (report.failed and report.when == "setup"):
            self.emit(report.passed, report.nodeid, detail=None if report.passed else str(report.longrepr))
        elif report.failed:  # teardown
            self.emit(False, f"{report.nodeid} (teardown)", detail=str(report.longrepr))

    def pytest_sessionfinish(self, session):
        print(f"1..{self.count}" + (" # SKIP no test cases" if not self.count else ""), file=sys.__stdout__, flush=True)
