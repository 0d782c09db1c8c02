"""The data layer: the one store (a SQLite file, or a PostgreSQL database), its schema, and the
SQL of every table group.

- :mod:`cigri.db.store`: opening and migrating the store, :func:`write` transactions, ids, time;
- :mod:`cigri.db.postgres`: the PostgreSQL store, running the same statements over psycopg;
- :mod:`cigri.db.schema`: the migrations, m001 to the newest, in one sequence;
- :mod:`cigri.db.tokens`, :mod:`cigri.db.events`, :mod:`cigri.db.notifications`: the SQL of
  API tokens, of events (and the blacklists they hold), of subscriptions, mail codes and the
  outbox. The use cases call these functions inside the transactions they open; for these
  groups no SQL is written anywhere else;
- :mod:`cigri.db.jobs`: the SQL whose subject is jobs, called the same way;
- :mod:`cigri.db.campaigns`, :mod:`cigri.db.tasks`, :mod:`cigri.db.counts`: the SQL of
  campaigns and what is kept per campaign, of tasks and the bag's blocks and counts, and of the
  clusters' load samples, called the same way;
- :mod:`cigri.db.clusters`: the SQL of clusters, their definitions, blacklists, failure counts
  and submit limits, called the same way.

Callers import the package (``from cigri import db as database``) and use the names below.
"""

from cigri.db.schema import (
    KNOWN_MIGRATIONS,
    NEVER_REUSED,
    migration,
    migrations,
    newer_migrations,
)
from cigri.db.store import BUSY_TIMEOUT_MS, connect, next_id, now, open_store, schema_version, write

__all__ = ["BUSY_TIMEOUT_MS", "KNOWN_MIGRATIONS", "NEVER_REUSED", "connect", "migration", "migrations",
           "newer_migrations", "next_id", "now", "open_store", "schema_version", "write"]
