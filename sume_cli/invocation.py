"""The commands the CLI prints, written once: as the operator invoked it, for the same deployment.

A printed command is run as pasted, from where the operator stands: it names
the program as it was started (``.venv/bin/sume-webhooks`` when started so,
the bare name when that is what the shell finds) and carries every global
option that chose the deployment, so the next command reads and writes the
same stage, table and queue as the one that printed it. People read it as one
shell-quoted line; ``--output json`` gives the argv array.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PROG = "sume-webhooks"

# The global options that choose a deployment, in the order a printed command
# gives them (``--output`` chooses none; ``sume_cli.main`` defines them all).
DEPLOYMENT_OPTIONS = ("--stage", "--endpoint-url", "--prefix", "--profile", "--region", "--shards")


def deployment(given: Mapping[str, object]) -> tuple[str, ...]:
    """The deployment options as the operator gave them (``given``: parsed values by
    destination, ``--endpoint-url`` as ``endpoint_url``), each flag and its value.

    Only what was given: what the environment chose (``AWS_REGION``,
    ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``) chooses the same again in the shell
    the command is pasted into.
    """
    words: list[str] = []
    for flag in DEPLOYMENT_OPTIONS:
        value = given.get(flag[2:].replace("-", "_"))
        if value is not None:
            words += [flag, str(value)]
    return tuple(words)


def program(
    argv0: str,
    which: Callable[[str], str | None] = shutil.which,
    python: str = sys.executable,
) -> tuple[str, ...]:
    """The words that start the CLI again as ``argv0`` (``sys.argv[0]``) started it.

    The console script: the bare name when the shell's PATH finds this same file
    there, else the path as given (relative to where the operator stands). Run
    with ``python -m sume_cli.main``: this interpreter and ``-m``. Anything else
    (the CLI called in-process by a program or a test): the console script's name.
    """
    name = os.path.basename(argv0)
    if name == PROG:
        found = which(PROG)
        if found and os.path.realpath(found) == os.path.realpath(argv0):
            return (PROG,)
        return (argv0,)
    if os.path.realpath(argv0) == os.path.realpath(
        os.path.join(os.path.dirname(__file__), "main.py")
    ):
        return (python, "-m", "sume_cli.main")
    return (PROG,)


@dataclass(frozen=True)
class Invocation:
    """How to start the CLI again against the same deployment."""

    program: tuple[str, ...] = (PROG,)
    deployment: tuple[str, ...] = ()
    """The global options that chose the deployment, each flag and its value."""

    def argv(self, *words: str) -> list[str]:
        """The command ``words`` (a command and its arguments), whole."""
        return [*self.program, *self.deployment, *words]

    def line(self, *words: str) -> str:
        """The same command, as one shell-quoted line to paste."""
        return shell(self.argv(*words))


def shell(argv: Sequence[str]) -> str:
    return shlex.join(argv)


@dataclass(frozen=True)
class Step:
    """A command to run next, and why (``when``: only while that holds)."""

    argv: list[str]
    why: str
    when: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"argv": self.argv, "why": self.why, "when": self.when}

    def line(self) -> str:
        return f"{self.when + ': ' if self.when else ''}{shell(self.argv)}  ({self.why})"
