"""Cold embedding speed: today's fp32 MiniLM against faster variants, in one run.

The texts are the replay's (vicar.eval.replay.event_texts of the first --gates gates of
each reviewer in the dev data), embedded cold (no cache) in calls of 64 as the replay's
warm-up does. The machine is shared: the embedders take turns call by call (A/B/A/B,
the order rotating), so a burst of load falls on all of them alike. The variants
change one thing at a time: the pack size, the layout (padded, length-sorted batches),
the threads, the int8 kernel.

Retrieval: per reviewer and per dimension, the chunk vectors of those gates are the
index and the replay's query texts the queries; recall@10 is the share of fp32's ten
nearest that a variant's vectors also rank in their ten nearest.

    python -m bench.embed_bench [--gates 30] [--rounds 2] [--profile 256] [--out bench/EMBED_RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnxruntime as ort

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


def embed_all(embedder: OnnxMiniLMEmbedder | Int8MiniLMEmbedder, texts: list[str]) -> None:
    for i in range(0, len(texts), CALL):
        embedder.embed(texts[i : i + CALL])


def variants(profile: str | None = None) -> dict[str, Callable[[], OnnxMiniLMEmbedder | Int8MiniLMEmbedder]]:
    """Today's default first; then one change at a time; the int8 candidates last."""
    return {
        "fp32, packed 512 (today's default)": lambda: OnnxMiniLMEmbedder(pack_tokens=512, profile=profile),
        "fp32, packed 256": lambda: OnnxMiniLMEmbedder(pack_tokens=256),
        "fp32, packed 128": lambda: OnnxMiniLMEmbedder(pack_tokens=128),
        "fp32, padded length-sorted": lambda: Int8MiniLMEmbedder(quantize=False),
        "fp32, padded, one call at a time on 2 intra-op threads": lambda: Int8MiniLMEmbedder(
            quantize=False, threads=2, workers=1
        ),
        "int8 blockwise (MatMulNBits 8-bit), padded": lambda: Int8MiniLMEmbedder(kernel="blockwise"),
        "int8 dynamic (DynamicQuantizeMatMul), padded": lambda: Int8MiniLMEmbedder(profile=profile),
    }


def op_profile(texts: list[str]) -> list[str]:
    """onnxruntime's per-node kernel time by op type, today's default and the int8 one,
    over the same texts (summed over the threads that ran them)."""
    lines = ["| op type | fp32 packed 512: ms | share | int8 dynamic padded: ms | share |", "|---|---|---|---|---|"]
    factories = variants(profile=str(Path(tempfile.mkdtemp()) / "ort"))
    totals = []
    for name in (next(iter(factories)), list(factories)[-1]):
        embedder = factories[name]()
        embed_all(embedder, texts)
        events = json.loads(Path(embedder._session.end_profiling()).read_text())
        per_op: Counter[str] = Counter()
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                per_op[e["args"]["op_name"]] += e["dur"]
        totals.append(per_op)
    ops = sorted(set(totals[0]) | set(totals[1]), key=lambda o: -(totals[0][o] + totals[1][o]))
    sums = [sum(t.values()) or 1 for t in totals]
    for op in ops:
        cells = [f"{t[op] / 1000:.0f} | {t[op] / s:.0%}" if op in t else "- | -" for t, s in zip(totals, sums)]
        lines.append(f"| {op} | {' | '.join(cells)} |")
    lines.append(f"| all | {sums[0] / 1000:.0f} | 100% | {sums[1] / 1000:.0f} | 100% |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=30, help="the first N gates of each reviewer")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", type=int, default=256, help="texts for the per-op profile (0: none)")
    ap.add_argument("--out", type=Path, default=Path("bench/EMBED_RESULTS.md"))
    args = ap.parse_args()
    started = datetime.now(UTC)

    files = sorted(DEV.glob("*.jsonl.gz"))
    events = {r: evs[: args.gates] for r, evs in load_events(files).items()}
    texts = event_texts([e for evs in events.values() for e in evs])
    sets = {r: retrieval_sets(evs) for r, evs in events.items()}
    extra = [t for per in sets.values() for i, q in per.values() for t in i + q]
    texts = list(dict.fromkeys(texts + extra))

    embedders = {name: make() for name, make in variants().items()}
    for embedder in embedders.values():
        embedder.embed(texts[:CALL])  # a session's first run allocates: not part of the rounds
    names = list(embedders)
    speeds: dict[str, list[float]] = {n: [] for n in names}
    vecs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        # Call by call, every embedder in turn (the order rotating): a burst of load on the
        # shared machine falls on all of them alike, not on whichever ran that minute.
        seconds = dict.fromkeys(names, 0.0)
        parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for c, start in enumerate(range(0, len(texts), CALL)):
            shift = (c + r) % len(names)
            for n in names[shift:] + names[:shift]:
                began = time.perf_counter()
                parts[n].append(embedders[n].embed(texts[start : start + CALL]))
                seconds[n] += time.perf_counter() - began
        for n in names:
            speeds[n].append(len(texts) / seconds[n])
            vecs[n] = np.concatenate(parts[n])
            print(f"round {r + 1}: {n}: {speeds[n][-1]:.1f} texts/s", flush=True)

    base = names[0]
    ref_by_text = dict(zip(texts, vecs[base]))
    quality: dict[str, tuple[float, float, float]] = {}
    recalls_by_dim: dict[str, dict[str, list[float]]] = {}  # dimension -> variant -> recalls
    for n in names:
        new_by_text = dict(zip(texts, vecs[n]))
        every: list[float] = []
        for per in sets.values():
            for dim, (index, queries) in per.items():
                got = recall_at_k(ref_by_text, new_by_text, index, queries)
                every += got
                recalls_by_dim.setdefault(dim, {}).setdefault(n, []).extend(got)
        cos = np.sum(vecs[base] * vecs[n], axis=1)
        quality[n] = (float(1 - cos.min()), float(1 - cos.mean()), float(np.mean(every)))

    lens = [len(s) for s in embedders[base].tokenize(texts)]
    lines = [
        "# Cold embedding: today's fp32 MiniLM against faster variants",
        "",
        f"Command: `{command_line()}` (started {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Machine: {machine_line(f'onnxruntime {ort.__version__}')}. Shared with other work while it ran: "
        "the absolute texts/s are low and noisy, the ratios are the figures (within a round the "
        f"embedders take turns call by call, {CALL} texts a call, the order rotating).",
        "",
        f"Texts: {len(texts):,} unique texts the replay embeds for the first {args.gates} gates of each of "
        f"{len(events)} reviewers of {', '.join(f.name for f in files)} (and their retrieval queries); "
        f"word pieces per text: median {int(np.median(lens))}, mean {np.mean(lens):.0f}, "
        f"{np.mean(np.array(lens) >= 256):.0%} at the 256 cap. Calls of {CALL} texts, no cache.",
        "",
        "| embedder | "
        + " | ".join(f"round {r + 1} texts/s" for r in range(args.rounds))
        + " | against today (median of rounds) | 1 - cos vs today: max / mean | recall@10 vs today |",
        "|---|" + "---|" * (args.rounds + 3),
    ]
    for n in names:
        ratios = [s / b for s, b in zip(speeds[n], speeds[base])]
        worst, mean, recall = quality[n]
        lines.append(
            f"| {n} | "
            + " | ".join(f"{s:.1f}" for s in speeds[n])
            + f" | {statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)}) "
            f"| {worst:.1e} / {mean:.1e} | {recall:.4f} |"
        )
    lines += [
        "",
        f"Recall@{K}: per reviewer and dimension, the index is those gates' chunk texts and the queries the "
        "replay's posterior query texts; the share of today's ten nearest that the variant also ranks "
        "in its ten nearest. Per dimension:",
        "",
        "| dimension | queries | " + " | ".join(names[1:]) + " |",
        "|---|---|" + "---|" * (len(names) - 1),
        *(
            f"| {d} | {len(by[base])} | " + " | ".join(f"{np.mean(by[n]):.4f}" for n in names[1:]) + " |"
            for d, by in recalls_by_dim.items()
        ),
        "",
    ]
    if args.profile:
        lines += [f"Per-op profile (onnxruntime profiling, the first {args.profile} texts, kernel ms):", ""]
        lines += op_profile(texts[: args.profile]) + [""]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
