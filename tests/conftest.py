import gc
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_collection(session):
    """Collection imports every test module and what they import (pulumi, pulumi_gcp, pydantic, ...): hundreds
    of thousands of objects that live as long as the session. No cycle collection while they are made, then
    they are frozen (CPython 3.11 Doc/library/gc.rst, gc.freeze), so the tests' collections walk only what the
    tests make. (Under xdist the controller does not collect: its own pytest_collection answers first.)"""
    gc.disable()


def pytest_collection_finish(session):
    gc.freeze()
    gc.enable()


@pytest.fixture(scope="session", autouse=True)
def shared_runs_directory(tmp_path_factory):
    """Where this session's shared program and plan runs are kept (tests/shared_runs.py): the base temp's
    parent under xdist, which every worker of this session shares, else the base temp itself."""
    from tests import shared_runs

    base = tmp_path_factory.getbasetemp()
    directory = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    shared_runs.use_directory(directory)
    yield directory
    shared_runs.use_directory(None)


@pytest.fixture(scope="session")
def gke_program():
    """Pulumi.gke.yaml under mocks with canary secrets, run once for every test module that reads it."""
    from tests import program as harness

    return harness.run_gke_with_canaries()


@pytest.fixture
def servers():
    """Starts a fake metadata server and Secret Manager (tests.fakes.gcp_metadata) for a boot script run."""
    started = []

    def start(metadata, secretmanager):
        started.extend([metadata.__enter__(), secretmanager.__enter__()])
        return metadata, secretmanager

    yield start
    for server in started:
        server.__exit__(None, None, None)


def pytest_addoption(parser):
    parser.addoption("--record-suite-weights", metavar="FILE", default=None,
                     help="write each test file's measured seconds to FILE (tests/suite_weights.json orders the "
                          "files costliest first: tests/suite_order.py)")


def pytest_configure(config):
    from tests import suite_order

    path = config.getoption("--record-suite-weights")
    if path and not hasattr(config, "workerinput"):  # the controller: under xdist it gets every report
        config.pluginmanager.register(suite_order.WeightRecorder(Path(path)), "suite-weights-recorder")


def pytest_collection_modifyitems(config, items):
    from tests import suite_order

    items[:] = suite_order.ordered(items, suite_order.load_weights())
