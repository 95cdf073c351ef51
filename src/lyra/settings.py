"""lyra's settings: the one reader of the environment.

Every variable lyra (and its protein workload) reads is a field here; nothing
else in lyra looks at ``os.environ``. Settings are read when asked for
(:func:`settings`), never cached, so a test or an application that changes the
environment is seen at once.

=============================  ============================================
``ANTHROPIC_API_KEY``          the Anthropic API key: with it, ``child=None``
                               means the Anthropic child, and answers,
                               plans and decompositions are model-written
``ANTHROPIC_BASE_URL``         another Messages API endpoint
``LYRA_CHILD``                 the default child by importable name,
                               ``module:attribute`` (e.g.
                               ``lyra.proteins:ProteinChild``); wins over
                               the Anthropic default
``LYRA_MODEL``                 the Anthropic model (default below)
``LYRA_AFDB_URL``              AlphaFold DB host of ``--source live``
``LYRA_UNIPROT_URL``           UniProt REST host of ``--source live``
``LYRA_MCP_TOKEN``             the bearer token ``lyra mcp --http`` requires
                               of every request (needed to serve beyond
                               loopback)
``LYRA_A2A_TOKEN``             the bearer token ``lyra a2a`` asks of every
                               request but its agent card (required to bind
                               beyond loopback)
``LYRA_TEST_INVOCATION_LOG``   tests only: a file where durable attempts
                               note each start
``LYRA_TEST_PAUSE``            tests only: ``before_checkpoint`` or
                               ``after_checkpoint``, where every durable
                               attempt stops (so a test can kill it there)
=============================  ============================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "claude-sonnet-5-5"

__all__ = ["DEFAULT_MODEL", "Settings", "settings"]


class Settings(BaseSettings):
    """Configuration from the environment (``LYRA_*`` and ``ANTHROPIC_API_KEY``)."""

    model_config = SettingsConfigDict(env_prefix="LYRA_", frozen=True, extra="ignore")

    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key"),
        description="The Anthropic API key; enables the Anthropic child and model-written text.",
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url"),
        description="Another Messages API endpoint (a proxy, a gateway, a local server).",
    )
    child: str | None = Field(
        default=None,
        description="The default child as module:attribute (a child, or a class "
        "or factory called with no arguments).",
    )
    model: str = Field(default=DEFAULT_MODEL, description="The Anthropic model children use.")
    afdb_url: str = Field(
        default="https://alphafold.ebi.ac.uk",
        description="AlphaFold DB host (protein --source live).",
    )
    uniprot_url: str = Field(
        default="https://rest.uniprot.org", description="UniProt REST host (protein --source live)."
    )
    mcp_token: SecretStr | None = Field(
        default=None,
        description="The bearer token lyra mcp --http requires of every request "
        "(Authorization: Bearer …); needed to serve on an address other machines reach.",
    )
    a2a_token: SecretStr | None = Field(
        default=None,
        description="The bearer token lyra a2a requires of every request but the agent card; "
        "required to serve on an address other than loopback.",
    )
    max_crashes: int = Field(
        default=5,
        ge=1,
        description="Durable runs: a child whose process ended this many times while it "
        "ran (a crash, a kill) is failed as tool_error, retryable, and the run goes on.",
    )
    test_invocation_log: Path | None = Field(
        default=None, description="Tests only: durable attempts append a line here when they start."
    )
    test_pause: Literal["before_checkpoint", "after_checkpoint"] | None = Field(
        default=None,
        description="Tests only: every durable attempt stops for an hour at this point "
        "(before or after its checkpoint is saved), so that a test can kill it there.",
    )

    @property
    def model_configured(self) -> bool:
        """True when an API key is set, so model-backed helpers may run."""
        return bool(self.anthropic_api_key and self.anthropic_api_key.get_secret_value())

    def anthropic_client_options(self) -> dict[str, Any]:
        """Keyword arguments for an ``anthropic`` client: the key and endpoint set here."""
        options: dict[str, Any] = {}
        if self.anthropic_api_key is not None:
            options["api_key"] = self.anthropic_api_key.get_secret_value()
        if self.anthropic_base_url:
            options["base_url"] = self.anthropic_base_url
        return options

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Every environment variable read, with its description (for docs and ``--help``)."""
        names: dict[str, str] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                env = str(alias.choices[0])
            else:
                env = f"LYRA_{name.upper()}"
            names[env] = field.description or ""
        return names


def settings() -> Settings:
    """The settings as the environment says now."""
    return Settings()
