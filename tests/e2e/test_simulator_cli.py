"""The simulator's CLI: one signed event to any URL, with Sume's retries."""

from __future__ import annotations

import _thread
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from devstack import simulator
from devstack.simulator import cli
from devstack.stack import DevStack


def test_send_signs_with_every_secret_given(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        [
            "send",
            stack.url,
            "--secret",
            "whsec_next_not_yet_known",
            "--secret",
            stack.signing_secret,
            "--event",
            "job.canceled",
            "--job-id",
            "job_cli_rotation",
            "--spacing",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert 'attempt 1: 200 {"result": "new", "job_id": "job_cli_rotation"}' in out
    assert "in a row" not in out
    job = stack.jobs().get("job_cli_rotation")
    assert job is not None
    assert (job.event, job.status, job.deliveries) == ("job.canceled", "ERROR", 1)


def test_send_retries_every_refusal_then_gives_up(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        [
            "send",
            stack.url,
            "--secret",
            "wrong",
            "--job-id",
            "job_cli_forged",
            "--attempts",
            "3",
            "--spacing",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.count('401 {"error": "signature_mismatch"}') == 3
    attempts = [line for line in out.splitlines() if line.startswith("attempt ")]
    assert [line.endswith("; Ctrl-C stops") for line in attempts] == [True, True, False]
    assert "; next in 0 s (at " in attempts[0]
    assert "NOT delivered" in out
    assert stack.jobs().get("job_cli_forged") is None
    # Told which secret to use right after the third refusal, and once.
    lines = out.splitlines()
    hint = lines.index(cli.MISMATCH_HINT.format(count=3))
    assert lines[hint - 1] == attempts[2]
    assert out.count("signature_mismatch in a row") == 1
    assert "'signing secret'" in lines[hint]


def test_a_delivery_that_ends_on_a_mismatch_says_which_secret_even_before_a_run_of_them(
    stack: DevStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["send", stack.url, "--secret", "wrong", "--attempts", "1"])
    assert code == 1
    assert capsys.readouterr().out.splitlines()[2] == cli.MISMATCH_HINT.format(count=1)


@contextmanager
def ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Children started inside get Ctrl-C's default disposition. A shell without job
    control starts a background command (``make test &``, some CI runners) with SIGINT
    ignored, every child inherits that across exec, and Python then installs no
    KeyboardInterrupt: the signal the test sends would never arrive."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_send_tells_each_attempt_as_it_happens_and_ctrl_c_stops_it(stack: DevStack) -> None:
    """A wrong secret used to mean nine silent minutes; Ctrl-C, a traceback."""
    with ctrl_c_as_at_a_terminal():
        sending = subprocess.Popen(
            [sys.executable, "-m", "devstack.simulator", "send", stack.url, "--secret", "wrong"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        assert sending.stdout is not None
        lines = [sending.stdout.readline(), sending.stdout.readline()]
        # Told while the next attempt is still a minute away.
        assert lines[0].startswith("job_id job_")
        assert lines[1].startswith('attempt 1: 401 {"error": "signature_mismatch"}; next in 60 s')
        assert lines[1].rstrip().endswith("; Ctrl-C stops")
        assert sending.poll() is None
        sending.send_signal(signal.SIGINT)
        out, err = sending.communicate(timeout=30)
    finally:
        sending.kill()
    assert sending.returncode == cli.INTERRUPTED == 130
    assert err.strip() == "stopped (Ctrl-C): nothing more is sent"
    assert "attempt 2" not in out


def test_a_ctrl_c_caught_as_the_wait_for_the_next_attempt_begins_stops_send_within_a_nap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test above failed now and then on a busy machine: SIGINT's handler ran
    after Python's last check for signals but before the minute's sleep began, so
    the KeyboardInterrupt waited for the sleep's end (the test waits 30 s). Here
    the Ctrl-C comes so, as the first sleep begins: only that sleep is waited out."""
    naps: list[float] = []

    def sleep_while_ctrl_c_comes(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) > 1:
            raise AssertionError(f"the Ctrl-C went unheard: {naps}")
        # What SIGINT's handler does; Python hears of it once this sleep is over.
        _thread.interrupt_main()

    refusing = socket.socket()  # bound, never listening: each attempt is refused at once
    refusing.bind(("127.0.0.1", 0))
    url = "http://127.0.0.1:{}/webhooks/sume".format(*refusing.getsockname()[1:])
    monkeypatch.setattr(time, "sleep", sleep_while_ctrl_c_comes)
    with refusing, ctrl_c_as_at_a_terminal():
        code = cli.main(["send", url, "--secret", "s", "--spacing", "3600"])
    out, err = capsys.readouterr()
    assert code == cli.INTERRUPTED
    assert naps == [simulator.NAP_SECONDS]
    assert "attempt 1: no answer (ConnectionRefusedError); next in 3600 s" in out
    assert "attempt 2" not in out
    assert err.strip() == "stopped (Ctrl-C): nothing more is sent"


def test_send_a_test_ping(stack: DevStack, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["send", stack.url, "--secret", stack.signing_secret, "--event", "webhook.test"]
    )
    assert code == 0
    assert '200 {"result": "test"}' in capsys.readouterr().out


def test_send_without_a_secret_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUME_COM_WEBHOOK_SIGNING_SECRET", raising=False)
    with pytest.raises(SystemExit, match="secret"):
        cli.main(["send", "http://127.0.0.1:9/webhooks/sume"])


def test_send_with_local_stack_names_the_secret_it_could_not_read(stack: DevStack) -> None:
    """This stack's names have a prefix of their own, so its moto holds no
    sume-local-signing-secret: the simulator says what it looked for, and where
    (the secret read by `make run`'s names is run by tests/e2e/test_docs_commands.py)."""
    with pytest.raises(SystemExit) as stopped:
        cli.main(["send", stack.url, "--local-stack", stack.endpoint_url])
    message = str(stopped.value)
    assert message.startswith(
        f"cannot read the local stack's signing secret sume-local-signing-secret at "
        f"{stack.endpoint_url}: "
    )
    assert "ResourceNotFoundException" in message


def test_send_takes_a_secret_or_a_local_stack_not_both() -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["send", "http://127.0.0.1:9/", "--secret", "s", "--local-stack", "http://x"])
    assert stopped.value.code == 2


@pytest.mark.parametrize("command", [[], ["send"], ["scenario"]])
def test_help_is_plain_text_with_the_exit_statuses(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--help was the package's docstring reflowed, reStructuredText markup and all."""
    with pytest.raises(SystemExit) as exited:
        cli.main([*command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and "::" not in text
    assert text.startswith(f"usage: python -m devstack.simulator {' '.join(command)}".rstrip())
    statuses = text.partition("exit status:\n")[2].splitlines()[:4]
    assert [line.split()[0] for line in statuses] == ["0", "1", "2", "130"]
