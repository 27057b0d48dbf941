from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the project; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent (real data for tests lives beside the project)")
    return SHARED_DATA
