"""The child ``child=None`` stands for (DESIGN §2)."""

from __future__ import annotations

from pydantic import ValidationError

from lyra.children._anthropic import AnthropicChild
from lyra.delegation import Child, ChildRef
from lyra.errors import ConfigurationError
from lyra.settings import settings

NO_CHILD = (
    "no child given and none configured: give one (child=... in Python, --child "
    "MODULE:ATTR on the command line), set LYRA_CHILD=module:attribute (a child, or a "
    "class or factory of one), or set ANTHROPIC_API_KEY for the Anthropic child"
)


def default_child() -> Child:
    """The configured default child.

    ``LYRA_CHILD`` (``module:attribute``) names one; otherwise the Anthropic
    child when ``ANTHROPIC_API_KEY`` is set; otherwise
    :class:`~lyra.errors.ConfigurationError` says how to configure one.
    """
    config = settings()
    if config.child:
        try:
            ref = ChildRef(target=config.child)
        except ValidationError:
            raise ConfigurationError(
                f"LYRA_CHILD={config.child!r} is not module:attribute"
            ) from None
        return ref.resolve()
    if config.model_configured:
        return AnthropicChild()
    raise ConfigurationError(NO_CHILD)
