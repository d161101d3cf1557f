"""Payload encryption: every payload Vicar's clients and workers hand to Temporal
(workflow and activity inputs and results, signals, updates, queries, the memo) is
sealed with AES-256-GCM before it leaves the process, so history and visibility hold
no memory content in plaintext. Temporal's own answer (a PayloadCodec); docs/codec.md.

Keys are named so they rotate: each payload carries the id of the key that sealed it,
decoding accepts every known key and encoding uses the newest (the last listed). The
keys come from VICAR_CODEC_KEYS (`id:base64,...`), else VICAR_CODEC_KEY_FILE (one
`id:base64` a line), else `<data dir>/codec-keys`, which a worker creates 0600 on first
use (nothing else makes a key). A key never enters history: only its id does."""

from __future__ import annotations

import base64
import copy
import dataclasses
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    EncodingPayloadConverter,
    PayloadCodec,
    SerializationContext,
    WorkflowSerializationContext,
)
from temporalio.exceptions import ApplicationError, FailureError

from vicar.errors import REFUSED_PAYLOAD, CodecKeyError, InvalidInput, VicarError
from vicar.settings import ReadAtUse, Settings, secret

ENCODING = b"binary/encrypted"  # the metadata Temporal's encryption samples use
KEY_ID = "encryption-key-id"
# What decoding leaves: the key a payload opened with, or in place of a payload that did
# not open, a refusal saying why (AesGcmCodec.decode_one).
OPENED_WITH = "vicar-opened-with"
REFUSED = b"binary/vicar-refused"
REFUSAL, HELD = "vicar-refusal", "vicar-keys-held"
LACKS, ALTERED = b"lacks", b"altered"
NONCE_BYTES = 12  # GCM's standard nonce; random per payload (2^32 payloads per key stay far below the bound)
KEY_BYTES = 32  # AES-256
KEY_FILE = "codec-keys"
KEYS_VAR, KEY_FILE_VAR = "VICAR_CODEC_KEYS", "VICAR_CODEC_KEY_FILE"
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
log = logging.getLogger("vicar.runtime.codec")


def new_key_line(key_id: str) -> str:
    return f"{key_id}:{base64.b64encode(os.urandom(KEY_BYTES)).decode()}"


def parse_keys(text: str, where: str) -> dict[str, bytes]:
    """`id:base64` entries, comma- or line-separated, oldest first (the last one encodes)."""
    keys: dict[str, bytes] = {}
    lines = [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]
    entries = [e.strip() for line in lines for e in line.split(",") if e.strip()]
    for n, entry in enumerate(entries, 1):
        key_id, sep, b64 = entry.partition(":")
        if not sep or not _KEY_ID.match(key_id):
            raise InvalidInput(f"{where}: entry {n} is not `id:base64-key` (id: letters, digits, . _ -)")
        try:
            key = base64.b64decode(b64.strip(), validate=True)
        except ValueError:
            raise InvalidInput(f"{where}: key {key_id!r} is not base64") from None
        if len(key) != KEY_BYTES:
            raise InvalidInput(f"{where}: key {key_id!r} has {len(key)} bytes, AES-256 needs {KEY_BYTES}")
        keys.pop(key_id, None)  # a repeated id: its last value, and it becomes the newest
        keys[key_id] = key
    if not keys:
        raise InvalidInput(f"{where}: no key")
    return keys


def default_key_file(settings: Settings) -> Path:
    return settings.data_dir / KEY_FILE


def ensure_key_file(path: Path) -> None:
    """Create the key file with one new key, readable by its owner only. Two processes
    starting at once both end with the same file: it appears whole (link), or not at all."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write("# Vicar payload keys (docs/codec.md): id:base64, the last one encodes.\n")
            # A unique id: a process given another machine's file names the key it lacks.
            f.write(new_key_line(f"auto-{os.urandom(4).hex()}") + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


def load_keys(settings: Settings, *, make: bool = False) -> dict[str, bytes]:
    """`make`: a worker, which makes the data dir's key file if there is none. Anything
    else (the CLI, the inbox, an orchestrator, the codec server) never does: a key of its
    own would seal what no worker can open (each such write refused, or a gate wedged on it),
    so it is refused in one line."""
    # Read here, not carried in Settings: a key must never sit in an object that may be printed.
    at_use = ReadAtUse()
    if raw := secret(at_use.codec_keys):
        return _loaded(parse_keys(raw, KEYS_VAR), KEYS_VAR)
    named = at_use.codec_key_file
    path = named or default_key_file(settings)
    if not named and not path.exists():
        if _serves_some_shards(settings):
            # Its own new key would seal what the other shards' workers cannot open.
            raise InvalidInput(
                f"this worker serves some of {settings.shard_count} shards: give every worker "
                f"the same payload keys ({KEY_FILE_VAR} or {KEYS_VAR}; docs/codec.md)"
            )
        if not make:
            raise CodecKeyError(
                f"no payload keys: {path} does not exist, and only a worker makes one; give this process "
                f"the workers' keys ({KEY_FILE_VAR}=<their key file> or {KEYS_VAR}; docs/codec.md)"
            )
        ensure_key_file(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CodecKeyError(f"cannot read the payload keys at {path}: {exc.strerror or exc}") from None
    return _loaded(parse_keys(text, str(path)), str(path))


def _serves_some_shards(settings: Settings) -> bool:
    try:
        n = settings.shard_count
        return bool(n) and n is not None and len(settings.served_shards()) < n
    except VicarError:
        return False  # a bad --shards is refused where it is parsed, in its own words


def _loaded(keys: dict[str, bytes], where: str) -> dict[str, bytes]:
    # Ids only: which key a worker seals with is what an operator compares across processes.
    log.info("payload keys %s from %s; sealing with %r (docs/codec.md)", ", ".join(keys), where, list(keys)[-1])
    return keys


class AesGcmCodec(PayloadCodec):
    """The whole payload (its metadata too) is sealed; the key id is authenticated with
    it, so a payload cannot be passed off as sealed by another key."""

    def __init__(self, keys: dict[str, bytes]) -> None:
        if not keys:
            raise InvalidInput("no payload key")
        self.keys = dict(keys)
        self.current = list(self.keys)[-1]
        self._aead = {key_id: AESGCM(key) for key_id, key in self.keys.items()}

    def seal(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        key_id = self.current.encode()
        sealed = self._aead[self.current].encrypt(nonce, payload.SerializeToString(), key_id)
        return Payload(metadata={"encoding": ENCODING, KEY_ID: key_id}, data=nonce + sealed)

    def open(self, payload: Payload) -> Payload:
        """The payload inside, or CodecKeyError: the codec server's and the tools' strict read."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before the codec (old histories replay) or by a plain client
        opened = self.decode_one(payload)
        if opened.metadata.get("encoding") == REFUSED:
            raise CodecKeyError(refusal_line(opened))
        del opened.metadata[OPENED_WITH]
        return opened

    def decode_one(self, payload: Payload) -> Payload:
        """Never raises: a worker decodes every payload of an activation before workflow
        code runs, so one payload that does not open would fail the whole workflow task,
        again at every retry. What does not open becomes a refusal (REFUSED), which
        fails only the conversion of that one value: a signal carrying it is dropped, an
        update refused, a start failed (workflows/sealed.py). What opens is marked with
        the key that opened it (OPENED_WITH), a plain payload with an empty mark, so
        workflow code can tell a sealed write from a plain one (and both from a worker
        with no codec, which marks nothing); the mark is the codec's alone: whatever
        mark a plain payload came with is replaced."""
        if payload.metadata.get("encoding") != ENCODING:
            plain = Payload()
            plain.CopyFrom(payload)
            plain.metadata[OPENED_WITH] = b""
            return plain
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")[:64]
        aead = self._aead.get(key_id)
        why = LACKS
        if aead is not None:
            try:
                inner = Payload.FromString(
                    aead.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], key_id.encode())
                )
            except (InvalidTag, ValueError, DecodeError):  # too short for a nonce and a tag; not a payload inside
                why = ALTERED
            else:
                inner.metadata[OPENED_WITH] = key_id.encode()
                return inner
        return Payload(
            metadata={
                "encoding": REFUSED,
                REFUSAL: why,
                KEY_ID: key_id.encode(),
                HELD: ",".join(self.keys).encode(),
            }
        )

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decode_one(p) for p in payloads]


def refusal_line(payload: Payload, holder: str = "this process") -> str:
    """Why a payload did not open, in one line, naming the keys (never a key). `holder`:
    "this worker" when a worker refuses what a client sent."""
    meta = payload.metadata
    key_id = meta.get(KEY_ID, b"").decode(errors="replace")
    held = meta.get(HELD, b"").decode(errors="replace").replace(",", ", ")
    if meta.get(REFUSAL) == ALTERED:
        return (
            f"a payload sealed with key {key_id!r} does not open: {holder}'s key {key_id!r} is not the one "
            "it was sealed with, or the payload was altered"
        )
    advice = (
        "seal with the workers' keys"
        if holder == "this worker"
        else f"give it the same keys as the worker ({KEYS_VAR} or {KEY_FILE_VAR})"
    )
    return f"a payload is sealed with key {key_id!r}, which {holder} lacks (it has: {held}); {advice}"


class RefusedPayload(ApplicationError, CodecKeyError):
    """Here, not in vicar/errors.py, so that module loads without Temporal (a CLI command
    that never connects tears down as usual: vicar/runtime/ending.py).

    A workflow's argument it cannot read, where the SDK converts it (a start, signal or
    update with other than one argument): as a failure error it fails the workflow (a
    start), drops the signal or rejects the update, where any other error failed the
    workflow task at every retry. A CodecKeyError too, so a client shows its one line."""

    def __init__(self, message: str) -> None:
        ApplicationError.__init__(self, message, type=REFUSED_PAYLOAD, non_retryable=True)

    def __str__(self) -> str:
        return self.message  # the one line, as a CodecKeyError prints it


class RefusedPayloadConverter(EncodingPayloadConverter):
    """Converting a payload the codec could not open raises its one line (CodecKeyError)."""

    @property
    def encoding(self) -> str:
        return REFUSED.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never chosen to write a value

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raise CodecKeyError(refusal_line(payload))


class VicarPayloadConverter(PydanticPayloadConverter):
    """Pydantic's converter, plus the refusal above; in a workflow's own context (its
    inputs, signals, updates, queries: not an activity's result, which a worker sealed
    and which fails the task, retried until the worker has the key), an untyped value it
    cannot read is a RefusedPayload."""

    def __init__(self) -> None:
        super().__init__()
        self._set_converters(*self.converters.values(), RefusedPayloadConverter())
        self._workflows_own = False

    def with_context(self, context: SerializationContext) -> VicarPayloadConverter:
        own = type(context) is WorkflowSerializationContext  # an activity's is another type
        new = super().with_context(context)
        if new is self:
            if self._workflows_own == own:
                return self
            new = copy.copy(self)  # the converters are shared: they hold no state
        new._workflows_own = own
        return new

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        try:
            return super().from_payloads(payloads, type_hints)
        except FailureError:
            raise
        except Exception as exc:
            if not self._workflows_own or type_hints:
                raise
            # A client reads memos and results in this context too: the words fit both.
            refused = [p for p in payloads if p.metadata.get("encoding") == REFUSED]
            why = refusal_line(refused[0]) if refused else f"a value that cannot be read: {type(exc).__name__}: {exc}"
            raise RefusedPayload(" ".join(why.split())[:2000]) from None


def codec(settings: Settings | None = None, *, make_keys: bool = False) -> AesGcmCodec:
    return AesGcmCodec(load_keys(settings or Settings.from_env(), make=make_keys))


def data_converter(settings: Settings | None = None, *, make_keys: bool = False) -> DataConverter:
    """The one converter every Vicar client and worker uses: pydantic, then sealed.
    `make_keys`: for a worker only (load_keys)."""
    return dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=VicarPayloadConverter,
        payload_codec=codec(settings, make_keys=make_keys),
    )
