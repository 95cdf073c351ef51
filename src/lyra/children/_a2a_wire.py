"""What lyra's A2A server (``lyra a2a``) and :class:`~lyra.children.a2a.A2AChild` agree
on beyond the protocol, which has no word for spend (a2aproject/A2A#1155 leaves it
to extensions).

- **Usage.** A server that declares the :data:`USAGE_EXTENSION` in its agent card
  puts the task's usage so far (input and output tokens, cost in US dollars, model
  turns: what lyra's ``Usage`` holds) in ``metadata["usage"]`` of each status
  update; the SDK's task manager merges it into the task's own metadata, so a
  client that does not stream reads it there. The figures are cumulative: a
  client charges what grew since the last update.
- **Keep-alives.** A status update a server sends only so that a quiet stream is
  not taken for a dead one carries ``metadata["keepalive"] = true``: it is no
  progress, and the client's idle timeout does not count it as any.
- **Reports.** A failed task's status message carries the report text and its
  fields (what ``parse_report`` returns) as a data part.

A client holds a server to these only when its card declares the extension.

Nothing here imports the SDK: both sides pass plain mappings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from lyra.children._meter import count
from lyra.delegation import TaskReport, Usage

USAGE_EXTENSION = "urn:lyra-supervisor:a2a:usage:v1"
"""The agent-card extension that says status updates carry ``metadata["usage"]``."""


REPORTED = ("input_tokens", "output_tokens", "cost_usd", "turns")
"""The figures a usage report holds (a remote's tool calls are its own)."""


def usage_metadata(usage: Usage) -> dict[str, Any]:
    """The metadata of a status update that reports ``usage`` (empty for none)."""
    return {"usage": usage.model_dump(include=set(REPORTED))} if usage else {}


KEEPALIVE = "keepalive"
"""The metadata key that marks a status update as a keep-alive (see the module docstring)."""


def usage_of(metadata: Mapping[str, Any]) -> Usage | None:
    """The usage a status update or a task reports in its metadata, if it reports one.
    Counts are foreign data, made whole as every child's are (what is no count ≥ 0
    counts as nothing; so does a cost that is no finite amount ≥ 0)."""
    reported = metadata.get("usage")
    if not isinstance(reported, Mapping):
        return None
    return Usage(
        input_tokens=count(reported.get("input_tokens")),
        output_tokens=count(reported.get("output_tokens")),
        turns=count(reported.get("turns")),
        cost_usd=_dollars(reported.get("cost_usd")),
    )


def _dollars(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) and value > 0 else 0.0


def report_of(data_parts: Iterable[Any]) -> TaskReport | None:
    """The fields of a lyra report among a message's data parts, if one holds them."""
    for data in data_parts:
        if isinstance(data, Mapping) and "status" in data:
            try:
                return TaskReport.model_validate(data)
            except ValidationError:
                continue
    return None
