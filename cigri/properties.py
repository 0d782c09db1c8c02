"""Per-cluster campaign settings, as resolved from the JDL at submission."""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database


def campaign_properties(db: Database, campaign_ids: list[int]) -> dict[int, dict[int, dict[str, Any]]]:
    """``{campaign id: {cluster id: {key: value}}}`` for the given campaigns, in JDL order."""
    result: dict[int, dict[int, dict[str, Any]]] = {i: {} for i in campaign_ids}
    if not campaign_ids:
        return result
    marks = ",".join("?" * len(campaign_ids))
    for campaign_id, cluster_id, name, value in db.execute(
            f"SELECT campaign_id, cluster_id, name, value FROM campaign_properties "
            f"WHERE campaign_id IN ({marks}) ORDER BY rowid", campaign_ids):
        result[campaign_id].setdefault(cluster_id, {})[name] = json.loads(value)
    return result
