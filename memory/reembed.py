"""Move a principal's memory to another embedding model.

The new vectors go into the new model's own collection; the store's model switches
only when every chunk has them, so an interrupted run leaves the memory usable with
the old model and a second run finishes the job (upserts are idempotent).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from vicar.memory.embedder import Embedder
from vicar.memory.names import child_path
from vicar.memory.owner import OwnerLock
from vicar.memory.store import RecordStore, StoreError
from vicar.memory.vectors import VectorStore


def reembed(
    root: Path,
    principal: str,
    embedder: Embedder,
    batch: int = 64,
    progress: Callable[[int, int], None] | None = None,
    blended: bool = True,
) -> int:
    """Re-embed every chunk with `embedder` (`blended`: the blended text too, see
    MemoryParams.blended_vectors); returns how many chunks were embedded."""
    directory = child_path(root, principal)
    path = directory / "memory.db"
    if not path.exists():
        raise StoreError(f"no memory for principal {principal!r} under {root}")
    lock = OwnerLock(directory, principal)  # refused while a worker has the memory open
    try:
        store = RecordStore(path)
    except BaseException:
        lock.release()
        raise
    try:
        if store.get_meta("embedding_model") == embedder.model_name:
            return 0
        vectors = VectorStore(directory / "chroma", embedder.model_name)
        chunks = store.chunks()
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            texts = [c.vector_texts(blended) for c in part]
            flat = [t for ts in texts for t in ts.values()]
            vecs = iter(embedder.embed(flat))
            for chunk, ts in zip(part, texts):
                vectors.upsert(chunk.id, {dim: next(vecs) for dim in ts})
            if progress:
                progress(min(start + batch, len(chunks)), len(chunks))
        store.set_meta("embedding_model", embedder.model_name)
        vectors.drop_other_models(embedder.model_name)
        return len(chunks)
    finally:
        store.close()
        lock.release()
