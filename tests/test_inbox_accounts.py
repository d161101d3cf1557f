"""Inbox accounts and sign-in without a browser or a server: the token shown once and
kept only as a hash, names that could become paths refused, the session key private,
sign-in and its CSRF check, and a session that ends with its account's token."""

from __future__ import annotations

import os
import stat

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from vicar.cli import app
from vicar.inbox.accounts import SECRET_FILE, add_user, inbox_dir, remove_user, user_for_token, users_dir
from vicar.inbox.app import SESSION_COOKIE, create_app
from vicar.responders import save_allowed
from vicar.settings import Settings


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VICAR_DATA_DIR", str(tmp_path))
    return tmp_path


def test_user_add_prints_the_link_once_and_keeps_only_a_hash(data_dir):
    result = CliRunner().invoke(app, ["inbox", "user", "add", "alice", "--principal", "p1"])
    assert result.exit_code == 0, result.output
    link = next(line for line in result.output.splitlines() if "/signin#token=" in line)
    token = link.split("#token=")[1].strip()
    path = users_dir(data_dir) / "alice.json"
    assert token not in path.read_text() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert user_for_token(data_dir, token).principals == ["p1"]
    # p1 has no allow-list: it lets in only its own name, and the command says so now.
    said = " ".join(result.output.split())
    assert "note: 'alice' may not answer for p1: p1 has no allow-list" in said
    assert "vicar principal allow p1 alice" in said
    save_allowed(data_dir / "principals", "p1", ["alice"])
    again = CliRunner().invoke(app, ["inbox", "user", "add", "alice", "--principal", "p1"])
    assert again.exit_code == 0 and "note:" not in again.output
    _, newer = add_user(data_dir, "alice", [])  # a new token: the old one opens nothing
    assert user_for_token(data_dir, token) is None and user_for_token(data_dir, newer).name == "alice"


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "", " ", "x" * 200, "a\x00b", ".hidden"])
def test_a_name_that_could_become_a_path_is_refused(data_dir, name):
    result = CliRunner().invoke(app, ["inbox", "user", "add", name])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output
    assert not any(p.is_file() for p in data_dir.rglob("*"))  # nothing written anywhere


def test_an_invalid_principal_is_refused(data_dir):
    result = CliRunner().invoke(app, ["inbox", "user", "add", "alice", "--principal", "../p"])
    assert result.exit_code == 2 and "principal" in result.output


def _signin(http: TestClient, token: str):
    page = http.get("/signin")
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    return http.post("/signin", data={"csrf": csrf, "token": token}, follow_redirects=False)


def test_sign_in_with_the_token_and_its_csrf_check(data_dir):
    _, token = add_user(data_dir, "alice", [])
    web = create_app(Settings(data_dir=data_dir), client=object(), secure_cookies=True)
    secret = inbox_dir(data_dir) / SECRET_FILE
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    with TestClient(web, base_url="https://inbox.example") as http:
        refused = http.post("/signin", data={"token": token}, follow_redirects=False)
        assert refused.status_code == 403 and "CSRF" in refused.text
        assert _signin(http, "not-a-token").status_code == 403
        ok = _signin(http, token)
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = ok.headers["set-cookie"]
        assert f"{SESSION_COOKIE}=" in cookie and "secure" in cookie.lower() and "httponly" in cookie.lower()
        assert token not in cookie and secret.read_text().strip() not in cookie
        remove_user(data_dir, "alice")  # the account gone, the signed cookie opens nothing
        assert http.get("/feed", follow_redirects=False).headers["location"] == "/signin"
        assert http.post("/answer", data={"workflow_id": "x"}).status_code == 403


def test_the_session_key_is_made_once(data_dir):
    create_app(Settings(data_dir=data_dir), client=object())
    first = (inbox_dir(data_dir) / SECRET_FILE).read_text()
    create_app(Settings(data_dir=data_dir), client=object())
    assert (inbox_dir(data_dir) / SECRET_FILE).read_text() == first and len(first.strip()) >= 32
    assert os.stat(inbox_dir(data_dir)).st_mode & 0o077 == 0


def test_serving_with_temporal_unreachable_is_one_line(data_dir):
    result = CliRunner().invoke(app, ["inbox", "--port", "1"], env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert result.exit_code == 4, result.output
    assert result.output.startswith("error: cannot reach Temporal") and "Traceback" not in result.output


def test_inboxes_starting_at_once_agree_on_one_session_key(tmp_path):
    """Real processes racing to make the key: each reads a whole key, all the same one
    (the key was once created empty and written after, so a racing reader could fail)."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from vicar.inbox.accounts import session_secret; "
        "print(session_secret(Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    keys = {o.strip() for o, _ in outs}
    assert len(keys) == 1 and len(keys.pop()) >= 32
    key_file = inbox_dir(tmp_path) / SECRET_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in key_file.parent.iterdir() if p.name.startswith(".session-key-")] == []
