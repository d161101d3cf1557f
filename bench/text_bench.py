"""Text processing on a gate's and an answer's path: is every step linear?

Each function is fed adversarial texts of 100 KB and 1 MB (no sentence ends, long runs
of one character, whitespace, '?', newlines, markup the parsers look for) and timed; a
linear function takes ~10x as long on 1 MB as on 100 KB, and a ratio above 20 is
flagged (the worst input is checked again at 4 MB, see the report). In the same run, the
regexes these functions used before run as the contrast,
at 2 KB and 20 KB (the same 10x step: at 100 KB the old `questions_in` regex alone
takes minutes).

    python -m bench.text_bench [--out bench/TEXT_RESULTS.md]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.machine_info import command_line, machine_line
from vicar.eval import metrics
from vicar.llm import parse, prompts
from vicar.memory.chunk import MemoryChunk, blended_text
from vicar.memory.embedder import default_embedder
from vicar.memory.lexical import tokenize
from vicar.memory.principal import PrincipalMemory
from vicar.memory.text import clip
from vicar.models import (
    Action,
    AnsweredBy,
    ChunkSummary,
    DialogTurn,
    GateRequest,
    OutcomeRecord,
    PassResult,
    RetrievalContext,
)
from vicar.proxy import bookkeeping, outcomes
from vicar.proxy.offline import OfflinePredictor
from vicar.settings import MemoryParams

SIZES = (100_000, 1_000_000)
BEYOND = 4_000_000  # the worst input again, both sizes beyond the caches
BASELINE_SIZES = (2_000, 20_000)
FLAG = 20.0
BEYOND_FLAG = 8.0


def fill(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


INPUTS: dict[str, Callable[[int], str]] = {
    "words, no sentence end": lambda n: fill("lorem ipsum dolor sit amet ", n),
    "one char run": lambda n: "a" * n,
    "whitespace run": lambda n: " " * n + "x",
    "all '?'": lambda n: "?" * n,
    "many short questions": lambda n: fill("why? ", n),
    "newlines": lambda n: fill("x\n", n),
    "normal prose": lambda n: fill("Why is the rollback missing? Add tests first. Fine!\n", n),
    "confidence line, padded": lambda n: "Approved.\nCONFIDENCE: 0.9" + fill(" *", n) + "x",
    "fenced JSON, padded": lambda n: '```json\n{"description": "x", "percepts": [' + fill('"p", ', n) + '"q"]}',
    "unclosed fence, padded": lambda n: "```json\n{" + " " * n + "x",
}

REQ = GateRequest(
    principal="alice",
    gate_id="g1",
    state="PLAN_ASSERT",
    task_type="docs",
    question="Approve or revise the proposed plan?",
    actor_message="Plan ready.",
)
GUESS = PassResult(prose="Approved.", confidence=0.7, action=Action.approve, used_chunk_ids=["c1"])


def summary(text: str) -> ChunkSummary:
    return ChunkSummary(
        chunk_id="c1",
        state="PLAN_ASSERT",
        task_type="docs",
        outcome="approve",
        answered_by=AnsweredBy.human,
        question="Approve?",
        artifact_excerpt="index rollback",
        human_response=text,
        activation=0.0,
        similarity=0.9,
        score=1.0,
    )


def record(text: str) -> OutcomeRecord:
    return OutcomeRecord(
        request=REQ,
        n=1,
        workflow_id="vicar-gate/g1",
        action=Action.correct,
        response_text=text,
        answered_by=AnsweredBy.human,
        prior=GUESS,
        posterior=GUESS,
        dialog=[
            DialogTurn(speaker="reviewer", text=text, answered_by=AnsweredBy.human),
            DialogTurn(speaker="agent", text=text),
        ],
    )


class SideFiles:
    """A throwaway memory holding one outcome, whose side files (proxy-interactions.jsonl,
    proxy-patterns.md) `write` rebuilds as a worker does after an answer:
    outcomes.write_artifacts, the line and the section of the outcome, and with `torn` a
    patterns file whose last entry was torn after that text (a crash mid-append) cut back
    to its last complete entry first."""

    def __init__(self, rec: OutcomeRecord, torn: str | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="vicar-text-bench-"))
        self.memory = PrincipalMemory("alice", self.home, default_embedder(), MemoryParams(), throwaway=True)
        outcomes.record_outcome(self.memory, rec)  # writes the side files once
        self.patterns = self.memory.dir / outcomes.PATTERNS_FILE
        self.complete = self.patterns.read_text(encoding="utf-8")
        self.torn = torn

    def write(self) -> None:
        if self.torn is None:
            for name in (outcomes.INTERACTIONS_FILE, outcomes.PATTERNS_FILE):
                (self.memory.dir / name).unlink()
        else:
            self.patterns.write_text(self.complete + "\n## torn\n" + self.torn, encoding="utf-8")
        outcomes.write_artifacts(self.memory)

    def close(self) -> None:
        self.memory.close()
        shutil.rmtree(self.home, ignore_errors=True)


def predictions(text: str) -> list[metrics.Prediction]:
    """Not text: one prediction per 100 characters, every confidence distinct."""
    n = len(text) // 100
    return [
        metrics.Prediction(
            seq=i,
            actual="approve",
            predicted="approve" if i % 50 else "correct",
            confidence=1 - i / n,
            autonomous=False,
        )
        for i in range(n)
    ]


# name -> (prepare(text) -> argument, run(argument)); only `run` is timed.
FUNCTIONS: dict[str, tuple] = {
    "bookkeeping.questions_in": (str, bookkeeping.questions_in),
    "bookkeeping.concerns_in": (str, bookkeeping.concerns_in),
    "bookkeeping.apply_outcome": (record, lambda r: bookkeeping.apply_outcome(None, r)),
    "offline.surprise (its percepts)": (
        str,
        lambda t: OfflinePredictor().surprise(
            REQ, t, GUESS, GUESS, RetrievalContext(principal="alice", n=1, phase="posterior", chunks=[summary(t)])
        ),
    ),
    "parse.parse_reply": (str, parse.parse_reply),
    "parse.parse_action": (str, lambda t: parse.parse_action(t, list(Action))),
    "parse.parse_surprise": (str, parse.parse_surprise),
    "prompts.fence": (str, lambda t: prompts.fence("ARTIFACT", t)),
    "prompts.artifact_block": (str, prompts.artifact_block),
    "prompts.memories_block": (str, lambda t: prompts.memories_block([summary(t)])),
    "prompts.dialog_block": (str, lambda t: prompts.dialog_block([DialogTurn(speaker="reviewer", text=t)])),
    "prompts.pass_body (posterior)": (
        str,
        lambda t: prompts.pass_body(
            REQ, [summary(t)], [DialogTurn(speaker="reviewer", text=t)], artifact=t, prior=GUESS
        ),
    ),
    "prompts.surprise_body": (str, lambda t: prompts.surprise_body(REQ, t, GUESS, GUESS)),
    "text.clip": (str, lambda t: clip(t, 600)),
    "lexical.tokenize": (str, lambda t: tokenize([t])),
    "chunk.vector_texts": (
        str,
        lambda t: MemoryChunk(
            id="c1",
            principal="alice",
            state="PLAN_ASSERT",
            task_type="docs",
            outcome="approve",
            answered_by="human",
            question="Approve?",
            artifact_excerpt=t,
            actor_message=t,
            human_response=t,
            created_n=1,
        ).vector_texts(),
    ),
    "chunk.blended_text": (str, lambda t: blended_text({"situation": t, "response": t})),
    "outcomes.write_artifacts (side files)": (lambda t: SideFiles(record(t)), SideFiles.write),
    "outcomes.write_artifacts (torn tail)": (lambda t: SideFiles(record("ok"), torn=t), SideFiles.write),
    "metrics.concerns_in": (str, metrics.concerns_in),
    "metrics.autonomy (n/100 predictions)": (predictions, metrics.autonomy),
}

# What the functions used before, timed at BASELINE_SIZES. OLD_DECOR: the markup allowed
# before "confidence" (vicar/llm/parse.py's, as it stood).
OLD_DECOR = r"[\s*_`>#\-]*"
_OLD_QUESTION = re.compile(r"[^.?!\n]*\?")
_OLD_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_OLD_CONFIDENCE = re.compile(
    rf"^{OLD_DECOR}confidence[\s*_`]*[:=][\s*_`]*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    rf"[\s*_`]*\.?[\s*_`]*$",
    re.IGNORECASE,
)
BASELINES: dict[str, tuple] = {
    "old questions_in regex `[^.?!\\n]*\\?`": (
        "words, no sentence end",
        lambda t: [q.strip() for q in _OLD_QUESTION.findall(t) if len(q.strip()) > 3],
    ),
    "old surprise fence regex `\\s*```$`": ("unclosed fence, padded", lambda t: _OLD_FENCE.sub("", t.strip())),
    "old confidence-line regex": ("confidence line, padded", lambda t: _OLD_CONFIDENCE.match(t.splitlines()[-1])),
}


def timed(run, args: list, reps: int, budget: float) -> list[float]:
    """Best time of `run` on each argument, the arguments interleaved so that load from
    other processes hits every size alike; repeated up to `reps` times or `budget` s."""
    best = [float("inf")] * len(args)
    spent = 0.0
    gc.collect()
    gc.disable()
    try:
        for rep in range(reps):
            for i, arg in enumerate(args):
                start = time.perf_counter()
                run(arg)
                took = time.perf_counter() - start
                best[i], spent = min(best[i], took), spent + took
            if spent > budget and rep >= 1:
                break
    finally:
        gc.enable()
    return best


def measure(prepare, run, kind: str, sizes: tuple[int, ...], reps: int, budget: float) -> list[float]:
    args = [prepare(INPUTS[kind](n)) for n in sizes]
    try:
        return timed(run, args, reps, budget)
    finally:
        for arg in args:
            if isinstance(arg, SideFiles):
                arg.close()


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.3f}" if seconds < 0.01 else f"{seconds * 1000:.1f}"


def verdict(ratio: float, beyond: float | None) -> str:
    if ratio <= FLAG:
        return "linear"
    if beyond is not None and beyond <= BEYOND_FLAG:
        return "linear (cache)"
    return "**FLAG**"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the report here (markdown)")
    args = ap.parse_args()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    rows, matrix = [], []
    for name, (prepare, run) in FUNCTIONS.items():
        # Screen every input quickly, then measure the worst one carefully, with 4 MB.
        screen = {kind: measure(prepare, run, kind, SIZES, 3, 0.5) for kind in INPUTS}
        matrix.append(f"| {name} | " + " | ".join(f"{s[1] / s[0]:.1f}" for s in screen.values()) + " |")
        kind = max(screen, key=lambda k: screen[k][1] / screen[k][0])
        small, large, larger = measure(prepare, run, kind, (*SIZES, BEYOND), 15, 3.0)
        ratio, beyond = large / small, larger / large
        rows.append(
            f"| {name} | {kind} | {fmt(small)} | {fmt(large)} | {ratio:.1f} | {fmt(larger)} | "
            f"{beyond:.1f} | {verdict(ratio, beyond)} |"
        )
        print(rows[-1], flush=True)
    base_rows = []
    for name, (kind, run) in BASELINES.items():
        small, large = measure(str, run, kind, BASELINE_SIZES, 3, 3.0)
        ratio = large / small
        base_rows.append(f"| {name} | {kind} | {fmt(small)} | {fmt(large)} | {ratio:.1f} | {verdict(ratio, None)} |")
        print(base_rows[-1], flush=True)
    code = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip()
        or "unknown"
    )
    header = (
        "| function | worst input | 100 KB ms | 1 MB ms | 1 MB / 100 KB | 4 MB ms | 4 MB / 1 MB | verdict |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    report = "\n".join(
        [
            "# Text-processing benchmark",
            "",
            f"- command: `{command_line()}`",
            f"- date: {started}",
            f"- code: {code}",
            f"- machine: {machine_line()}",
            f"- run time: {time.perf_counter() - t0:.0f} s; 1-minute load average {load_before:.2f} before, "
            f"{os.getloadavg()[0]:.2f} after (a shared machine: timings are best-of-n, sizes interleaved)",
            "",
            f"Every function on every adversarial input at 100 KB and 1 MB (best of 3, the sizes interleaved); "
            f"then its worst input (highest ratio) again at 100 KB, 1 MB and 4 MB (best of up to 15). Linear: "
            f"1 MB / 100 KB ~10, 4 MB / 1 MB ~4; quadratic: ~100 and ~16. Ratios above {FLAG:.0f} are flagged, "
            f"unless 4 MB / 1 MB stays at most {BEYOND_FLAG:.0f} (twice linear): then the step from 100 KB (which "
            f"fits the CPU's caches) to 1 MB (which does not) costs a constant factor, not the algorithm: "
            f'"linear (cache)".',
            "",
            "## Per function: the worst input",
            "",
            header,
            *rows,
            "",
            "## The old code, same run (at 2 KB and 20 KB: the same 10x step; at 100 KB the old "
            "`questions_in` regex takes minutes)",
            "",
            "| code | input | 2 KB ms | 20 KB ms | 20 KB / 2 KB | verdict |\n|---|---|---|---|---|---|",
            *base_rows,
            "",
            "## Every input (1 MB / 100 KB, best of 3)",
            "",
            "| function | " + " | ".join(INPUTS) + " |",
            "|---|" + "---|" * len(INPUTS),
            *matrix,
            "",
        ]
    )
    if args.out:
        args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
