"""A Lambda context with a real deadline, for the local stack, the bench and the tests."""

from __future__ import annotations

import time
import uuid


class LambdaContext:
    """What the Lambda runtime hands a handler, with a real deadline."""

    def __init__(
        self,
        function_name: str = "sume-function",
        timeout_seconds: float = 60,
        memory_mb: int = 256,
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
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
