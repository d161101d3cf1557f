"""Issue 34, item 4: only a worker makes a payload key; a client without the workers'
keys is refused in one line naming them, before it sends anything, and no command
waits silently on a workflow its worker cannot open. Real CLI processes, a real worker
process and the real dev server."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from vicar import contracts as c
from vicar.client import get_control
from vicar.client.gates import start_gate
from vicar.runtime.codec import new_key_line

from .conftest import vicar_process, wait_escalated, wait_for


def keyless(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in ("VICAR_CODEC_KEYS", "VICAR_CODEC_KEY_FILE")}


async def cli(h, data_dir, *args: str, keys: str | None) -> tuple[int, str, str]:
    """`vicar ARGS` as its own process with these payload keys (None: none given)."""
    env = keyless(dict(os.environ)) | {
        "TEMPORAL_ADDRESS": h.client.service_client.config.target_host,
        "VICAR_TASK_QUEUE": h.task_queue,
        "VICAR_DATA_DIR": str(data_dir),
    }
    if keys is not None:
        env["VICAR_CODEC_KEYS"] = keys
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vicar.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def count(h, workflow_type: str) -> int:
    return (await h.client.count_workflows(f'WorkflowType = "{workflow_type}" AND TaskQueue = "{h.task_queue}"')).count


async def test_a_client_without_keys_makes_none_and_is_refused_in_one_line(harness, tmp_path):
    """A `vicar` on another machine (its own data dir, no key given) wrote a key of its
    own, sealed with it, and its update failed the brain's workflow task."""
    h = harness
    p = h.principal()
    await (await start_gate(h.client, h.request(p, escalation_mode="never", task_type="docs"), h.task_queue)).result()
    elsewhere = tmp_path / "elsewhere"
    for args in (["principal", "pause", p, "--by", "carol"], ["escalations"]):
        code, out, err = await cli(h, elsewhere, *args, keys=None)
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1, (code, out, err)
        assert "no payload keys" in lines[0] and "only a worker makes one" in lines[0]
        assert "VICAR_CODEC_KEY_FILE" in lines[0] and "VICAR_CODEC_KEYS" in lines[0]
    assert not (elsewhere / "codec-keys").exists()
    assert (await get_control(h.client, p)).pauses == []


async def test_a_worker_makes_the_key_and_a_client_of_its_data_dir_uses_it(tmp_path, worker_process):
    """`python -m vicar.worker` with no key given makes `<data dir>/codec-keys` (0600);
    the CLI on that data dir reads it, makes none, and talks to the worker."""
    data_dir = tmp_path / "vicar"
    worker = worker_process(data_dir, VICAR_CODEC_KEYS=None, VICAR_CODEC_KEY_FILE=None)
    env = worker.env  # the CLI below: the worker's server, queue and data dir, no key given
    await worker.start()
    try:
        keys = data_dir / "codec-keys"
        await wait_for(lambda: asyncio.sleep(0, keys.exists()), timeout=60)
        assert oct(keys.stat().st_mode & 0o777) == "0o600"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "vicar.cli",
            "escalations",
            "--principal",
            f"p-{uuid.uuid4().hex[:8]}",  # the server is shared with other tests' gates
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()
        assert "No gate is waiting" in out.decode()
        assert [p.name for p in data_dir.glob("codec-keys*")] == ["codec-keys"]
    finally:
        log = await worker.stop(timeout=60)
    assert "payload keys auto-" in log  # the ids it made and seals with, never the key


async def test_a_client_with_other_keys_is_refused_before_it_sends(harness, tmp_path):
    """`VICAR_CODEC_KEYS=kx:... vicar answer g0 ...` (item 1's way in), `vicar review`,
    `vicar audit export`, a pause, with a wrong key: one line naming the workers' key, at
    once, and nothing sent, no workflow started (a VicarAudit ran 10 minutes, a
    VicarReview 52)."""
    h = harness
    p = h.principal()
    alone = h.request(p, escalation_mode="never", task_type="docs")
    await (await start_gate(h.client, alone, h.task_queue)).result()
    waiting = h.request(p, escalation_mode="always")
    handle = await start_gate(h.client, waiting, h.task_queue)
    await wait_escalated(h.client, waiting.gate_id)
    ours = list(h.client.data_converter.payload_codec.keys)[-1]
    audits, reviews = await count(h, c.AUDIT_WORKFLOW), await count(h, c.REVIEW_WORKFLOW)
    other = new_key_line("kx")
    commands = [
        ["answer", waiting.gate_id, "approve", "x", "--responder", "alice"],
        ["review", alone.gate_id, "wrong", "--reviewer", "alice"],
        ["audit", "export", "--principal", p],
        ["principal", "pause", p, "--by", "carol"],
    ]
    for args in commands:
        started = asyncio.get_running_loop().time()
        code, out, err = await cli(h, tmp_path / "other", *args, keys=other)
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1, (args, code, out, err)
        assert (
            f"the workers seal with key {ours!r}, which this process lacks" in lines[0] and "(it has: kx)" in lines[0]
        )
        assert "nothing was sent" in lines[0] and "Traceback" not in err
        assert asyncio.get_running_loop().time() - started < 60
    assert (await count(h, c.AUDIT_WORKFLOW), await count(h, c.REVIEW_WORKFLOW)) == (audits, reviews)
    assert (await get_control(h.client, p)).pauses == []
    # The same commands with the workers' keys go through.
    code, out, err = await vicar_process(h, tmp_path / "ours", *commands[0])
    assert code == 0, err
    await asyncio.wait_for(handle.result(), 60)
