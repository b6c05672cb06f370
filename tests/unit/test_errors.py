"""Every error the domain raises on purpose is of one kind: retryable, permanent, configuration."""

import importlib
import inspect
import pkgutil

import sume
from sume.core.errors import ConfigurationError, PermanentError, RetryableError, SumeError
from sume.net.errors import FetchError

KINDS = (RetryableError, PermanentError, ConfigurationError)
# Bases that only group kinds; never raised themselves.
GROUPS = {SumeError, FetchError}


def _domain_errors() -> set[type[BaseException]]:
    found = set()
    for info in pkgutil.walk_packages(sume.__path__, "sume."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("sume."):
                found.add(value)
    return found


def test_every_domain_error_is_of_exactly_one_kind():
    errors = _domain_errors() - GROUPS - set(KINDS)
    assert len(errors) > 15
    for error in errors:
        kinds = [kind for kind in KINDS if issubclass(error, kind)]
        assert len(kinds) == 1, f"{error.__module__}.{error.__qualname__}: {kinds}"


def test_a_fetch_error_says_its_kind():
    from sume.net.errors import PermanentFetchError, TransientFetchError

    assert PermanentFetchError("c", "m", "https://x/").permanent
    assert not TransientFetchError("c", "m", "https://x/").permanent
