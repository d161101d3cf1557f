"""Writes chunks and reinforcements to a memory until it is killed (test_store uses it)."""

import sys
from pathlib import Path

from vicar.memory.chunk import MemoryChunk
from vicar.memory.embedder import default_embedder
from vicar.memory.principal import PrincipalMemory
from vicar.settings import MemoryParams

root = Path(sys.argv[1])
mem = PrincipalMemory("crash", root, default_embedder(), MemoryParams())
i = 0
while True:
    i += 1
    mem.record(
        MemoryChunk(
            id=f"c{i:05d}",
            principal="crash",
            state="PLAN_ASSERT",
            task_type="docs",
            outcome="approve",
            answered_by="human",
            question=f"Approve change {i}?",
            artifact_excerpt=f"Change number {i}.",
            human_response=f"ok {i}",
            created_n=2 * i,
            traces=[2 * i],
        )
    )
    if i > 1:
        mem.reinforce([f"c{i - 1:05d}", f"c{i:05d}"], 2 * i + 1)
    mem.raise_counter(2 * i + 1)
    print(i, flush=True)
