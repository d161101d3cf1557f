"""The artifact vector of every dev gate, as the consult's posterior query embeds it
(`artifact_text[:ARTIFACT_EMBED_CHARS]`, all-MiniLM-L6-v2), read from the replay's
embedding cache (dump_replay.py warms it): the "similar work" features' input.

    VICAR_DATA_DIR=/tmp/score-data sh bench/score/pin_product.sh 2be538f /tmp/score-product bench.score.vectors

Writes $VICAR_DATA_DIR/score-vectors.npz (one array per reviewer, in event order; too
large to commit, and rebuilt from the cache in seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bench.score.common import load_events, settings


def path() -> Path:
    return settings().data_dir / "score-vectors.npz"


def main() -> None:
    from vicar.memory.chunk import ARTIFACT_EMBED_CHARS
    from vicar.memory.embedder import make_embedder

    env = settings()
    embedder = make_embedder(cache_file=env.embedding_cache, params=env.embedder)
    out = {}
    for r, evs in load_events().items():
        texts = [e.get("artifact_text", "")[:ARTIFACT_EMBED_CHARS] for e in evs]
        vecs = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        idx = [i for i, t in enumerate(texts) if t.strip()]
        for k in range(0, len(idx), 512):
            chunk = idx[k : k + 512]
            vecs[chunk] = embedder.embed([texts[i] for i in chunk])
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        out[r] = vecs / np.where(norms > 0, norms, 1.0)
        print(f"{r}: {len(texts)} vectors", file=sys.stderr)
    np.savez_compressed(path(), **out)
    print(path())


if __name__ == "__main__":
    main()
