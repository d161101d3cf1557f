"""The team prior (vicar.proxy.team): a team's counts per kind of action, the person's own
answers winning as they accumulate, the wish to be asked learned per kind, and the
sentence that says so."""

from __future__ import annotations

from vicar.models import GateRequest
from vicar.proxy import team as T


def hook_request(command: str, i: int = 0, tool: str = "bash") -> GateRequest:
    """A coding agent's tool call as the hooks ask it: the lineage is the tool and the
    command's program and subcommand."""
    return GateRequest(
        principal="bo",
        gate_id=f"g{i}",
        state="INTENT_ASSERT",
        task_type=tool,
        question=f"claude-code asks to use Bash: {command}. Allow?",
        artifact_text=f"$ {command} /home/bo/secret-{i}\n",
        lineage=f"{tool}:{command}",
    )


def team_of(answers: dict[str, list[str]]) -> T.KindCounts:
    counts = T.KindCounts()
    for command, outcomes in answers.items():
        for o in outcomes:
            counts.add(T.kinds_of(hook_request(command)), o)
    return counts


def answer(own: T.Own, request: GateRequest, outcome: str, team: T.KindCounts | None) -> None:
    est = T.estimate(request, own, team)
    own.observe(T.kinds_of(request), outcome, est.team if est else None)


def test_kinds_name_the_tool_and_what_it_does_never_the_artifact():
    kinds = T.kinds_of(hook_request("git status"))
    assert kinds == {
        "all": "gate|INTENT_ASSERT",
        "task": "gate|INTENT_ASSERT|bash",
        "lineage": "gate|INTENT_ASSERT|bash:git status",
        "head": "gate|INTENT_ASSERT|bash",
        "tail": "gate|INTENT_ASSERT|git status",
    }
    assert not any("secret" in v for v in kinds.values())
    # A lineage without parts (a topic branch) is a kind of its own within the state.
    topic = GateRequest(principal="bo", gate_id="t", state="WORK_ASSERT", task_type="docs", question="?", title="ab/x")
    assert T.kinds_of(topic) == {
        "all": "gate|WORK_ASSERT",
        "task": "gate|WORK_ASSERT|docs",
        "lineage": "gate|WORK_ASSERT|ab/x",
    }


def test_counts_add_and_merge():
    a, b = team_of({"git status": ["approve"] * 3}), team_of({"git status": ["reject"], "git push": ["reject"]})
    total = T.KindCounts.merged([a, b])
    kinds = T.kinds_of(hook_request("git status"))
    assert total.of("lineage", kinds) == {"approve": 3, "reject": 1}
    assert total.of("all", kinds) == {"approve": 3, "reject": 2}
    assert a.of("lineage", kinds) == {"approve": 3}  # merged into a new one
    # What crosses between principals is these counts: a JSON of kinds and numbers.
    assert T.KindCounts.model_validate_json(total.model_dump_json()) == total


def test_a_new_person_starts_from_the_team_and_their_own_answers_win():
    team = team_of(
        {"git status": ["approve"] * 50, "rm -rf": ["reject"] * 20, "git push": ["approve"] * 5 + ["reject"] * 5}
    )
    own = T.Own()
    status = hook_request("git status")
    first = T.estimate(status, own, team)
    assert first is not None and first.has_team
    assert first.actions()["approve"] > 0.9
    assert first.sentence == "your team approves “git status” (bash) 100% of the time (50 answers)"
    # The team's habit on another kind does not carry over: rm -rf is rejected.
    assert T.estimate(hook_request("rm -rf"), own, team).actions()["reject"] > 0.8
    # This person rejects git status: their own answers win within a few.
    shares = []
    for i in range(6):
        answer(own, hook_request("git status", i), "reject", team)
        shares.append(T.estimate(status, own, team).actions()["reject"])
    assert shares == sorted(shares) and shares[2] > 0.5 and shares[-1] > 0.8, shares
    est = T.estimate(status, own, team)
    assert est.sentence.endswith("; you rejected 6 of 6")


def test_a_bias_carries_across_kinds_within_the_persons_answers():
    """A person who rejects what their team approves is expected to on a kind they have
    not answered yet, more than a person who agrees with the team."""
    team = team_of({c: ["approve"] * 8 + ["reject"] * 2 for c in ("git a", "git b", "git c", "git d")})
    contrary, agreeing = T.Own(), T.Own()
    for i, c in enumerate(("git a", "git b", "git c")):
        answer(contrary, hook_request(c, i), "reject", team)
        answer(agreeing, hook_request(c, i), "approve", team)
    new = hook_request("git d")
    assert T.estimate(new, contrary, team).actions()["reject"] > 0.5
    assert T.estimate(new, agreeing, team).actions()["reject"] < 0.1


def test_the_wish_to_be_asked_is_learned_per_kind():
    team = team_of({"git push": ["approve"] * 10, "git status": ["approve"] * 10})
    own = T.Own()
    for i in range(4):
        answer(own, hook_request("git push", i), T.outcome_of("approve", True), team)
        answer(own, hook_request("git status", i), "approve", team)
    push, status = T.estimate(hook_request("git push"), own, team), T.estimate(hook_request("git status"), own, team)
    assert push.asked("approve") > 0.6 and status.asked("approve") < 0.2
    assert push.actions()["approve"] > 0.9  # they do approve it, once asked
    assert "asking to be asked first 4 times" in push.sentence


def test_without_a_team_the_persons_own_answers_teach_the_wish():
    own = T.Own()
    assert T.estimate(hook_request("git push"), own, None) is None  # nothing known yet
    for i in range(5):
        answer(own, hook_request("git push", i), T.outcome_of("approve", True), None)
    est = T.estimate(hook_request("git push"), own, None)
    assert (
        not est.has_team
        and est.asked("approve") > 0.8
        and est.sentence == "you approved 5 of 5, asking to be asked first 5 times"
    )


def test_the_team_distribution_round_trips_through_the_features():
    dist = {"approve": 0.7, "approve+ask": 0.2, "reject": 0.1}
    assert T.team_from_features({"mem_conf": 0.5, **T.team_to_features(dist)}) == dist
    assert T.team_from_features({"mem_conf": 0.5}) is None
