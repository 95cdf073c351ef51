"""The hooks that hold lyra's limits inside a pydantic-ai run.

:class:`Limits` is a pydantic-ai *capability* (the framework's own extension
point for lifecycle hooks), added to each run by
:class:`~lyra.children.pydantic_ai.PydanticAIChild`. It subclasses the
framework's class, so this module imports pydantic-ai when it is imported;
the public module imports it only when a child is built.

- ``before_model_request`` (once per step of the agent loop, the unit of
  pydantic-ai's own ``request_limit``): the turn is charged *ahead*, so a
  spent account refuses the request before it is made; under a token budget
  the request's worst case (its input and its ``max_tokens``) is held before it
  is sent, and ``max_tokens`` capped to what the budget leaves, so parallel
  requests never take the tree past it.
- ``after_model_request``: what pydantic-ai counted since the last charge
  (its ``RunUsage``: tokens with the cache's, and cost where genai-prices or
  lyra's price table knows the model) is charged through the child's
  :class:`~lyra.children._meter.Meter`, a heartbeat when it is nothing; a
  refusal (``finish_reason='content_filter'``) ends the run with the
  framework's ``ContentFilterError``.
- ``wrap_tool_execute``: each tool call is progress, started and ended, a
  successful one a completed step. A ``ctx.block(...)`` that a tool (or a
  capability of the agent's) caught still ends the run: no model request
  follows it.

Usage is charged as the difference between the run's ``RunUsage`` and what
was charged before, so nothing is counted twice, whichever hook sees it
first (``settle`` charges what is left when the run ends).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ValidatedToolArgs,
    WrapToolExecuteHandler,
)
from pydantic_ai.exceptions import ContentFilterError
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelResponse,
    ToolCallPart,
    ToolReturn,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RunUsage

from lyra.children._framework import tool_done
from lyra.children._meter import Meter, text_bytes
from lyra.delegation import ChildContext
from lyra.errors import BudgetExhausted, ConfigurationError

_ANY_MODEL_WRITES = 4096
"""Output tokens every current model allows in one response."""


@dataclass(eq=False)
class Limits(AbstractCapability[Any]):
    """lyra's hooks in one pydantic-ai run (one per attempt)."""

    meter: Meter
    """The attempt's meter (``ctx`` in the hooks is pydantic-ai's ``RunContext``)."""
    usage: RunUsage = field(default_factory=RunUsage)
    """The run's usage: given to ``agent.run(usage=...)``, so it is read live."""
    _model: str | None = field(default=None, init=False)

    @property
    def lyra(self) -> ChildContext:
        """The attempt's context."""
        return self.meter.ctx

    def get_ordering(self) -> CapabilityOrdering:
        """Outermost: the hooks see what the agent's own capabilities let through."""
        return CapabilityOrdering(position="outermost")

    # -- model requests -------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.charge()
        model, meter = request_context.model, self.meter
        settings = request_context.model_settings or {}
        wanted = settings.get("max_tokens")
        limit = wanted if wanted is not None else _ANY_MODEL_WRITES
        allowed = await meter.before_request(
            model.model_name,
            provider=model.system,
            text_bytes=_sent(request_context) if meter.token_limited else None,
            output=limit,
            capped=True,
        )
        if allowed is not None and allowed < limit:
            # the request's worst case is held: what the model may write, capped to it
            # (its own max_tokens when that is less; none set and more than
            # _ANY_MODEL_WRITES left, none is set: a value of lyra's could exceed what
            # the model allows)
            capped: ModelSettings = {**settings, "max_tokens": max(1, allowed)}
            request_context.model_settings = capped
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        self._model, meter = response.model_name, self.meter
        meter.answered()
        if response.usage.unmeasured_requests:  # the model reported no usage
            meter.settled()
            meter.unreported(self._model)  # (a budget that cannot be kept stops here)
        if not self.charge(settles=True):  # (what the request held, given back with it)
            meter.ctx.heartbeat()
        if response.finish_reason == "content_filter":
            details = response.provider_details or {}
            why = details.get("refusal") or "finish_reason content_filter"
            body = ModelMessagesTypeAdapter.dump_json([response]).decode()
            raise ContentFilterError(f"The model refused the request ({why})", body=body)
        return response

    # -- tools --------------------------------------------------------------------------

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        lyra, name = self.meter.ctx, call.tool_name
        note = lyra.tool_started(name, call.args)
        try:
            result = await handler(args)
        except Exception as exc:
            tool_done(lyra, name, exc)
            raise
        tool_done(lyra, name)
        if note is not None:  # the last identical call allowed: the model is told
            return ToolReturn(return_value=result, content=note)
        return result

    # -- usage ----------------------------------------------------------------------------

    def charge(self, *, settles: bool = False) -> bool:
        """Charge what the run counted since the last charge; False when that is nothing.
        With ``settles`` (a response), what its request held is given back in the step."""
        usage = self.usage
        cost = float(usage.cost) if usage.cost is not None else None
        return self.meter.total(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            model=self._model,
            cost=cost,
            settles=settles,
        )

    def settle(self) -> None:
        """Charge what is left when the run ends, after giving back what a request that
        never answered held; never raises (an account that ran out has already ended
        the attempt, and a cancellation must go on unchanged)."""
        self.meter.settled()
        with suppress(BudgetExhausted, ConfigurationError):
            self.charge()


def _sent(request_context: ModelRequestContext) -> int:
    """The bytes of text a request sends: each part's content, or a call's arguments."""
    sent = 0
    for message in request_context.messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if type(content) is not str:
                args = getattr(part, "args", None)
                content = str(args if args is not None else content or "")
            sent += len(content) if content.isascii() else text_bytes(content)
    return sent
