"""``cigri server``: one process that owns the grid's database, spool, logs and cluster
credentials, runs the scheduling cycles, and serves the REST API to authenticated users over a
Unix socket (and TCP with tokens). A door onto the same use cases as direct mode, not a second
house: :mod:`cigri.server.app` (the ASGI application), :mod:`cigri.server.request` (what a request
goes through before its route), :mod:`cigri.server.auth` (who is calling), :mod:`cigri.server.limits`, :mod:`cigri.server.routes` (one module per resource) and
:mod:`cigri.server.run` (sockets, TLS, the cycle thread, signals).
"""
