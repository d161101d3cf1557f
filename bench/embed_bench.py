"""Cold embedding speed: today's fp32 MiniLM against the int8 one, in one run.

The texts are the replay's (vicar.eval.replay.event_texts of the first --gates gates of
each reviewer in the dev data), embedded cold (no cache) in calls of 64 as the replay's
warm-up does. The embedders take turns, round after round (A/B/A/B: the machine is
shared, so each round's ratio is taken between neighbours in time). A variant between
the two separates the layout (padded, length-sorted batches, fp32) from the int8 weights.

Retrieval: per reviewer and per dimension, the chunk vectors of those gates are the
index and the replay's query texts the queries; recall@10 is the share of fp32's ten
nearest that the int8 vectors also rank in their ten nearest.

    python -m bench.embed_bench [--gates 120] [--rounds 2] [--out bench/EMBED_RESULTS.md]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.machine_info import command_line, machine_line
from vicar.eval.dataset import GateEvent, load_events, principal_for
from vicar.eval.replay import event_texts
from vicar.memory.chunk import blended_text
from vicar.memory.minilm_int8 import Int8MiniLMEmbedder
from vicar.memory.onnx_minilm import OnnxMiniLMEmbedder
from vicar.models import AnsweredBy, OutcomeRecord
from vicar.proxy.outcomes import outcome_chunk
from vicar.proxy.retrieval import build_query

DEV = Path("/work/shared/datasets/gate-replay/dev")
CALL = 64  # texts per call, as vicar.eval.run.WARM_BATCH
K = 10


def retrieval_sets(events: list[GateEvent]) -> dict[str, tuple[list[str], list[str]]]:
    """Per dimension: (index texts: the gates' chunk texts, query texts: the replay's
    posterior queries), each unique."""
    out: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for e in events:
        request = e.request(principal_for(e.reviewer))
        query = build_query(request, 0, "posterior", request.artifact_text).texts
        query = {**query, "blended": blended_text(query)}
        record = OutcomeRecord(
            request=request, n=1, workflow_id=e.gate_id, action=e.action, response_text=e.response,
            answered_by=AnsweredBy.human,
        )  # fmt: skip
        for dim, text in outcome_chunk(record).vector_texts().items():
            out.setdefault(dim, ({}, {}))[0].setdefault(text)
        for dim, text in query.items():
            if dim in out and text.strip():
                out[dim][1].setdefault(text)
    return {d: (list(i), list(q)) for d, (i, q) in out.items() if len(i) > K and q}


def recall_at_k(ref: dict[str, np.ndarray], new: dict[str, np.ndarray], index: list[str], queries: list[str]) -> list:
    def top(vecs: dict[str, np.ndarray]) -> np.ndarray:
        sims = np.stack([vecs[q] for q in queries]) @ np.stack([vecs[t] for t in index]).T
        return np.argsort(-sims, axis=1, kind="stable")[:, :K]

    a, b = top(ref), top(new)
    return [len(set(x) & set(y)) / K for x, y in zip(a, b)]


def timed(embedder, texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    vecs = np.concatenate([embedder.embed(texts[i : i + CALL]) for i in range(0, len(texts), CALL)])
    return len(texts) / (time.perf_counter() - start), vecs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=120, help="the first N gates of each reviewer")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/EMBED_RESULTS.md"))
    args = ap.parse_args()
    started = datetime.now(UTC)

    files = sorted(DEV.glob("*.jsonl.gz"))
    events = {r: evs[: args.gates] for r, evs in load_events(files).items()}
    texts = event_texts([e for evs in events.values() for e in evs])
    sets = {r: retrieval_sets(evs) for r, evs in events.items()}
    extra = [t for per in sets.values() for i, q in per.values() for t in i + q]
    texts = list(dict.fromkeys(texts + extra))

    variants = {
        "fp32, packed (today's default)": OnnxMiniLMEmbedder(),
        "fp32, padded length-sorted": Int8MiniLMEmbedder(quantize=False),
        "int8, padded length-sorted (new default)": Int8MiniLMEmbedder(),
    }
    names = list(variants)
    speeds: dict[str, list[float]] = {n: [] for n in names}
    vecs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            rate, vecs[n] = timed(variants[n], texts)
            speeds[n].append(rate)
            print(f"round {r + 1}: {n}: {rate:.1f} texts/s", flush=True)

    base, new = names[0], names[-1]
    cos = np.sum(vecs[base] * vecs[new], axis=1)
    ref_by_text = dict(zip(texts, vecs[base]))
    new_by_text = dict(zip(texts, vecs[new]))
    recalls: dict[str, list[float]] = {}
    for per in sets.values():
        for dim, (index, queries) in per.items():
            recalls.setdefault(dim, []).extend(recall_at_k(ref_by_text, new_by_text, index, queries))
    every = [x for xs in recalls.values() for x in xs]

    lens = [len(s) for s in variants[base].tokenize(texts)]
    lines = [
        "# Cold embedding: fp32 against int8 MiniLM",
        "",
        f"Command: `{command_line()}` (started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line()} (shared with other work while it ran: the ratios are the figures, "
        "each round's embedders ran back to back)",
        "",
        f"Texts: {len(texts):,} unique texts the replay embeds for the first {args.gates} gates of each of "
        f"{len(events)} reviewers of {', '.join(f.name for f in files)} (and their retrieval queries); "
        f"word pieces per text: median {int(np.median(lens))}, mean {np.mean(lens):.0f}, "
        f"{np.mean(np.array(lens) >= 256):.0%} at the 256 cap. Calls of {CALL} texts, no cache.",
        "",
        "| embedder | "
        + " | ".join(f"round {r + 1} texts/s" for r in range(args.rounds))
        + " | median | against today |",
        "|---|" + "---|" * (args.rounds + 2),
    ]
    for n in names:
        ratios = [s / b for s, b in zip(speeds[n], speeds[base])]
        lines.append(
            f"| {n} | "
            + " | ".join(f"{s:.1f}" for s in speeds[n])
            + f" | {statistics.median(speeds[n]):.1f} | {statistics.median(ratios):.2f}x "
            f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}) |"
        )
    lines += [
        "",
        f"Vectors, int8 against fp32 over all {len(texts):,} texts: cosine difference (1 - cos) "
        f"max {1 - cos.min():.4f}, mean {1 - cos.mean():.5f}; largest element difference "
        f"{np.abs(vecs[base] - vecs[new]).max():.4f}.",
        "",
        f"Recall@{K} of the int8 index against the fp32 one (queries: the replay's posterior query texts, "
        "index: the same gates' chunk texts, per reviewer and dimension):",
        "",
        "| dimension | queries | recall@10 |",
        "|---|---|---|",
        *(f"| {d} | {len(xs)} | {np.mean(xs):.4f} |" for d, xs in recalls.items()),
        f"| all | {len(every)} | {np.mean(every):.4f} |",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
