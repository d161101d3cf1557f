"""The dev data and a warm embedder, as the replay benches load them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from vicar.eval.dataset import GateEvent, load_events
from vicar.eval.run import warm_embeddings
from vicar.memory.embedder import Embedder, make_embedder
from vicar.settings import Settings

DEV = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "gate-replay" / "dev"


def load_dev(limit: int, console: Console) -> tuple[Settings, dict[str, list[GateEvent]], Embedder]:
    """Settings from the environment, each reviewer's gates (the first `limit`; 0: all) and
    an embedder whose cache holds every text the replay will ask for."""
    settings = Settings.from_env()
    events = load_events(sorted(DEV.glob("*.jsonl.gz")))
    if limit:
        events = {r: evs[:limit] for r, evs in events.items()}
    embedder = make_embedder(cache_file=settings.embedding_cache, params=settings.embedder)
    warm_embeddings(events, embedder, console)
    return settings, events, embedder
