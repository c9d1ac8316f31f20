"""API keys: parsing, scopes, and when an open server is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.exceptions import ConfigurationError
from suture.server.auth import ApiKeys, Scope, check_binding, is_loopback


def test_keys_from_the_variable_and_a_file(tmp_path: Path) -> None:
    file = tmp_path / "keys"
    file.write_text("# team keys\n\nalpha:write\n  beta:READ  \nwith:colon:read\n")
    keys = ApiKeys.load("gamma:read, alpha:read", file)
    assert keys.scope_of("alpha") is Scope.WRITE  # the file's line wins over the variable
    assert keys.scope_of("beta") is Scope.READ and keys.scope_of("gamma") is Scope.READ
    assert keys.scope_of("with:colon") is Scope.READ
    assert keys.scope_of("delta") is None and keys.scope_of("") is None
    assert not ApiKeys.load("", None).enabled and keys.enabled


@pytest.mark.parametrize(("entry", "problem"), [
    ("topsecret", "expected KEY:SCOPE"), ("topsecret:admin", "unknown scope 'admin'"),
    (":read", "expected KEY:SCOPE"), ("top secret:read", "expected KEY:SCOPE"),
])
def test_bad_entries_name_their_position_never_the_key(entry: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        ApiKeys.parse(["fine:read", entry], "SUTURE_API_KEYS")
    assert "SUTURE_API_KEYS, entry 2" in str(error.value) and problem in str(error.value)
    assert "topsecret" not in str(error.value) and "top secret" not in str(error.value)


def test_missing_keys_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the API keys file"):
        ApiKeys.load(None, tmp_path / "none")


def test_write_scope_covers_read() -> None:
    assert Scope.WRITE.allows(Scope.READ) and Scope.WRITE.allows(Scope.WRITE)
    assert Scope.READ.allows(Scope.READ) and not Scope.READ.allows(Scope.WRITE)


def test_open_servers_only_on_loopback() -> None:
    open_ = ApiKeys()
    keyed = ApiKeys.parse(["k:read"], "test")
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert is_loopback(host) and check_binding(host, open_, False) is None
    for host in ("0.0.0.0", "192.168.1.4", "::", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(ConfigurationError, match=f"refusing to serve on {host}"):
            check_binding(host, open_, False)
        assert check_binding(host, keyed, False) is None
        warning = check_binding(host, open_, True)
        assert warning is not None and "WITHOUT authentication" in warning
