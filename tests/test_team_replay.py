"""Team replays: `vicar eval replay` reads the permission study's fields, replays the
people of one team in file order with a team prior built only from the earlier members'
answers per kind of action, and never lets a member's words, artifacts or memory ids
reach another's proxy."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from vicar.eval.dataset import load_events, principal_for
from vicar.eval.replay import Variant, replay_reviewer
from vicar.eval.run import replay_teams
from vicar.memory.chunk import chunk_id_for
from vicar.proxy.learned import LearnedPredictor
from vicar.proxy.team import KindCounts, kinds_of, outcome_of
from vicar.settings import Settings

SECRET_WORDS = "zebracorn quibbles"  # only in the first member's answers
SECRET_ARTIFACT = "xylophonic ledger"  # only in the first member's artifacts
APPS = [("Banking", "Receipt images"), ("Calendar", "Meeting details"), ("Fitness", "Sleep duration")]


def event(person: str, i: int, app: str, data: str, action: str, ask: bool, split: str, secret: bool) -> dict:
    words = (
        {True: "Yes, but ask me first.", False: "Yes, always share."}
        if action == "approve"
        else {
            True: "No, but ask me first.",
            False: "No, never share.",
        }
    )
    return {
        "reviewer": person,
        "seq": i,
        "gate_id": f"perm:{person}:{i}",
        "state": "PLAN_ASSERT",
        "task_type": "finance",
        "artifact_title": data,
        "artifact_text": f"Request: compile my expenses{' ' + SECRET_ARTIFACT if secret else ''}.\n"
        f"The agent wants to share your {data} with {app}.",
        "question": f"Share {data} with {app}?",
        "action": action,
        "response": (f"{words[ask]} {SECRET_WORDS}" if secret else words[ask]),
        "source": "ai-agent-permissions",
        "team": "study",
        "split": split,
        "ask_first": ask,
        "app": app,
        "data_type": data,
        "query_id": i,
    }


@pytest.fixture
def team_file(tmp_path) -> Path:
    rows = []
    # The first two members share receipts with Banking, never sleep data, and ask first on
    # meetings; the third is the newcomer.
    for person, gates in (("P001", 15), ("P002", 15), ("P003", 6)):
        for i in range(gates):
            app, data = APPS[i % 3]
            action = "reject" if app == "Fitness" else "approve"
            ask = app == "Calendar" and person != "P003"
            split = "train" if i < gates - 3 else "test"
            rows.append(event(person, i, app, data, action, ask, split, person == "P001"))
    path = tmp_path / "team.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def test_the_studys_fields_are_read(team_file):
    events = load_events([team_file])
    first = events["P001"][2]
    assert (first.team, first.split, first.ask_first, first.app, first.data_type, first.query_id) == (
        "study",
        "train",
        False,
        "Fitness",
        "Sleep duration",
        2,
    )
    assert events["P001"][1].ask_first
    # The app and the data type are the request's kind of action.
    assert first.request("p001").lineage == "Fitness:Sleep duration"


def test_a_team_is_replayed_in_order_and_the_prior_comes_only_from_before(team_file, embedder, tmp_path):
    events = load_events([team_file])
    settings = Settings(data_dir=tmp_path)
    variant = Variant(name="default", predictor="learned")
    together = replay_teams(events, variant, embedder, settings)
    alone = replay_teams({r: events[r] for r in ("P001", "P002")}, variant, embedder, settings)
    # No peeking: the earlier members' replays are the same whoever comes after.
    for r in ("P001", "P002"):
        assert [p.model_dump() for p in together[r]] == [p.model_dump() for p in alone[r]]
    # The newcomer's first gates are predicted from the team: Banking receipts are shared,
    # sleep data is not; the first member had nothing to start from.
    second = together["P003"]
    assert together["P001"][0].predicted is None
    assert (second[0].predicted, second[2].predicted) == ("approve", "reject")
    # The wish to be asked on Calendar meetings came from the team too.
    assert second[1].wants_asked > 0.5 > second[0].wants_asked
    assert all(p.split is not None for p in second) and second[-1].split == "test"


def test_a_members_words_artifacts_and_memory_ids_never_reach_another(team_file, embedder, tmp_path):
    events = load_events([team_file])
    settings = Settings(data_dir=tmp_path)
    variant = Variant(name="default", predictor="learned")
    first = replay_reviewer(events["P001"], variant, embedder, settings)
    counts = KindCounts()
    for e, p in zip(events["P001"], first):
        if not p.autonomous:
            counts.add(kinds_of(e.request(principal_for(e.reviewer))), outcome_of(e.action.value, e.ask_first))
    shared = counts.model_dump_json()
    assert "zebracorn" not in shared and "xylophonic" not in shared and "perm:" not in shared
    ids = {chunk_id_for(principal_for("P001"), f"replay/{e.gate_id}") for e in events["P001"]}

    seen: list[str] = []

    class Spy(LearnedPredictor):
        def posterior(self, request, ctx, artifact, prior, dialog=()):
            result = super().posterior(request, ctx, artifact, prior, dialog)
            seen.append(ctx.model_dump_json())
            seen.append(result.model_dump_json())
            return result

    stored: list[str] = []

    def inspect(memory):
        stored.extend(raw for _, raw in memory.store.outcomes())

    second = replay_reviewer(
        events["P003"],
        variant,
        embedder,
        settings,
        predictor=Spy(settings.predictor, team=counts),
        inspect=inspect,
        team=counts,
    )
    assert any("your team" in s for s in seen)  # the team's counts did reach the proxy
    everything = "\n".join([*seen, *stored, *(p.model_dump_json() for p in second)])
    assert "zebracorn" not in everything and "xylophonic" not in everything
    assert not any(i in everything for i in ids)
