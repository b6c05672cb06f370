"""What a container restored from a SnapStart snapshot draws afresh (``sume.core.runtime``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import types
from collections.abc import Iterator

import pytest

from sume.core import runtime


@pytest.fixture
def random_state() -> Iterator[None]:
    saved = random.getstate()
    yield
    random.setstate(saved)


def test_without_the_lambda_runtime_s_library_no_hook_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry makes the import fail, as where the library is not installed.
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)
    assert runtime.after_restore(runtime.reseed) is False


def test_with_it_the_hook_runs_after_each_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[object] = []
    library = types.SimpleNamespace(register_after_restore=registered.append)
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)
    assert runtime.after_restore(runtime.reseed) is True
    assert registered == [runtime.reseed]


def test_containers_restored_from_one_snapshot_draw_apart_once_reseeded(
    random_state: None,
) -> None:
    random.seed(28)
    snapshot = random.getstate()
    # Without the hook, two restored containers draw the same "random" numbers.
    random.setstate(snapshot)
    first = [random.random() for _ in range(3)]
    random.setstate(snapshot)
    assert [random.random() for _ in range(3)] == first
    # With it, each draws its own.
    draws = []
    for _ in range(2):
        random.setstate(snapshot)
        runtime.reseed()
        draws.append([random.random() for _ in range(3)])
    assert draws[0] != draws[1]
    assert first not in draws


def test_the_receiver_registers_the_reseed_when_imported() -> None:
    # A fresh interpreter: the registration happens at the handler's import.
    probe = (
        "import json, sys, types\n"
        "hooks = []\n"
        "sys.modules['snapshot_restore_py'] = types.SimpleNamespace(\n"
        "    register_after_restore=hooks.append)\n"
        "import receiver\n"
        "print(json.dumps([f'{h.__module__}.{h.__qualname__}' for h in hooks]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["sume.core.runtime.reseed"]
