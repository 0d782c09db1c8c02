"""One router per resource, each route a thin call to a use case of :mod:`cigri.api`."""

from cigri.server.routes import campaigns, clusters, events, health, jobs, notifications, shares, tokens

ROOT = [health.router]  # outside /api/v1: /healthz
ROUTERS = [health.identity, campaigns.router, jobs.router, events.router, clusters.router, notifications.router,
           shares.router, tokens.router]
