"""``python -m cigri.server.contract``: print the API's OpenAPI document, the contract that
``docs/openapi.json`` holds and the tests compare with what a running server serves."""

from __future__ import annotations

import json
import sys

from cigri import config as configuration
from cigri.server.app import create_app


def contract() -> dict[str, object]:
    """The OpenAPI document of the API, which depends on no configuration or grid."""
    config = configuration.load(environ={"CIGRI_HOME": "/nonexistent"}, system_files=False)
    return create_app(config).openapi()


if __name__ == "__main__":
    json.dump(contract(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
