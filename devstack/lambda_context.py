"""A Lambda context with a deadline, for the local stack, the bench and the tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable


class LambdaContext:
    """What the Lambda runtime hands a handler, with a deadline ``timeout_seconds`` after
    it is made on ``clock`` (seconds; real time by default, a test's own in the tests)."""

    def __init__(
        self,
        function_name: str = "sume-function",
        timeout_seconds: float = 60,
        memory_mb: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        )
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._clock = clock
        self._deadline = clock() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock()) * 1000))
