"""The variables read each time they are used rather than once at start: the payload
keys and the codec server's token, and the debug switch.

The secrets stay out of Settings, which is passed around, copied and printed; here they
are SecretStr, so no repr or log line shows them. A test or an operator may change them
while a process runs (the key file a rotation names). The debug switch is read by the
error handlers, when the settings may be what failed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from vicar.settings.source import Variables


class ReadAtUse(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VICAR_", extra="forbid")

    codec_keys: SecretStr | None = None
    codec_key_file: Path | None = None
    codec_server_token: SecretStr | None = None
    webhook_secret: SecretStr | None = None  # signs each notice (vicar/webhook_sign.py)
    slack_signing_secret: SecretStr | None = None  # checks Slack's requests (vicar/inbox/slack_actions.py)
    hook_token: SecretStr | None = None  # the inbox's coding-agent hook endpoint (vicar/hooks/http.py)
    debug: bool = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, Variables(settings_cls, "ReadAtUse")


def secret(value: SecretStr | None) -> str:
    """The secret's text where it is used ("" when unset)."""
    return value.get_secret_value() if value else ""


def debugging() -> bool:
    """VICAR_DEBUG: tracebacks and exception chains for developers."""
    return ReadAtUse().debug
