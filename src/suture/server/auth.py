"""API keys with read and write scopes, sent as `Authorization: Bearer KEY`.

Keys come from `SUTURE_API_KEYS="key1:read,key2:write"` and/or a file given to
`suture serve --api-keys FILE` (one `key:scope` per line, `#` comments). A write key
may also read. With no key configured the server is open, which `suture serve` allows
only on a loopback address (see `check_binding`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from suture.exceptions import ConfigurationError

#: environment variable holding comma-separated `key:scope` entries
KEYS_VARIABLE = "SUTURE_API_KEYS"


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"

    def allows(self, needed: Scope) -> bool:
        """A write key may do everything a read key may."""
        return self is Scope.WRITE or needed is Scope.READ


@dataclass(frozen=True, slots=True)
class ApiKeys:
    """The configured keys and their scopes; empty means authentication is off."""

    scopes: Mapping[str, Scope] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.scopes)

    def scope_of(self, token: str) -> Scope | None:
        """The scope of a presented key, compared in constant time against every key."""
        found: Scope | None = None
        presented = token.encode()
        for key, scope in self.scopes.items():
            if hmac.compare_digest(presented, key.encode()):
                found = scope
        return found

    @classmethod
    def parse(cls, entries: Iterable[str], source: str) -> ApiKeys:
        """Keys from `key:scope` entries; errors name the entry's position, never the key."""
        scopes: dict[str, Scope] = {}
        for number, raw in enumerate(entries, start=1):
            entry = raw.strip()
            if not entry or entry.startswith("#"):
                continue
            key, sep, scope = entry.rpartition(":")
            key = key.strip()
            if not sep or not key or any(ch.isspace() for ch in key):
                raise ConfigurationError(
                    f"{source}, entry {number}: expected KEY:SCOPE with a key without "
                    "spaces and a scope of read or write (e.g. s3cret:read)"
                )
            try:
                scopes[key] = Scope(scope.strip().lower())
            except ValueError:
                raise ConfigurationError(
                    f"{source}, entry {number}: unknown scope {scope.strip()!r}; "
                    "use read or write"
                ) from None
        return cls(scopes)

    @classmethod
    def load(cls, variable: str | None, file: Path | None) -> ApiKeys:
        """Keys from the environment variable's value and a keys file, merged."""
        scopes: dict[str, Scope] = {}
        if variable:
            scopes.update(cls.parse(variable.split(","), KEYS_VARIABLE).scopes)
        if file is not None:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read the API keys file {file}: {exc.strerror or exc}"
                ) from None
            scopes.update(cls.parse(lines, str(file)).scopes)
        return cls(scopes)


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_binding(host: str, keys: ApiKeys, allow_unauthenticated: bool) -> str | None:
    """Refuse an open server on a non-loopback address; returns a warning to show, if any.

    Without keys anyone who can reach the port could read and change the index, so
    binding elsewhere than loopback needs keys, or an explicit
    `--allow-unauthenticated` (then the returned warning must be shown loudly).
    """
    if keys.enabled or is_loopback(host):
        return None
    if not allow_unauthenticated:
        raise ConfigurationError(
            f"refusing to serve on {host} without API keys: anyone who can reach it could "
            f"read and change the index. Set {KEYS_VARIABLE}=\"KEY:read,KEY2:write\" or "
            "--api-keys FILE, bind to 127.0.0.1, or pass --allow-unauthenticated"
        )
    return (
        f"WARNING: serving on {host} WITHOUT authentication (--allow-unauthenticated): "
        "anyone who can reach this port can read, add and delete documents"
    )


__all__ = ["KEYS_VARIABLE", "ApiKeys", "Scope", "check_binding", "is_loopback"]
