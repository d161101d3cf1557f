"""What an LLM replay will cost, estimated before any paid call.

Per gate: a prior and a posterior pass on the main model (system prompt, up to 20
memories, the question, for the posterior the artifact and the prior), each classified
on the cheaper model; tokens estimated at 4 characters each, every input token priced
as uncached input (the cache only makes it cheaper), outputs at the pass's max.
"""

from __future__ import annotations

from pydantic import BaseModel

from vicar.eval.dataset import GateEvent
from vicar.llm import prompts
from vicar.llm.choice import LLMChoice
from vicar.llm.pricing import price_for

CHARS_PER_TOKEN = 4
MEMORY_CHARS = 900  # one memory in the prompt: outcome, question, reply, artifact start
PASS_OUTPUT_TOKENS = 400
CLASSIFY_TOKENS = (350, 5)  # input, output


class CostEstimate(BaseModel):
    provider: str
    model: str
    classifier_model: str
    gates: int
    input_tokens: int
    output_tokens: int
    usd: float


def estimate_replay_cost(events: dict[str, list[GateEvent]], provider: str) -> CostEstimate:
    s = LLMChoice.from_env(provider)
    main, small = price_for(s.model), price_for(s.classifier_model)
    system = len(prompts.REVIEWER_SYSTEM)
    inp = out = 0
    usd = 0.0
    gates = 0
    for evs in events.values():
        for i, e in enumerate(evs):
            gates += 1
            memories = min(i, prompts.MAX_MEMORIES_SHOWN) * MEMORY_CHARS
            base = system + memories + len(e.question) + 600  # bridge and instruction
            prior_in = base // CHARS_PER_TOKEN
            post_in = (base + min(len(e.artifact_text), prompts.ARTIFACT_PROMPT_CHARS) + 1500) // CHARS_PER_TOKEN
            gate_in, gate_out = prior_in + post_in, 2 * PASS_OUTPUT_TOKENS
            usd += (gate_in * main.input + gate_out * main.output) / 1e6
            usd += 2 * (CLASSIFY_TOKENS[0] * small.input + CLASSIFY_TOKENS[1] * small.output) / 1e6
            inp += gate_in + 2 * CLASSIFY_TOKENS[0]
            out += gate_out + 2 * CLASSIFY_TOKENS[1]
    return CostEstimate(
        provider=provider,
        model=s.model,
        classifier_model=s.classifier_model,
        gates=gates,
        input_tokens=inp,
        output_tokens=out,
        usd=round(usd, 4),
    )
