"""A hot loop for profiling the worker: train 8 principals, then run PER `never` gates
each, concurrently (the gate bench's concurrent phase alone), and print gates/s and this
process's CPU per gate. Its pid is printed before the loop, for a profiler:

    python -m bench.hot_loop 40 &
    py-spy record -p PID -d 25 -r 200 -f raw -o hot.raw

Embedded server, in-process worker, a throwaway data directory, BENCH_ENV's autonomy rule.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import tempfile
import time

from rich.console import Console
from rich.progress import Progress

from bench import gate_bench as gb
from bench.gate_common import BENCH_ENV
from vicar.memory.embedder import default_embedder
from vicar.settings import Settings
from vicar.worker import build_worker, temporal_client

PRINCIPALS = [f"hot-p{i}" for i in range(8)]


async def main(per: int) -> None:
    gb.ARTIFACT_NUMBERS = itertools.count(random.randrange(10**9))
    os.environ.update(BENCH_ENV)
    os.environ["VICAR_DATA_DIR"] = tempfile.mkdtemp(prefix="vicar-hot-")
    settings = Settings.from_env()
    async with temporal_client(settings, embedded=True) as (client, _):
        await asyncio.to_thread(default_embedder)
        worker, registry = build_worker(client, settings, task_queue="hot")
        async with worker:
            with Progress(console=Console(file=open(os.devnull, "w"))) as progress:
                await gb.train(client, "hot", PRINCIPALS, "h", progress)
                print(f"trained; pid {os.getpid()}", flush=True)
                cpu = time.process_time()
                row = await gb.concurrent(client, "hot", PRINCIPALS, "h", per, progress)
                print(
                    f"{row.rate:.2f} gates/s, {(time.process_time() - cpu) * 1000 / row.total:.1f} ms CPU "
                    f"per gate (this process)",
                    flush=True,
                )
        registry.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("per", type=int, nargs="?", default=40, help="gates per principal (default 40)")
    asyncio.run(main(ap.parse_args().per))
