"""The payload codec: a human's words from one gate, seen by the next gate's proxy, are
nowhere in Temporal's history or visibility in plaintext; Vicar's own clients read them;
keys rotate; a process without the key says so in one line."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import subprocess
import sys

import pytest
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History
from temporalio.client import Client

from vicar import contracts as c
from vicar.client.gates import answer_gate, list_escalations, start_gate
from vicar.errors import InvalidInput
from vicar.models import HumanAnswer
from vicar.runtime.codec import (
    ENCODING,
    KEY_ID,
    OPENED_WITH,
    REFUSED,
    AesGcmCodec,
    CodecKeyError,
    data_converter,
    new_key_line,
    parse_keys,
)
from vicar.settings import Settings

from .conftest import wait_escalated

# A sentence no template or code path makes: only the human's answer carries it.
WORDS = "Marmalade quokka ledger spelunking"


async def test_a_humans_words_are_sealed_in_history_and_visibility(harness):
    h = harness
    p = h.principal()
    first = h.request(p, escalation_mode="always", artifact="Add an index on users.email.")
    handle1 = await start_gate(h.client, first, h.task_queue)
    await wait_escalated(h.client, first.gate_id)
    await answer_gate(
        h.client,
        first.gate_id,
        HumanAnswer(action="correct", text=f"{WORDS}: check the lock time first.", responder="alice"),
    )
    await handle1.result()
    # The next gate of the same kind: the proxy retrieves the first answer and shows it.
    second = h.request(p, escalation_mode="always", artifact="Add an index on users.email.")
    handle2 = await start_gate(h.client, second, h.task_queue)
    await wait_escalated(h.client, second.gate_id)

    plain = await Client.connect(h.client.service_client.config.target_host, namespace=h.client.namespace)
    raw = b""
    for gate_id in (first.gate_id, second.gate_id):
        history = await plain.get_workflow_handle(c.gate_workflow_id(gate_id)).fetch_history()
        raw += History(events=history.events).SerializeToString()
    listed = [wf async for wf in plain.list_workflows(f'VicarPrincipal = "{p}"')]
    assert {wf.id for wf in listed} >= {c.gate_workflow_id(first.gate_id), c.gate_workflow_id(second.gate_id)}
    raw_listing = b"".join(wf.raw_info.SerializeToString() for wf in listed)
    described = (await plain.get_workflow_handle(c.gate_workflow_id(second.gate_id)).describe()).raw_description
    assert c.ESCALATION_MEMO in described.workflow_execution_info.memo.fields  # the memo is there...
    for blob in (raw, raw_listing, described.SerializeToString()):
        for word in WORDS.split():
            assert word.encode() not in blob  # ... and nothing in plaintext
    assert ENCODING in raw and KEY_ID.encode() in raw

    # With the codec: the second gate's history holds the first answer's words (what
    # the proxy retrieved), and `vicar escalations` reads the memo.
    decoded = b""
    for event in (await handle2.fetch_history()).events:
        for payload in _payloads(event):
            decoded += (await h.client.data_converter.payload_codec.decode([payload]))[0].data
    assert WORDS.encode() in decoded
    waiting = [d for d in await list_escalations(h.client, p) if d.gate_id == second.gate_id]
    assert waiting and waiting[0].question == second.question
    assert WORDS in waiting[0].proxy_text  # the memo carries them (sealed, checked above)
    await handle2.cancel()


def _payloads(message) -> list[Payload]:
    """Every Payload inside a protobuf message, however deep."""
    if isinstance(message, Payload):
        return [message]
    found = []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if isinstance(value, Message):
            values = [value]
        else:  # a repeated field, or a map (its values)
            values = list(value.values()) if hasattr(value, "values") else list(value)
        for v in values:
            found += _payloads(v)
    return found


async def test_keys_rotate_old_payloads_still_open():
    one = parse_keys(new_key_line("k1"), "test")
    old = await AesGcmCodec(one).encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"first"')])
    assert old[0].metadata[KEY_ID] == b"k1"
    two = {**one, **parse_keys(new_key_line("k2"), "test")}
    rotated = AesGcmCodec(two)
    assert (await rotated.decode(old))[0].data == b'"first"'
    new = await rotated.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"second"')])
    assert new[0].metadata[KEY_ID] == b"k2" and b"second" not in new[0].data
    assert (await rotated.decode(new))[0].data == b'"second"'
    # A payload from before the codec (an old history) opens unchanged; decoding marks it
    # plain, which is what lets a workflow refuse a plain write (workflows/sealed.py).
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"old"')
    assert rotated.open(plain) == plain
    (marked,) = await rotated.decode([plain])
    assert marked.data == plain.data and dict(marked.metadata) == {"encoding": b"json/plain", OPENED_WITH: b""}
    assert (await rotated.decode(new))[0].metadata[OPENED_WITH] == b"k2"


async def test_a_missing_or_wrong_key_is_one_clear_line():
    sealed = await AesGcmCodec(parse_keys(new_key_line("k1"), "t")).encode([Payload(data=b"x")])
    with pytest.raises(CodecKeyError, match=r"sealed with key 'k1', which this process lacks \(it has: k2\)"):
        AesGcmCodec(parse_keys(new_key_line("k2"), "t")).open(sealed[0])
    with pytest.raises(CodecKeyError, match="does not open"):
        AesGcmCodec(parse_keys(new_key_line("k1"), "t")).open(sealed[0])
    tampered = Payload(metadata=sealed[0].metadata, data=sealed[0].data[:-1] + bytes([sealed[0].data[-1] ^ 1]))
    with pytest.raises(CodecKeyError, match="does not open"):
        AesGcmCodec(parse_keys(new_key_line("k1"), "t")).open(tampered)
    # Decoding never raises (a worker decodes a whole activation at once): what does not
    # open becomes a refusal, and converting that one value raises the same line.
    other = dataclasses.replace(data_converter(), payload_codec=AesGcmCodec(parse_keys(new_key_line("k2"), "t")))
    refused = await other.payload_codec.decode(sealed)
    assert refused[0].metadata["encoding"] == REFUSED and not refused[0].data
    with pytest.raises(CodecKeyError, match=r"sealed with key 'k1', which this process lacks \(it has: k2\)"):
        other.payload_converter.from_payloads(refused)
    for bad, why in (
        ("k1", "not `id:base64-key`"),
        ("k1:" + base64.b64encode(b"short").decode(), "has 5 bytes"),
        ("k/1:AAAA", "not `id:base64-key`"),
        ("k1:***", "not base64"),
        ("", "no key"),
    ):
        with pytest.raises(Exception, match=why):
            parse_keys(bad, "VICAR_CODEC_KEYS")


def test_the_default_key_file_is_made_once_owner_only(tmp_path, monkeypatch):
    monkeypatch.delenv("VICAR_CODEC_KEYS", raising=False)
    monkeypatch.delenv("VICAR_CODEC_KEY_FILE", raising=False)
    settings = Settings(data_dir=tmp_path / "vicar")
    path = tmp_path / "vicar" / "codec-keys"
    with pytest.raises(CodecKeyError, match="no payload keys: .* only a worker makes one"):
        data_converter(settings)  # a client (the CLI, the inbox, an orchestrator) makes none
    assert not path.exists()
    first = data_converter(settings, make_keys=True).payload_codec  # a worker does
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert data_converter(settings).payload_codec.keys == first.keys  # read back, not made anew
    ((key_id, key),) = first.keys.items()
    assert key_id.startswith("auto-") and f"{key_id}:{base64.b64encode(key).decode()}" in path.read_text()
    other = data_converter(Settings(data_dir=tmp_path / "elsewhere"), make_keys=True).payload_codec
    assert list(other.keys) != [key_id]  # another data dir's key has another id: a mix-up names it


async def test_the_cli_without_the_key_says_so_in_one_line(harness, tmp_path):
    """`vicar escalations` with other keys than the workers': one line naming both, before
    it reads or sends anything (the listing of a gate whose key was rotated out, by a
    client that holds the workers' keys, is tests/test_codec_rotation.py's)."""
    h = harness
    req = h.request(h.principal(), escalation_mode="always")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    env = dict(
        os.environ,
        TEMPORAL_ADDRESS=h.client.service_client.config.target_host,
        VICAR_DATA_DIR=str(tmp_path / "other"),
        VICAR_TASK_QUEUE=h.task_queue,
        VICAR_CODEC_KEYS=new_key_line("k-other"),
    )
    try:
        out = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "vicar.cli", "escalations", "--principal", req.principal],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        await handle.cancel()
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    ours = list(h.client.data_converter.payload_codec.keys)[-1]
    assert len(lines) == 1 and f"the workers seal with key {ours!r}, which this process lacks" in lines[0]
    assert "(it has: k-other)" in lines[0] and "VICAR_CODEC_KEYS" in lines[0] and "Traceback" not in out.stderr


@pytest.fixture
def codec_server(tmp_path):
    """`vicar codec-server` as a process on a free loopback port."""
    token = "t-" + base64.urlsafe_b64encode(os.urandom(18)).decode()
    env = dict(os.environ, VICAR_DATA_DIR=str(tmp_path / "vicar"), VICAR_CODEC_SERVER_TOKEN=token)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vicar.cli", "codec-server", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert "codec server on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() else "")
    assert token not in line  # where the token is, never the token
    yield line.split(" on ", 1)[1].split(" ", 1)[0], token, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


def _json(payloads: list[Payload]) -> dict:
    from google.protobuf.json_format import MessageToDict
    from temporalio.api.common.v1 import Payloads

    return MessageToDict(Payloads(payloads=payloads))


async def test_the_codec_server_decodes_for_the_token_holder_only(codec_server):
    import httpx

    url, token, proc = codec_server
    ours = data_converter()  # the same keys as the server (the session's)
    sealed = await ours.encode([{"text": WORDS}])
    body = _json(sealed)
    async with httpx.AsyncClient(timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": token}):
            refused = await http.post(f"{url}/decode", json=body, headers=headers)
            assert refused.status_code == 401 and WORDS not in refused.text
        opened = await http.post(
            f"{url}/decode", json=body, headers={"Authorization": f"Bearer {token}", "X-Namespace": "default"}
        )
        assert opened.status_code == 200, opened.text
        assert opened.headers["Cache-Control"] == "no-store"
        decoded = opened.json()["payloads"][0]
        assert base64.b64decode(decoded["data"]) == f'{{"text":"{WORDS}"}}'.encode()
        assert base64.b64decode(decoded["metadata"]["encoding"]) == b"json/plain"
        # /<token>/decode: the dev server's UI has no login to send a bearer token from.
        assert (await http.post(f"{url}/{token}/decode", json=body)).json() == opened.json()
        # encode seals with the newest key, and it opens in Vicar's own clients.
        resealed = await http.post(f"{url}/encode", json=opened.json(), headers={"Authorization": f"Bearer {token}"})
        payload = resealed.json()["payloads"][0]
        assert base64.b64decode(payload["metadata"]["encoding"]) == ENCODING and WORDS not in resealed.text
        from google.protobuf.json_format import ParseDict
        from temporalio.api.common.v1 import Payloads

        assert await ours.decode(ParseDict(resealed.json(), Payloads()).payloads, [dict]) == [{"text": WORDS}]
        # CORS: the UI's origin is admitted, another is not.
        pre = await http.options(
            f"{url}/decode", headers={"Origin": "http://localhost:8233", "Access-Control-Request-Method": "POST"}
        )
        assert pre.headers["Access-Control-Allow-Origin"] == "http://localhost:8233"
        assert "Authorization" in pre.headers["Access-Control-Allow-Headers"]
        evil = await http.options(f"{url}/decode", headers={"Origin": "http://evil.example"})
        assert "Access-Control-Allow-Origin" not in evil.headers
        # Hostile or foreign bodies: one JSON line each, never a hang.
        auth = {"Authorization": f"Bearer {token}"}
        bad = await http.post(f"{url}/decode", content=b"{not json", headers=auth)
        assert bad.status_code == 400 and "payloads" in bad.json()["message"]
        other = await AesGcmCodec(parse_keys(new_key_line("elsewhere"), "t")).encode([Payload(data=b"x")])
        foreign = await http.post(f"{url}/decode", json=_json(other), headers=auth)
        assert foreign.status_code == 422 and "'elsewhere', which this process lacks" in foreign.json()["message"]
        assert (await http.post(f"{url}/decode", content=b"", headers=auth)).status_code == 400
        assert (await http.post(f"{url}/nope", json=body, headers=auth)).status_code == 404
    proc.terminate()
    assert proc.wait(timeout=10) == 0


async def test_the_temporal_cli_shows_a_gate_through_the_codec_server(harness, codec_server):
    """Temporal's own client of the protocol: `temporal workflow show --codec-endpoint`."""
    from vicar.runtime.server import temporal_binary

    h = harness
    url, token, _ = codec_server
    req = h.request(h.principal(), escalation_mode="always", question=f"{WORDS}: approve the plan?")
    handle = await start_gate(h.client, req, h.task_queue)
    await wait_escalated(h.client, req.gate_id)
    show = [
        temporal_binary(),
        "workflow",
        "show",
        "-w",
        handle.id,
        "--output",
        "json",
        "--address",
        h.client.service_client.config.target_host,
        "--namespace",
        h.client.namespace,
    ]
    try:
        raw, decoded, refused = [
            await asyncio.to_thread(subprocess.run, show + extra, capture_output=True, text=True, timeout=60)
            for extra in (
                [],
                ["--codec-endpoint", url, "--codec-auth", f"Bearer {token}"],
                ["--codec-endpoint", url, "--codec-auth", "Bearer not-the-token-0123"],
            )
        ]
    finally:
        await handle.cancel()
    assert raw.returncode == 0 and decoded.returncode == 0, (raw.stderr, decoded.stderr)
    # The CLI's JSON keeps each payload's data in base64: what the data says, decoded.
    assert WORDS.split()[0] not in _datas(raw.stdout) and WORDS.split()[0] not in _datas(refused.stdout)
    assert WORDS in _datas(decoded.stdout)


def _datas(shown: str) -> str:
    import json

    out: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "data" and isinstance(v, str):
                    out.append(base64.b64decode(v).decode(errors="replace"))
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(shown) if shown.strip() else {})
    return "\n".join(out)


def test_a_worker_serving_some_shards_needs_shared_keys(tmp_path, monkeypatch):
    """A pod of a sharded StatefulSet must not make a key of its own: the others could not
    open what it seals."""
    monkeypatch.delenv("VICAR_CODEC_KEYS", raising=False)
    monkeypatch.delenv("VICAR_CODEC_KEY_FILE", raising=False)
    some = Settings(data_dir=tmp_path / "pod-1", shard_count=4, shards="0,1")
    with pytest.raises(InvalidInput, match="serves some of 4 shards: give every worker the same payload keys"):
        data_converter(some, make_keys=True)
    assert not (tmp_path / "pod-1" / "codec-keys").exists()
    # One worker serving every shard: its own key.
    data_converter(Settings(data_dir=tmp_path / "all", shard_count=4, shards="all"), make_keys=True)
    shared = tmp_path / "shared-keys"
    shared.write_text(new_key_line("k1") + "\n")
    monkeypatch.setenv("VICAR_CODEC_KEY_FILE", str(shared))
    assert list(data_converter(some).payload_codec.keys) == ["k1"]


async def test_a_gate_a_worker_cannot_open_fails_at_once_in_one_line(temporal_env, settings, worker_process):
    """A gate started with a key the worker lacks (a client with other keys, or a worker
    not given the deployment's) fails in its first task with one line naming the keys,
    where it used to fail its workflow task for ever (issue 34); the worker's log says
    the same in one line, with no traceback."""
    import uuid

    from temporalio.client import WorkflowFailureError

    from vicar.models import GateRequest

    worker = worker_process(settings.data_dir / "keyless", VICAR_CODEC_KEYS=new_key_line("not-the-workers"))
    await worker.start()
    task_queue = worker.task_queue
    req = GateRequest(
        principal=f"p-{uuid.uuid4().hex[:8]}",
        gate_id=f"g-{uuid.uuid4().hex[:8]}",
        state="WORK_ASSERT",
        task_type="docs",
        question="Approve?",
        escalation_mode="never",
    )
    handle = await start_gate(temporal_env.client, req, task_queue)
    try:
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 120)
    finally:
        log = await worker.stop(timeout=60)
    ours = list(temporal_env.client.data_converter.payload_codec.keys)[-1]
    why = failed.value.cause.message
    assert why.startswith("invalid gate request: ") and "\n" not in why
    assert f"sealed with key {ours!r}, which this worker lacks (it has: not-the-workers)" in why
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
    assert "Traceback" not in log
