"""The commands the CLI prints begin as the operator began (``sume_cli.invocation``)."""

from __future__ import annotations

import os
from pathlib import Path

from sume_cli import invocation
from sume_cli.invocation import DEPLOYMENT_OPTIONS, PROG, Invocation, deployment, program
from sume_cli.main import build_parser


def test_the_console_script_is_named_as_it_was_started(tmp_path: Path) -> None:
    script = tmp_path / ".venv" / "bin" / PROG
    script.parent.mkdir(parents=True)
    script.write_text("")
    # Started by its path, off PATH: the path as typed, which runs from where it was typed.
    assert program(".venv/bin/sume-webhooks", which=lambda _: None) == (".venv/bin/sume-webhooks",)
    assert program(str(script), which=lambda _: "/usr/bin/sume-webhooks") == (str(script),)
    # Found on PATH: the shell hands the script its whole path; the bare name finds it again.
    assert program(str(script), which=lambda _: str(script)) == (PROG,)


def test_python_m_and_an_in_process_caller(tmp_path: Path) -> None:
    main_py = os.path.join(os.path.dirname(invocation.__file__), "main.py")
    assert program(main_py, python="/opt/py/bin/python3") == (
        "/opt/py/bin/python3",
        "-m",
        "sume_cli.main",
    )
    assert program("/usr/lib/python3/site-packages/pytest/__main__.py") == (PROG,)
    assert program("") == (PROG,)


def test_every_option_that_chose_the_deployment_is_kept_and_quoted() -> None:
    args = build_parser().parse_args(
        [
            "--endpoint-url",
            "http://127.0.0.1:5000",
            "--prefix",
            "team a",
            "--profile",
            "ops",
            "--region",
            "eu-west-1",
            "--shards",
            "8",
            "--output",
            "json",
            "report",
        ]
    )
    words = deployment(vars(args))
    assert words == (
        "--endpoint-url",
        "http://127.0.0.1:5000",
        "--prefix",
        "team a",
        "--profile",
        "ops",
        "--region",
        "eu-west-1",
        "--shards",
        "8",
    )
    cli = Invocation((".venv/bin/sume-webhooks",), words)
    assert cli.line("replay", "--reason", "it's fixed") == (
        ".venv/bin/sume-webhooks --endpoint-url http://127.0.0.1:5000 --prefix 'team a' "
        "--profile ops --region eu-west-1 --shards 8 replay --reason 'it'\"'\"'s fixed'"
    )
    # Given after the command, the same.
    after = build_parser().parse_args(["report", "--stage", "prod", "--region", "us-west-2"])
    assert deployment(vars(after)) == ("--stage", "prod", "--region", "us-west-2")


def test_every_global_option_but_output_chooses_the_deployment() -> None:
    """A new global option is kept by every printed command, or this fails."""
    parser = build_parser()
    (group,) = [g for g in parser._action_groups if g.title == "deployment and output"]
    flags = {flag for action in group._group_actions for flag in action.option_strings}
    assert flags - {"--output"} == set(DEPLOYMENT_OPTIONS)
