"""The langchain-core callback handler through which a delegation's limits reach
into a LangGraph run (see :mod:`lyra.children.langgraph`, which imports this
module only when a ``LangGraphChild`` is built: it imports langchain-core).

Each model request charges a turn *ahead* (``on_chat_model_start`` /
``on_llm_start``), so a spent account refuses it before it is sent; each
response charges its tokens and cost (``on_llm_end``) and is a heartbeat, as is
each streamed token; each tool call is progress at its start and end
(``ctx.tool_started`` / ``ctx.tool_ended``) and a completed step when it
succeeds. ``raise_error`` is set, so an exception raised here (the budget, a
declared blocker) ends the run: langchain-core would log and swallow it
otherwise. Every graph, subgraph and chain of a run shares this one handler,
and each model run is charged once, by its run id. A LangGraph child delegated to
from inside the run (a tool's ``ctx.delegate``) inherits this handler too, as
langchain-core hands a run's callbacks down to every run it starts; that run's
events are its own handler's to charge (see :meth:`LyraCallbacks.running`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from lyra.children._framework import OWN_STOPS, tool_done
from lyra.children._meter import Meter, Tokens, count, text_bytes


class LyraCallbacks(AsyncCallbackHandler):
    """Charges, progress and blockers of one attempt, from a graph's callbacks."""

    raise_error = True
    """An exception here ends the run (a refused turn must not become a request)."""
    run_inline = True
    """Called in order on the run's own task: no task per event, no reordering."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.ctx = meter.ctx
        # Keyed by a run id's int, not the UUID: UUID hashes in Python (a call for
        # every lookup, a handful per request), its int in C.
        self._models: dict[int, str | None] = {}
        self._tools: dict[int, str] = {}
        self._charged: set[int] = set()

    # Node and chain events say nothing the limits need: skip them (they are many).
    # (Tool events come under ``ignore_agent``: kept.) Attributes, not properties:
    # LangChain reads them for every event of every node.
    ignore_chain = True
    ignore_retriever = True
    ignore_retry = True
    ignore_custom_event = True

    @contextmanager
    def running(self) -> Iterator[None]:
        """The scope of this handler's own run: what runs in it (and in the tasks and
        threads it starts, which copy the context) is charged here, not by a handler
        inherited from an outer run, which would charge it a second time."""
        token = _running.set(self)
        try:
            yield
        finally:
            _running.reset(token)

    def _nested(self) -> bool:
        """The event is of a nested LyraCallbacks' run (outside any run: ours)."""
        owner = _running.get()
        return owner is not None and owner is not self

    # -- models -----------------------------------------------------------------------

    async def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        sent = 0
        for turn in messages:
            for message in turn:  # (text_bytes inlined for ASCII: the whole history, each time)
                content = message.content
                if type(content) is not str:
                    content = str(content)
                sent += len(content) if content.isascii() else text_bytes(content)
        await self._before_model(run_id, metadata, kwargs.get("invocation_params"), sent)

    async def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        sent = sum(text_bytes(prompt) for prompt in prompts)
        await self._before_model(run_id, metadata, kwargs.get("invocation_params"), sent)

    async def _before_model(self, run_id: UUID, metadata: Any, params: Any, sent: int) -> None:
        """A turn, charged before the request is sent (a spent account refuses it), and
        under a token budget its worst case held (its ``max_tokens`` when the model
        declares one: callbacks cannot lower it)."""
        if self._nested():
            return
        model = _model_name(metadata, params)
        key = run_id.int
        self._models[key] = model
        provider = metadata.get("ls_provider") if isinstance(metadata, dict) else None
        limit = params.get("max_tokens") if isinstance(params, dict) else None
        await self.meter.before_request(
            model,
            provider=provider if isinstance(provider, str) else None,
            key=key,
            text_bytes=sent,
            output=count(limit) or None,
        )

    async def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """A request that failed holds no tokens any more."""
        self._models.pop(run_id.int, None)
        self.meter.settled(run_id.int)

    async def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        self.ctx.heartbeat()

    async def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """A response: its tokens and cost, charged once (a heartbeat without usage)."""
        key = run_id.int
        if key in self._charged or self._nested():
            return
        self._charged.add(key)
        started_as = self._models.pop(key, None)
        tokens, model = _usage(response)
        self.meter.answer(key, tokens, model or started_as)

    # -- tools --------------------------------------------------------------------------
    # Plain methods, not coroutines: langchain-core runs a sync tool's callbacks on its
    # sync path, in the tool's worker thread, and there an async handler's exception is
    # logged and swallowed whatever ``raise_error`` says (the refused call would run). A
    # plain method raises there, and runs inline (``run_inline``) for an async tool.

    def on_tool_start(  # type: ignore[override]
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._nested():
            return
        ctx = self.ctx
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        self._tools[run_id.int] = name
        ctx.tool_started(name, inputs if inputs is not None else input_str)

    def on_tool_end(  # type: ignore[override]
        self,
        output: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        name = self._tools.pop(run_id.int, None)
        if name is not None:
            tool_done(self.ctx, name)

    def on_tool_error(  # type: ignore[override]
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        name = self._tools.pop(run_id.int, None)
        if name is not None:
            tool_done(self.ctx, name, error)

    # -- LangGraph nodes ------------------------------------------------------------------

    def node_progress(self, event: Any) -> None:
        """A node under a ``TimeoutPolicy`` started, finished or showed progress
        (``runtime.heartbeat()`` included): progress for lyra's idle timeout too."""
        self.ctx.heartbeat()


_running: ContextVar[LyraCallbacks | None] = ContextVar("lyra_langgraph_run", default=None)
"""The handler whose run the current code is in (see :meth:`LyraCallbacks.running`)."""


def _model_name(metadata: Any, params: Any) -> str | None:
    """The model a request goes to, as the integration names it."""
    if type(metadata) is dict and type(name := metadata.get("ls_model_name")) is str:
        return name  # (the usual case, at once)
    for source, key in ((metadata, "ls_model_name"), (params, "model"), (params, "model_name")):
        if isinstance(source, dict) and isinstance(source.get(key), str):
            return str(source[key])
    return None


def _usage(response: LLMResult) -> tuple[Tokens | None, str | None]:
    """The tokens of a response (``None``: it reports none), and the model it names;
    from each message's ``usage_metadata``, else the ``llm_output``."""
    incoming = outgoing = cache_read = cache_write = 0
    found = False
    model: str | None = None
    for generations in response.generations:
        for generation in generations:
            message = getattr(generation, "message", None)
            meta = getattr(message, "response_metadata", None)
            if isinstance(meta, dict):
                named = meta.get("model_name") or meta.get("model")
                if named and type(named) is str:
                    model = named
            usage = getattr(message, "usage_metadata", None)
            if not isinstance(usage, dict):
                continue
            found = True
            incoming += count(usage.get("input_tokens"))
            outgoing += count(usage.get("output_tokens"))
            details = usage.get("input_token_details")
            if isinstance(details, dict):
                cache_read += count(details.get("cache_read"))
                cache_write += count(details.get("cache_creation"))
    if found and model is not None:  # (the usual case: the rest is the fallback's)
        return Tokens(incoming, outgoing, cache_read, cache_write), model
    output = response.llm_output if isinstance(response.llm_output, dict) else {}
    model = model or _text(output.get("model_name") or output.get("model"))
    if not found:
        totals = output.get("token_usage") or output.get("usage")
        if not isinstance(totals, dict):
            return None, model
        incoming = count(totals.get("input_tokens")) or count(totals.get("prompt_tokens"))
        outgoing = count(totals.get("output_tokens")) or count(totals.get("completion_tokens"))
    return Tokens(incoming, outgoing, cache_read, cache_write), model


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _OwnStops(logging.Filter):
    """Drops langchain-core's warning for an exception that lyra's own handler raised.

    langchain-core logs ``Error in LyraCallbacks.on_llm_end callback: ...`` for
    every exception a handler raises, then re-raises it (``raise_error``); and,
    when a sync code path drives the async handler on a loop of its own, ``Error in
    callback coroutine: BudgetExhausted(...)`` (that path swallows it: lyra's own
    cancellation still ends the run). For lyra that is a budget, a block or a
    deadline stopping the run on purpose (or refusing a budget it cannot keep), which
    the report already says. Any other handler's warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or not str(record.msg).startswith("Error in "):
            return True
        if len(args) == 3 and args[0] == LyraCallbacks.__name__:
            return not str(args[2]).startswith(_signal_reprs())
        if len(args) == 1 and str(record.msg).startswith("Error in callback coroutine"):
            return not str(args[0]).startswith(_signal_reprs())
        return True


def _signal_reprs() -> tuple[str, ...]:
    """``BudgetExhausted(``, ``ChildBlocked(``, ..., and the meter's refusal of a budget
    it cannot keep (``ConfigurationError(``): how lyra's stops start in a repr."""
    kinds: list[type[Exception]] = list(OWN_STOPS)
    found: list[str] = []
    while kinds:
        kind = kinds.pop()
        found.append(f"{kind.__name__}(")
        kinds.extend(kind.__subclasses__())
    return tuple(found)


def quiet_own_stops() -> None:
    """Install :class:`_OwnStops` on langchain-core's callback logger (once)."""
    logger = logging.getLogger("langchain_core.callbacks.manager")
    if not any(isinstance(kept, _OwnStops) for kept in logger.filters):
        logger.addFilter(_OwnStops())
