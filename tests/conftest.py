import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def gke_program():
    """Pulumi.gke.yaml under mocks with canary secrets, run once for every test module that reads it."""
    from tests import program as harness

    return harness.run_gke_with_canaries()
