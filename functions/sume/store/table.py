"""The jobs table's conditional-write machinery, which every transition goes through:
one update, conditional, with the expression's names and values; on a refused
condition, the stored job. Also the one read of a job, and the report index's keys.
"""

from __future__ import annotations

from typing import Any

from sume.core.names import DUE_INDEX, report_bucket
from sume.store.codec import attribute_value, job_from_item
from sume.store.job import Job, JobAttr

# Attribute names DynamoDB reserves, by the alias expressions use for them.
_NAMES = {
    f"#{name}": name.value
    for name in (
        JobAttr.STATE,
        JobAttr.SOURCE,
        JobAttr.EVENT,
        JobAttr.STATUS,
        JobAttr.ERROR,
        JobAttr.SEQUENCE,
    )
}


def expression_values(**values: Any) -> dict[str, dict[str, Any]]:
    return {f":{k}": attribute_value(v) for k, v in values.items()}


def alias(name: str) -> str:
    """How an expression spells attribute ``name``: through its #alias when reserved."""
    return f"#{name}" if f"#{name}" in _NAMES else name


def expression_names(expression: str) -> dict[str, str]:
    return {spelled: name for spelled, name in _NAMES.items() if spelled in expression}


class TableBase:
    """The jobs table's client, name and due-work shards, and the writes every role makes."""

    def __init__(
        self, client: Any, table_name: str, shards: int, due_index: str = DUE_INDEX
    ) -> None:
        self._client = client
        self._table = table_name
        self._shards = shards
        self._due_index = due_index

    @property
    def shards(self) -> int:
        """Partitions of the due-work index."""
        return self._shards

    @property
    def due_index(self) -> str:
        """The due-work index its readers query (the one before, while a table migrates)."""
        return self._due_index

    def _update(
        self,
        job_id: str,
        update: str,
        condition: str | None,
        values: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        expression = update + " " + (condition or "")
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {JobAttr.JOB_ID: {"S": job_id}},
            "UpdateExpression": update,
            **kwargs,
        }
        if condition:
            request["ConditionExpression"] = condition
        # A caller's own aliases (``kwargs``) beside those of the reserved words.
        if names := {**expression_names(expression), **kwargs.get("ExpressionAttributeNames", {})}:
            request["ExpressionAttributeNames"] = names
        if values:
            request["ExpressionAttributeValues"] = expression_values(**values)
        return self._client.update_item(**request)

    def _conditional(
        self,
        job_id: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        *,
        read_stored: bool = False,
        **kw: Any,
    ) -> tuple[bool, Job | None]:
        """Run a conditional update; on a failed condition, the stored job if ``read_stored``.

        DynamoDB hands the stored item back with the refusal (ALL_OLD), so a
        duplicate costs no extra call. Stores that speak DynamoDB's API but
        ignore ALL_OLD (dynalite, for one) hand back nothing: one strongly
        consistent GetItem then reads it, because an eventually consistent
        read may predate the write that made the condition fail (an absent
        or awaiting item) and turn a duplicate into a conflict, a retry after
        a crash into nothing owed, a busy job into an absent one. No item
        comes back either when there is none (a claim of an unknown job);
        that read then finds nothing, as ALL_OLD did.
        """
        if read_stored:
            kw["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            response = self._update(job_id, update, condition, values, **kw)
        except self._client.exceptions.ConditionalCheckFailedException as exc:
            if not read_stored:
                return False, None
            old = exc.response.get("Item")
            return False, job_from_item(old) if old else self.get(job_id)
        attributes = response.get("Attributes")
        return True, job_from_item(attributes) if attributes else None

    def get(self, job_id: str, consistent: bool = True) -> Job | None:
        """The job as stored; None when there is no such job."""
        response = self._client.get_item(
            TableName=self._table, Key={JobAttr.JOB_ID: {"S": job_id}}, ConsistentRead=consistent
        )
        item = response.get("Item")
        return job_from_item(item) if item else None

    def _reported(self, job_id: str, window_at: int | None, values: dict[str, Any]) -> list[str]:
        """The SET parts that put a job in the report index (none for ``window_at`` None)."""
        if window_at is None:
            return []
        values["report_bucket"] = report_bucket(window_at, job_id)
        values["report_at"] = window_at
        return [
            f"{JobAttr.REPORT_BUCKET} = :report_bucket",
            f"{JobAttr.REPORT_AT} = :report_at",
        ]
