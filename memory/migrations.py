"""The record store's schema: versioned migrations and the chunk row's columns.

Existing memories open by running the migrations past their `user_version`; a step is
never edited once shipped, only appended.
"""

from __future__ import annotations

# Versioned migrations: index i brings the schema from version i to i + 1.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE chunks (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        outcome TEXT NOT NULL,
        answered_by TEXT NOT NULL CHECK (answered_by IN ('human', 'proxy')),
        responder TEXT,
        gate_id TEXT NOT NULL,
        question TEXT NOT NULL,
        artifact_excerpt TEXT NOT NULL,
        actor_message TEXT NOT NULL,
        upstream_agent TEXT,
        prior_confidence REAL,
        prior_prose TEXT NOT NULL,
        posterior_confidence REAL,
        posterior_prose TEXT NOT NULL,
        surprise_description TEXT NOT NULL,
        salient_percepts TEXT NOT NULL,
        human_response TEXT NOT NULL,
        created_n INTEGER NOT NULL
    );
    CREATE INDEX chunks_struct ON chunks (state, task_type, answered_by);
    CREATE TABLE traces (
        chunk_id TEXT NOT NULL REFERENCES chunks(id),
        n INTEGER NOT NULL,
        PRIMARY KEY (chunk_id, n)
    ) WITHOUT ROWID;
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # v2: co-access counts for spreading activation (chunks used together).
    """
    CREATE TABLE coaccess (
        a TEXT NOT NULL REFERENCES chunks(id),
        b TEXT NOT NULL REFERENCES chunks(id),
        n INTEGER NOT NULL,
        PRIMARY KEY (a, b)
    ) WITHOUT ROWID;
    """,
    # v3: record_outcome's bookkeeping: one row per gate outcome (who answered, when,
    # the whole record) and the per-(state, task_type) entry derived from them.
    """
    CREATE TABLE outcomes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        workflow_id TEXT NOT NULL UNIQUE,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        answered_by TEXT NOT NULL,
        action TEXT NOT NULL,
        at TEXT,
        record TEXT NOT NULL
    );
    CREATE INDEX outcomes_context ON outcomes (state, task_type, answered_by);
    CREATE TABLE contexts (key TEXT PRIMARY KEY, entry TEXT NOT NULL);
    """,
    # v4: consolidation. A superseded chunk is kept, marked and left out of retrieval;
    # every decision is logged once (its id) with its reason and, for a superseded
    # chunk, a tombstone copy of the record.
    """
    ALTER TABLE chunks ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
    ALTER TABLE chunks ADD COLUMN superseded_by TEXT;
    CREATE TABLE consolidation_log (
        decision_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        op TEXT NOT NULL,
        chunk_id TEXT NOT NULL,
        target_id TEXT,
        reason TEXT NOT NULL,
        tombstone TEXT,
        seq INTEGER NOT NULL
    );
    CREATE TABLE tensions (a TEXT NOT NULL, b TEXT NOT NULL, session_id TEXT NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;
    """,
    # Lineage: the artifact's thread, its revision and a hash of the artifact, so the
    # latest verdicts on the same thread are one index lookup. Older chunks get "" and
    # never match.
    """
    ALTER TABLE chunks ADD COLUMN lineage TEXT NOT NULL DEFAULT '';
    ALTER TABLE chunks ADD COLUMN revision TEXT NOT NULL DEFAULT '';
    ALTER TABLE chunks ADD COLUMN artifact_hash TEXT NOT NULL DEFAULT '';
    CREATE INDEX chunks_lineage ON chunks (kind, lineage, created_n);
    """,
    # The autonomy rule's evidence: per human-answered gate (seq = its outcome's seq),
    # the proxy's score and whether its would-be answer was right.
    """
    CREATE TABLE autonomy_pairs (
        seq INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        n INTEGER NOT NULL,
        score REAL NOT NULL,
        correct INTEGER NOT NULL CHECK (correct IN (0, 1))
    );
    CREATE INDEX autonomy_pairs_kind ON autonomy_pairs (kind, seq);
    """,
    # Probation of upstream agents: the human's answers on an agent's artifacts, counted
    # by an index range (superseded chunks still count: the human did answer).
    """
    CREATE INDEX chunks_agent ON chunks (upstream_agent, answered_by);
    """,
    # Regret (docs/design/agent-trust-memory.md): an answer the proxy gave alone that the human later
    # reversed on the same lineage is a wrong pair, arriving when it is found. Pairs get an
    # arrival order of their own (seq); `outcome_seq` is the outcome that brought the
    # evidence, `regret_of` the proxy answer's chunk (once: UNIQUE) with its agent.
    """
    CREATE TABLE autonomy_pairs_v2 (
        seq INTEGER PRIMARY KEY,
        outcome_seq INTEGER NOT NULL,
        regret_of TEXT UNIQUE,
        agent TEXT,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        n INTEGER NOT NULL,
        score REAL NOT NULL,
        correct INTEGER NOT NULL CHECK (correct IN (0, 1))
    );
    INSERT INTO autonomy_pairs_v2 (seq, outcome_seq, kind, state, task_type, n, score, correct)
        SELECT seq, seq, kind, state, task_type, n, score, correct FROM autonomy_pairs;
    DROP TABLE autonomy_pairs;
    ALTER TABLE autonomy_pairs_v2 RENAME TO autonomy_pairs;
    CREATE INDEX autonomy_pairs_kind ON autonomy_pairs (kind, seq);
    CREATE INDEX chunks_lineage_proxy ON chunks (kind, lineage, answered_by, created_n);
    CREATE INDEX autonomy_pairs_agent ON autonomy_pairs (agent, correct);
    """,
    # Censors (docs/design/memory-types.md): few per context, read whole at each gate of it.
    """
    CREATE TABLE censors (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        entry TEXT NOT NULL
    );
    CREATE INDEX censors_context ON censors (kind, state, task_type);
    """,
    # Semantic facts (preferences, procedures): their lifecycle beside their chunk.
    """
    CREATE TABLE facts (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        entry TEXT NOT NULL
    );
    CREATE INDEX facts_context ON facts (kind, state, task_type);
    """,
    # The audit trail (docs/audit.md): gates that ended with no answer (their deadline
    # passed), kept as their OutcomeRecord JSON but apart from `outcomes`, which teach the
    # proxy; and reviews of the proxy's autonomous answers, one per gate.
    """
    CREATE TABLE unanswered (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        workflow_id TEXT NOT NULL UNIQUE,
        at TEXT,
        record TEXT NOT NULL
    );
    CREATE TABLE reviews (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        workflow_id TEXT NOT NULL UNIQUE,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        score REAL,
        verdict TEXT NOT NULL CHECK (verdict IN ('right', 'wrong')),
        reviewer TEXT NOT NULL,
        identity TEXT,
        note TEXT NOT NULL,
        at TEXT NOT NULL
    );
    """,
    # The autonomy rule's evidence weighs an audited pair by the inverse of the audit's
    # probability (docs/autonomy-bound.md): kept with the pair; NULL (older rows, and a
    # gate the human answered anyway) is a pair labelled with probability 1.
    """
    ALTER TABLE autonomy_pairs ADD COLUMN audit_p REAL;
    """,
    # The gates answered alone and not audited: each could have been drawn for an audit
    # with probability audit_p, so the rule's inverse-probability-weighted bets count it
    # as a draw whose label was not taken (docs/autonomy-bound.md). Filled from the
    # outcome log for the gates answered before it.
    """
    CREATE TABLE autonomy_alone (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        outcome_seq INTEGER NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        task_type TEXT NOT NULL,
        score REAL NOT NULL,
        audit_p REAL NOT NULL CHECK (audit_p > 0 AND audit_p <= 1)
    );
    CREATE INDEX autonomy_alone_kind ON autonomy_alone (kind, seq);
    INSERT INTO autonomy_alone (outcome_seq, kind, state, task_type, score, audit_p)
        SELECT seq, COALESCE(json_extract(record, '$.request.kind'), 'gate'), state, task_type,
               json_extract(record, '$.posterior.confidence'), json_extract(record, '$.calibration.audit_share')
        FROM outcomes
        WHERE answered_by = 'proxy'
          AND json_extract(record, '$.calibration.guard') = 'passthrough'
          AND json_extract(record, '$.posterior.confidence') IS NOT NULL
          AND json_extract(record, '$.calibration.audit_share') > 0
          AND json_extract(record, '$.calibration.audit_share') <= 1
        ORDER BY seq;
    """,
    # What a human answer said beyond its action, per chunk (vicar/proxy/support.py):
    # 'ruled', a gate their rule or pause sent them (their decision: neither graded as the
    # proxy's nor counted for or against its support per kind of action); 'ask_first', an
    # answer given with "ask me first" (that kind is theirs to decide). Gates recorded
    # before this are not marked.
    """
    CREATE TABLE answer_marks (chunk_id TEXT NOT NULL, mark TEXT NOT NULL, PRIMARY KEY (chunk_id, mark)) WITHOUT ROWID;
    """,
    # The newest human answers of one context (the facts' extraction reads them every
    # session): a walk down this index instead of sorting every answer of the context.
    """
    CREATE INDEX IF NOT EXISTS chunks_context_recent ON chunks (kind, state, task_type, answered_by, created_n);
    """,
]

COLUMNS = (
    "id",
    "kind",
    "state",
    "task_type",
    "outcome",
    "answered_by",
    "responder",
    "gate_id",
    "question",
    "artifact_excerpt",
    "actor_message",
    "upstream_agent",
    "prior_confidence",
    "prior_prose",
    "posterior_confidence",
    "posterior_prose",
    "surprise_description",
    "salient_percepts",
    "human_response",
    "created_n",
    "status",
    "superseded_by",
    "lineage",
    "revision",
    "artifact_hash",
)
