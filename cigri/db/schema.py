"""The schema: every migration, m001 to the newest, in one sequence applied by name.

Databases in the field have applied these by name (sqlite-utils' ``_cigri_migrations``
table), so a migration is never renamed, edited or reordered once released: a change of
schema is a new migration at the end. A database that has applied one this cigri does not
know was written by a newer cigri (:func:`newer_migrations`) and is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

migrations = Migrations("cigri")
KNOWN_MIGRATIONS: list[str] = []


POSTGRES_BASELINE = "m018_mail_confirmations"  # cigri/db/postgres.sql is the schema up to this one
POSTGRES_MIGRATIONS: dict[str, str] = {}  # each later migration's statements for PostgreSQL


def migration(function: Callable[[Database], None]) -> Callable[[Database], None]:
    """Register a schema migration, remembering its name: a database that has applied one this
    cigri does not know was written by a newer cigri, whose schema this code must not write."""
    KNOWN_MIGRATIONS.append(function.__name__)
    return migrations()(function)


def both(postgres: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    """Register a migration written after the PostgreSQL baseline, with its PostgreSQL statements."""

    def register(function: Callable[[Database], None]) -> Callable[[Database], None]:
        POSTGRES_MIGRATIONS[function.__name__] = postgres
        return migration(function)

    return register


def newer_migrations(db: Database) -> list[str]:
    """The migrations applied to ``db`` that this cigri does not know (a rolled-back upgrade)."""
    return [m.name for m in migrations.applied(db) if m.name not in KNOWN_MIGRATIONS]


@migration
def m001_initial(db: Database) -> None:
    db.executescript("""
    CREATE TABLE clusters (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        backend TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '{}',
        source TEXT NOT NULL DEFAULT 'config',      -- 'config' or 'admin'
        blacklisted INTEGER NOT NULL DEFAULT 0,
        blacklist_reason TEXT,
        blacklisted_at REAL
    );
    CREATE TABLE campaigns (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        user TEXT NOT NULL,
        state TEXT NOT NULL,
        jobs_type TEXT NOT NULL DEFAULT 'normal',
        jdl TEXT NOT NULL,
        nb_tasks INTEGER NOT NULL DEFAULT 0,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL
    );
    CREATE INDEX campaigns_by_state ON campaigns(state, id);
    CREATE TABLE campaign_properties (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (campaign_id, cluster_id, name)
    );
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        name TEXT NOT NULL,
        param TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 10,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        UNIQUE (campaign_id, name)
    );
    CREATE INDEX tasks_bag ON tasks(campaign_id, state, priority DESC, id);
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        task_id INTEGER REFERENCES tasks(id),          -- NULL for prologue/epilogue
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        kind TEXT NOT NULL DEFAULT 'task',              -- task, prologue, epilogue
        state TEXT NOT NULL,
        remote_id TEXT,
        batch TEXT,                                     -- the submit call it belongs to, fixed before the call
        kill_requested INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        submitted_at REAL,
        started_at REAL,
        finished_at REAL,
        exit_code INTEGER,
        node TEXT
    );
    CREATE INDEX jobs_active ON jobs(state, cluster_id);
    CREATE INDEX jobs_by_task ON jobs(task_id);
    CREATE INDEX jobs_by_campaign ON jobs(campaign_id, state, cluster_id);
    CREATE INDEX jobs_scripts ON jobs(campaign_id, cluster_id) WHERE kind != 'task';
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        class TEXT NOT NULL,                            -- job, campaign, cluster
        code TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'open',
        campaign_id INTEGER REFERENCES campaigns(id),
        cluster_id INTEGER REFERENCES clusters(id),
        job_id INTEGER REFERENCES jobs(id),
        task_id INTEGER REFERENCES tasks(id),
        message TEXT NOT NULL,
        stderr_tail TEXT,
        created_at REAL NOT NULL,
        closed_at REAL
    );
    CREATE INDEX events_by_campaign ON events(campaign_id, state);
    CREATE TABLE taps (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        rate INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'open',
        PRIMARY KEY (campaign_id, cluster_id)
    );
    -- Per (campaign, cluster) figures of ended task jobs, kept up to date by the updator in
    -- the transaction that ends each job, so that gridstat and the predictor never scan jobs.
    CREATE TABLE campaign_stats (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        terminated INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,             -- every other ending seen on the cluster
        duration_sum REAL NOT NULL DEFAULT 0,          -- of terminated jobs, seconds
        duration_sq_sum REAL NOT NULL DEFAULT 0,
        first_start REAL,
        last_end REAL,
        PRIMARY KEY (campaign_id, cluster_id)
    );
    CREATE TABLE counts (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        cluster_id INTEGER REFERENCES clusters(id),
        campaign_id INTEGER REFERENCES campaigns(id),
        waiting INTEGER NOT NULL,
        running INTEGER NOT NULL,
        terminated INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        total_slots INTEGER,
        free_slots INTEGER
    );
    CREATE INDEX counts_by_campaign ON counts(campaign_id, at);
    """)


@migration
def m002_kill_reason(db: Database) -> None:
    """Why a kill was asked replaces a yes/no flag: a user's cancel ends the task, while a
    fair-share preemption, flood control or a losing replica must leave the task alive."""
    db.executescript("""
    ALTER TABLE jobs ADD COLUMN kill_reason TEXT;                -- NULL: no kill asked (KillReason)
    UPDATE jobs SET kill_reason = 'user' WHERE kill_requested = 1;
    ALTER TABLE jobs DROP COLUMN kill_requested;
    """)


@migration
def m003_shares(db: Database) -> None:
    """Fair share: a campaign's class (resolved at submission, so a later change of the
    default class leaves it alone) and its priority among its user's campaigns."""
    db.executescript("""
    ALTER TABLE campaigns ADD COLUMN class TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE campaigns ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    """)


@migration
def m004_predictor(db: Database) -> None:
    """The predictor's throughput window reads the latest terminated jobs of a campaign through
    an index (never a scan), and flood control remembers, per campaign and cluster, a decaying
    penalty that lowers the cluster's affinity after it kept jobs waiting too long."""
    db.executescript("""
    CREATE INDEX jobs_terminated ON jobs(campaign_id, finished_at, cluster_id, started_at)
        WHERE state = 'terminated' AND kind = 'task';
    CREATE TABLE affinity_penalties (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        penalty REAL NOT NULL,                           -- flood-killed jobs, halved every half_life
        updated_at REAL NOT NULL,
        half_life REAL NOT NULL,                         -- seconds ([runner] penalty_half_life)
        PRIMARY KEY (campaign_id, cluster_id)
    );
    """)


@migration
def m006_events_notify(db: Database) -> None:
    """Aggregated events (a count, examples and the jobs they cover), per-reason resubmission
    counters, blacklist bookkeeping with automatic recovery, and notification subscriptions
    with a persisted outbox so that a crash neither loses nor repeats a message."""
    db.executescript("""
    ALTER TABLE events ADD COLUMN severity TEXT NOT NULL DEFAULT 'high';
    ALTER TABLE events ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE events ADD COLUMN examples TEXT NOT NULL DEFAULT '[]';   -- JSON [{task_id, job_id}]
    ALTER TABLE events ADD COLUMN signature TEXT NOT NULL DEFAULT '';    -- e.g. the first stderr line
    ALTER TABLE events ADD COLUMN updated_at REAL;
    ALTER TABLE events ADD COLUMN notified_count INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX events_aggregate ON events(code, campaign_id, cluster_id, signature, state);
    CREATE INDEX events_unnotified ON events(id) WHERE count > notified_count;
    CREATE TABLE event_jobs (                         -- every job an open event covers
        event_id INTEGER NOT NULL REFERENCES events(id),
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        task_id INTEGER REFERENCES tasks(id),
        PRIMARY KEY (event_id, job_id)
    );
    ALTER TABLE tasks ADD COLUMN resubmits INTEGER NOT NULL DEFAULT 0;      -- in a row, best-effort kills aside
    ALTER TABLE tasks ADD COLUMN walltime_kills INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE clusters ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;    -- consecutive failing cycles
    ALTER TABLE clusters ADD COLUMN blacklist_event_id INTEGER REFERENCES events(id);  -- NULL: by an admin
    ALTER TABLE clusters ADD COLUMN checked_at REAL;
    CREATE TABLE campaign_cluster_health (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        exit_errors INTEGER NOT NULL DEFAULT 0,       -- since the last reset
        terminated_base INTEGER NOT NULL DEFAULT 0,   -- campaign_stats.terminated at the last reset
        strikes INTEGER NOT NULL DEFAULT 0,           -- times blacklisted: doubles the autofix delay
        blacklisted_at REAL,
        checked_at REAL,
        event_id INTEGER REFERENCES events(id),
        PRIMARY KEY (campaign_id, cluster_id)
    );
    CREATE TABLE subscriptions (
        id INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        kind TEXT NOT NULL,                           -- mail, webhook
        target TEXT NOT NULL,
        severity TEXT NOT NULL,                       -- low, medium, high: the least it receives
        created_at REAL NOT NULL,
        UNIQUE (user, kind, target)
    );
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        subscription_id INTEGER NOT NULL REFERENCES subscriptions(id) ON DELETE CASCADE,
        severity TEXT NOT NULL,
        subject TEXT NOT NULL,
        document TEXT NOT NULL,                       -- JSON: what a webhook receives, what a mail says
        state TEXT NOT NULL DEFAULT 'pending',        -- pending, sent, dead
        tries INTEGER NOT NULL DEFAULT 0,
        next_try_at REAL NOT NULL,
        last_error TEXT,
        created_at REAL NOT NULL,
        sent_at REAL
    );
    CREATE INDEX outbox_due ON outbox(next_try_at) WHERE state = 'pending';
    """)


@migration
def m007_grouping(db: Database) -> None:
    """Temporal grouping: the jobs run one after another inside one remote job share a group
    (the id of its first job), fixed before the submit call so that a re-sent batch is the same."""
    db.executescript("""
    ALTER TABLE jobs ADD COLUMN run_group INTEGER;  -- NULL: the job runs alone
    """)


@migration
def m008_task_blocks(db: Database) -> None:
    """Fresh tasks leave the indexes (see :mod:`cigri.bag`): the bag index becomes partial, and
    the UNIQUE (campaign_id, name) index goes, names being checked once per submission instead.
    Existing tasks are described as blocks: each campaign's runs of consecutive ids, fresh
    from past the last task that was ever taken, ended or requeued (tasks are taken in id order
    and never return to the bag at the fresh priority, so the fresh ones are exactly those).
    The table is rebuilt to drop its UNIQUE constraint (SQLite's documented procedure)."""
    db.executescript("""
    CREATE TABLE task_blocks (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        first_id INTEGER NOT NULL,                    -- the block is tasks first_id..last_id,
        last_id INTEGER NOT NULL,                     -- inserted by one submission or extension
        next_fresh INTEGER NOT NULL,                  -- next_fresh..last_id: never taken (pending)
        PRIMARY KEY (campaign_id, first_id)
    );
    INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh)
        WITH runs AS (
            SELECT campaign_id, id, id - row_number() OVER (PARTITION BY campaign_id ORDER BY id) AS run,
                   max(CASE WHEN state <> 'pending' OR priority <> 10 THEN id END) OVER (PARTITION BY campaign_id) AS last_touched
            FROM tasks)
        SELECT campaign_id, min(id), max(id), max(min(id), min(max(id), coalesce(max(last_touched), 0)) + 1)
        FROM runs GROUP BY campaign_id, run;
    CREATE TABLE tasks_new (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        name TEXT NOT NULL,
        param TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 10,          -- 10: fresh (cigri.bag)
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        resubmits INTEGER NOT NULL DEFAULT 0,         -- in a row, best-effort kills aside
        walltime_kills INTEGER NOT NULL DEFAULT 0,
        preemptions INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO tasks_new SELECT id, campaign_id, name, param, priority, state, attempts, resubmits,
                                 walltime_kills, preemptions FROM tasks;
    DROP TABLE tasks;
    ALTER TABLE tasks_new RENAME TO tasks;
    CREATE INDEX tasks_bag ON tasks(campaign_id, state, priority DESC, id) WHERE state <> 'pending' OR priority <> 10;
    """)


@migration
def m009_history_indexes(db: Database) -> None:
    """What a cycle reads among what accumulates forever (every job an event covered, every
    pair blacklisted once) it reads through an index, so a year-old grid cycles as fast as a
    new one: the jobs an event covers, by job; the pairs blacklisted now, alone."""
    db.executescript("""
    CREATE INDEX event_jobs_by_job ON event_jobs(job_id);
    CREATE INDEX health_blacklisted ON campaign_cluster_health(campaign_id, cluster_id)
        WHERE blacklisted_at IS NOT NULL;
    """)


@migration
def m010_counts_indexes(db: Database) -> None:
    """The counts time series is trimmed every cycle to ``cigri.counts_retention_days`` and read
    per cluster over a recent window (``gridclusters --history``): both through an index, so
    neither walks the rows a grid appends every cycle. Campaign rows stay out of the second."""
    db.executescript("""
    CREATE INDEX counts_by_at ON counts(at);
    CREATE INDEX counts_by_cluster ON counts(cluster_id, at) WHERE cluster_id IS NOT NULL;
    """)


@migration
def m011_counts_per_cluster_only(db: Database) -> None:
    """The counts series keeps only what ``gridclusters --history`` reads: per-cluster samples.
    Per-campaign rows were written every cycle and never read (CiGri's ``queue_counts`` bug),
    and a campaign's jobs already tell its past; ``terminated`` and ``failed`` were never set."""
    db.executescript("""
    CREATE TABLE counts_per_cluster (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        waiting INTEGER NOT NULL,
        running INTEGER NOT NULL,
        total_slots INTEGER,
        free_slots INTEGER
    );
    INSERT INTO counts_per_cluster(id, at, cluster_id, waiting, running, total_slots, free_slots)
        SELECT id, at, cluster_id, waiting, running, total_slots, free_slots FROM counts
        WHERE cluster_id IS NOT NULL;
    DROP TABLE counts;
    ALTER TABLE counts_per_cluster RENAME TO counts;
    CREATE INDEX counts_by_at ON counts(at);
    CREATE INDEX counts_by_cluster ON counts(cluster_id, at);
    """)


@migration
def m012_submit_limits(db: Database) -> None:
    """The number of jobs a cluster's submit limit let cigri hold there, learned from its last
    refusal, and when (see :mod:`cigri.cluster_caps`)."""
    db.executescript("""
    ALTER TABLE clusters ADD COLUMN submit_limit INTEGER;  -- NULL: never refused for its limit
    ALTER TABLE clusters ADD COLUMN submit_limit_at REAL;
    """)


@migration
def m013_tokens_and_parameter_bytes(db: Database) -> None:
    """API tokens (only a hash of each is stored), and the parameter bytes each campaign stores,
    which the per-user limit ``limits.param_bytes`` sums (counted here for the unfinished ones)."""
    db.executescript("""
    CREATE TABLE tokens (
        id INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,                    -- SHA-256 of the secret, hex
        note TEXT NOT NULL DEFAULT '',
        created_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        last_used_at REAL,
        revoked_at REAL
    );
    CREATE INDEX tokens_by_user ON tokens(user);
    ALTER TABLE campaigns ADD COLUMN param_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE campaigns SET param_bytes = (SELECT coalesce(sum(length(CAST(param AS BLOB))), 0) FROM tasks
                                        WHERE tasks.campaign_id = campaigns.id)
    WHERE state IN ('in_treatment', 'paused');
    """)


@migration
def m014_v3_imports(db: Database) -> None:
    """``cigri import-v3``: which row of a CiGri v3 database became which of cigri's, so that a
    second import of the same database changes nothing (see :mod:`cigri.import_v3`)."""
    db.executescript("""
    CREATE TABLE v3_imports (
        kind TEXT NOT NULL,                           -- campaign, event, subscription
        v3_id INTEGER NOT NULL,                       -- the row's id in CiGri's database
        cigri_id INTEGER NOT NULL,
        PRIMARY KEY (kind, v3_id)
    );
    """)


@migration
def m015_throughput_minutes(db: Database) -> None:
    """Tasks terminated per (campaign, cluster) and minute, kept by the updator as jobs end, so
    that a campaign's throughput over the last hour sums 60 rows instead of counting every job
    that ended in it (a campaign draining 800 tasks a second ended 2.9 million). Filled here for
    the last two hours; the cycles keep two hours of them."""
    db.executescript("""
    CREATE TABLE throughput_minutes (
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
        cluster_id INTEGER NOT NULL REFERENCES clusters(id),
        minute INTEGER NOT NULL,                      -- finished_at // 60
        terminated INTEGER NOT NULL,
        PRIMARY KEY (campaign_id, cluster_id, minute)
    ) WITHOUT ROWID;
    CREATE INDEX throughput_minutes_by_minute ON throughput_minutes(minute);
    INSERT INTO throughput_minutes(campaign_id, cluster_id, minute, terminated)
    SELECT campaign_id, cluster_id, CAST(finished_at / 60 AS INTEGER), count(*) FROM jobs
    WHERE state = 'terminated' AND kind = 'task' AND finished_at > unixepoch('now') - 7200
    GROUP BY campaign_id, cluster_id, CAST(finished_at / 60 AS INTEGER);
    """)


@migration
def m016_task_counts(db: Database) -> None:
    """A campaign's tasks per state, kept by triggers as tasks change, so that ``gridstat`` and
    the API count a million-task campaign from a few rows instead of walking the bag's index
    (a campaign half drained has half a million entries there). Like the index, it leaves out
    the fresh tasks, which :mod:`cigri.bag` counts from ``task_blocks``; a state may be left
    at 0."""
    def fresh(row: str) -> str:
        return f"({row}.state = 'pending' AND {row}.priority = 10)"

    db.executescript(f"""
    CREATE TABLE task_counts (
        campaign_id INTEGER NOT NULL,
        state TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (campaign_id, state)
    ) WITHOUT ROWID;
    INSERT INTO task_counts(campaign_id, state, n)
    SELECT campaign_id, state, count(*) FROM tasks WHERE NOT {fresh('tasks')} GROUP BY campaign_id, state;
    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks WHEN NOT {fresh('new')}
    BEGIN
        INSERT INTO task_counts(campaign_id, state, n) VALUES (new.campaign_id, new.state, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks WHEN NOT {fresh('old')}
    BEGIN
        UPDATE task_counts SET n = n - 1 WHERE campaign_id = old.campaign_id AND state = old.state;
    END;
    CREATE TRIGGER task_counts_leave AFTER UPDATE OF state, priority, campaign_id ON tasks
    WHEN NOT {fresh('old')}
         AND ({fresh('new')} OR new.state <> old.state OR new.campaign_id <> old.campaign_id)
    BEGIN
        UPDATE task_counts SET n = n - 1 WHERE campaign_id = old.campaign_id AND state = old.state;
    END;
    CREATE TRIGGER task_counts_enter AFTER UPDATE OF state, priority, campaign_id ON tasks
    WHEN NOT {fresh('new')}
         AND ({fresh('old')} OR new.state <> old.state OR new.campaign_id <> old.campaign_id)
    BEGIN
        INSERT INTO task_counts(campaign_id, state, n) VALUES (new.campaign_id, new.state, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
    END;
    """)


NEVER_REUSED = ("campaigns", "tasks", "jobs", "events", "tokens", "subscriptions")


@migration
def m017_ids_never_reused(db: Database) -> None:
    """Ids that users and clusters see are never given twice: SQLite gives a plain ``INTEGER
    PRIMARY KEY`` the largest id plus one, so purging the newest campaign handed its ids to the
    next one, and a cluster's idempotent submit adopted the old jobs of a new job's id as its
    own (they showed ended without running). Each table is rebuilt with ``AUTOINCREMENT``
    (SQLite's documented procedure: same columns, rows, indexes and triggers), which keeps the
    largest id ever given in ``sqlite_sequence``."""
    for table in NEVER_REUSED:
        create, = db.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]).fetchone()
        attached = [sql for (sql,) in db.conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
            [table])]
        rebuilt = create.replace("id INTEGER PRIMARY KEY", "id INTEGER PRIMARY KEY AUTOINCREMENT", 1)
        assert rebuilt != create, table
        db.conn.execute(rebuilt.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}_rebuilt", 1)
                        .replace(f'CREATE TABLE "{table}"', f"CREATE TABLE {table}_rebuilt", 1))
        db.conn.execute(f"INSERT INTO {table}_rebuilt SELECT * FROM {table}")
        db.conn.execute(f"DROP TABLE {table}")
        db.conn.execute(f"ALTER TABLE {table}_rebuilt RENAME TO {table}")
        for sql in attached:
            db.conn.execute(sql)


@migration
def m018_mail_confirmations(db: Database) -> None:
    """A mail subscription to an address other than its user's own (``notify.user_address``) is
    sent nothing until the user types the one-time code mailed there (``confirmed_at``). The
    codes mailed are kept hashed, with their expiry and the wrong tries spent on them, one row
    per mail sent, so that neither guessing nor asking again and again gets past the bounds.
    Webhooks need no code; other mail subscriptions made before wait for one (subscribe again)."""
    db.executescript("""
    ALTER TABLE subscriptions ADD COLUMN confirmed_at REAL;
    UPDATE subscriptions SET confirmed_at = created_at WHERE kind = 'webhook';
    CREATE TABLE mail_codes (
        id INTEGER PRIMARY KEY,
        user TEXT NOT NULL,
        address TEXT NOT NULL,
        hash TEXT NOT NULL,                           -- SHA-256 of the code, never the code
        sent_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        tries INTEGER NOT NULL DEFAULT 0              -- wrong codes typed
    );
    CREATE INDEX mail_codes_of ON mail_codes(user, address);
    """)


@both(postgres="""
    CREATE TABLE leader (
        id BIGINT PRIMARY KEY CHECK (id = 1),
        holder TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        since DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
""")
def m019_leader(db: Database) -> None:
    """Several servers over one store, one running the cycles: the lease it holds (``holder``,
    the store's clock for ``since`` and ``expires_at``) and its fencing ``epoch``, one more at
    every change of holder (:mod:`cigri.leadership`)."""
    db.executescript("""
    CREATE TABLE leader (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        holder TEXT NOT NULL,                         -- host:pid of the process running the cycles
        epoch INTEGER NOT NULL,                       -- the fencing token: its writes carry it
        since REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    """)


@both(postgres="ALTER TABLE campaign_properties ADD COLUMN position BIGINT NOT NULL DEFAULT 0;")
def m020_property_order(db: Database) -> None:
    """A campaign's per-cluster settings come back in the JDL's order (its clusters' order is a
    preference) by a column of their own: PostgreSQL rows have no insertion order to rely on."""
    db.executescript("""
    ALTER TABLE campaign_properties ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
    UPDATE campaign_properties SET position = rowid;
    """)
