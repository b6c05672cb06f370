"""The unit tier is pure: no moto, no AWS, no network beyond loopback.

moto costs about a second to import and its fixtures belong to the tiers that
use it (``tests/integration/conftest.py``, the local stack). Two checks keep it
out: ``test_tier.py`` loads every unit module in a fresh interpreter, and the
fixture below fails a test that imports moto while the tier runs on its own
(alongside the other tiers moto is already loaded, so it can only check there).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def moto_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.partition(".")[0] == "moto")


@pytest.fixture(autouse=True)
def _no_moto(request: pytest.FixtureRequest) -> Iterator[None]:
    before = moto_modules()
    yield
    if not before and (imported := moto_modules()):
        pytest.fail(f"{request.node.nodeid} imported moto ({imported[0]}): unit tests are pure")
