"""What lyra's A2A server (``lyra a2a``) and :class:`~lyra.children.a2a.A2AChild` agree
on beyond the protocol, which has no word for spend (a2aproject/A2A#1155 leaves it
to extensions).

- **Usage.** A server that declares the :data:`USAGE_EXTENSION` in its agent card
  puts the task's usage so far (input and output tokens, cost in US dollars, model
  turns: what lyra's ``Usage`` holds) in ``metadata["usage"]`` of each status
  update; the SDK's task manager merges it into the task's own metadata, so a
  client that does not stream reads it there. The figures are cumulative: a
  client charges what grew since the last update.
- **Reports.** A failed task's status message carries the report text and its
  fields (what ``parse_report`` returns) as a data part.

Nothing here imports the SDK: both sides pass plain mappings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from lyra.delegation import TaskReport, Usage

USAGE_EXTENSION = "urn:lyra-supervisor:a2a:usage:v1"
"""The agent-card extension that says status updates carry ``metadata["usage"]``."""


def usage_metadata(usage: Usage) -> dict[str, Any]:
    """The metadata of a status update that reports ``usage`` (empty for none)."""
    return {"usage": usage.model_dump()} if usage else {}


def usage_of(metadata: Mapping[str, Any]) -> Usage | None:
    """The usage a status update or a task reports in its metadata, if it reports one
    that makes sense (counts and a cost that are numbers of at least zero)."""
    reported = metadata.get("usage")
    if not isinstance(reported, Mapping):
        return None
    try:
        usage = Usage.model_validate({key: reported[key] for key in _USAGE if key in reported})
    except ValidationError:
        return None
    counts = (usage.input_tokens, usage.output_tokens, usage.turns)
    sensible = min(counts) >= 0 and math.isfinite(usage.cost_usd) and usage.cost_usd >= 0
    return usage if sensible else None


_USAGE = tuple(Usage.model_fields)


def report_of(data_parts: Iterable[Any]) -> TaskReport | None:
    """The fields of a lyra report among a message's data parts, if one holds them."""
    for data in data_parts:
        if isinstance(data, Mapping) and "status" in data:
            try:
                return TaskReport.model_validate(data)
            except ValidationError:
                continue
    return None
