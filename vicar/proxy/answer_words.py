"""The proxy's answer built from the pre-review (the person's own words, so a
correction names what to fix), and an LLM's citations of it judged.

Above the threshold the proxy's text is the answer the agent receives, so a correction
must name what to fix. The memory predictors (offline, learned) choose the action; the
words come from the pre-review (vicar.proxy.prereview), the person's own sentences ranked
for this artifact:
- approve: the person's own approval words, as the predictor found them;
- correct, reject: the top items of the pre-review's ranking (ANSWER_K of them) that came
  with a correction or a reject on this kind of work, each as the person said it, one
  paragraph each; the predictor's text only when there are none;
- dialog (the probe an intent gate asks for): the best-ranked question among the items;
  the predictor's text when none is a question. At INTENT_ASSERT, before any reviewer
  line, the pass probes whatever action the predictor chose (the design's probe rule:
  do not rubber-stamp an intent) when the person asked a question on this lineage or
  similar work; without one of theirs it keeps its action (no invented question).
Hold, withdraw and an agent's question keep the predictor's text. The words never turn
against the action they are shown with (a reviewer reads both): no approval's sentence ("Fine, ship
it.") under a reject, no refusal or question under an approve, no approve vouching for
what the artifact says it lacks, and no predictor's text said on another kind of work
(vicar.proxy.concerns.fitting_words); what is left may be nothing. Pure, deterministic and
cheap: the pre-review reads only the retrieved context. The replay runs the same
predictors, so it scores exactly these words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vicar.llm.parse import citations_in, strip_citations
from vicar.models import Action, DialogTurn, GateRequest, PassResult, RequestKind, RetrievalContext
from vicar.models.prereview import PreReviewItem
from vicar.models.vocabulary import CfAState
from vicar.proxy.concerns import categories_in, fits, fitting_words, strip_tags
from vicar.proxy.prereview import rank, render, select

TURNED_BACK = (Action.correct, Action.reject)
# The answer reads further down the same ranking than the pre-review shown (4 items,
# 1,200 characters): on the dev replay (hwmon, bench/WORDS_RESULTS.md) 4 items raised 2.4
# concerns per correction where the person raised about 3.5, F1 0.164; 8 raised 3.6,
# F1 0.203, at the same precision. Chosen after seeing those figures.
ANSWER_K = 8
ANSWER_BUDGET = 3000
# A reply's sentences: after . ? ! (not before a citation that closes the sentence) and at line breaks.
_PIECE = re.compile(r"(?<=[.?!])[ \t]+(?!\[\d)|\n+")


def question_of(items: Sequence[PreReviewItem]) -> PreReviewItem | None:
    """The best-ranked item that asks something (items come best first)."""
    return next((it for it in items if it.text.rstrip().endswith("?")), None)


def turned_back(items: Sequence[PreReviewItem], action: Action) -> list[PreReviewItem]:
    """The items that may word a correction or a reject: said with one, on this kind of
    work, and not an approval's words."""
    return [it for it in items if it.action in TURNED_BACK and not it.other_work and fits(action.value, it.text)]


# An action's plain words, where the person's own words for it are not at hand.
DEFAULT_TEXT = {
    Action.approve: "Approved.",
    Action.correct: "Please revise this before it goes further.",
    Action.reject: "Rejected.",
    Action.hold: "Not yet: this needs more review.",
    Action.withdraw: "Withdraw this.",
}


def answer_text(action: Action | None, items: Sequence[PreReviewItem], fallback: str, artifact: str = "") -> str:
    """The words for `action`: the items where they say what the person would say,
    else `fallback` (the predictor's own text), without what turns against `action`."""
    if action in TURNED_BACK:
        kept = turned_back(items, action)
        if kept:
            return render(kept)
    if action is Action.dialog:
        asked = question_of(items)
        if asked is not None:
            return asked.text
    return fitting_words(action.value, fallback, artifact) if action is not None else fallback


def said_elsewhere(text: str, ctx: RetrievalContext, request: GateRequest) -> bool:
    """The predictor's words are a past answer given on another kind of work (another
    task type): shown under this gate they would be about something else."""
    said = text.strip()
    sources = [c for c in (*ctx.chunks, *ctx.similar_work) if c.human_response.strip() == said]
    return bool(said) and bool(sources) and all(c.task_type != request.task_type for c in sources)


def probes(request: GateRequest, dialog: Sequence[DialogTurn]) -> bool:
    """An intent gate nobody on the reviewer's side has spoken at yet."""
    return request.state is CfAState.INTENT_ASSERT and not any(t.speaker == "reviewer" for t in dialog)


def with_prereview(
    result: PassResult,
    request: GateRequest,
    ctx: RetrievalContext,
    artifact: str,
    dialog: Sequence[DialogTurn] = (),
) -> PassResult:
    """The posterior with the gate's pre-review attached and its words built from the
    same ranking. A pass without a prediction keeps its empty text: the items alone are
    no answer."""
    scored = rank(ctx, request, artifact)
    update: dict[str, object] = {"prereview": select(scored)}
    if result.prose and request.kind is RequestKind.gate:
        answer = select(scored, ANSWER_K, ANSWER_BUDGET)
        asked = question_of(answer) if probes(request, dialog) else None
        if asked is not None:
            update.update(action=Action.dialog, prose=asked.text)
        else:
            # Words said on other work are not this gate's: the action's plain words instead.
            plain = DEFAULT_TEXT.get(result.action, "") if result.action is not None else ""
            fallback = plain if said_elsewhere(result.prose, ctx, request) else result.prose
            update["prose"] = answer_text(result.action, answer, fallback, artifact or request.artifact_text)
    return result.model_copy(update=update)


def judge_citations(prose: str, items: Sequence[PreReviewItem]) -> tuple[str, list[PreReviewItem], list[str]]:
    """An LLM's reply against the pre-review it was shown: (the reply without its
    citation markers, the items with `cited` set, the unsupported concerns). A sentence
    raises the design concern categories it names (vicar.proxy.concerns); it is
    unsupported when one of them is in none of the items it cites (a number the prompt
    did not show cites nothing). Sentences that name no category are not judged: the
    vocabulary cannot tell what they raise."""
    cited: set[int] = set()
    unsupported: list[str] = []
    for piece in (p.strip() for p in _PIECE.split(prose)):
        if not piece:
            continue
        numbers = [k for k in citations_in(piece) if 1 <= k <= len(items)]
        cited.update(numbers)
        words = strip_citations(piece).strip()
        raised = categories_in(strip_tags(words))
        backed = {c for k in numbers for c in items[k - 1].concerns}
        if raised - backed:
            unsupported.append(words)
    marked = [it.model_copy(update={"cited": i in cited}) for i, it in enumerate(items, 1)]
    return strip_citations(prose).strip(), marked, unsupported
