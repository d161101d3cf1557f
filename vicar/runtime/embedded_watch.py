"""A worker's watch over the embedded server it uses. The keeper starts a server that
died under its users again (vicar/runtime/server_keeper.py), but a keeper that is killed
takes its server with it, and nobody would start it again: the worker's Temporal would
be gone for good while it polled nothing. The worker then starts another keeper, on the
same ports when they are free (or joins one another Vicar process started meanwhile).
Back on the same address, the SDK's client connects again by itself (it retries its
polls); a server that had to move is reported, and the worker connects again."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from vicar.errors import VicarError
from vicar.runtime.server import SharedServer, keeper_note, use_embedded

log = logging.getLogger("vicar.worker")
WATCH_SECONDS = 2.0


class EmbeddedWatch:
    def __init__(self, server: SharedServer, data_dir: Path, ports: object | None = None) -> None:
        self.server, self.data_dir, self.ports = server, data_dir, ports

    async def moved(self) -> str:
        """Watch until the server is back on another address than the one this worker's
        client was made for; returns it (the caller connects again)."""
        address = self.server.address
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                now = await self._look()
            except Exception:  # noqa: BLE001  (the watch outlives a failed look; the next one tries again)
                log.exception("watching the embedded Temporal server failed; looking again")
                continue
            if now is not None and now != address:
                return now

    async def _look(self) -> str | None:
        """Where the server is now (None: where it was, or nowhere yet)."""
        note = await asyncio.to_thread(keeper_note, self.data_dir)
        if note is not None:  # running, or being started again by its keeper
            if note.get("address") and note["address"] != self.server.address:
                self.server.note = note  # its keeper started it again elsewhere
                self.server.address, self.server.ui_url = note["address"], note.get("ui_url", "")
                return self.server.address
            return None
        log.warning("the embedded Temporal server is gone with its keeper: starting it again")
        try:
            again = await asyncio.to_thread(
                use_embedded, self.data_dir, ports=self.ports, prefer=self.server.note.get("ports")
            )
        except VicarError as exc:
            log.error("the embedded Temporal server did not start again (%s); trying again", exc)
            return None
        was = self.server.address
        self.server.adopt(again)
        log.warning("the embedded Temporal server is back on %s", again.address)
        return again.address if again.address != was else None
