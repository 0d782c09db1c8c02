"""cigri: the administrator's command (cycles, daemon, database, clusters)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any, Optional

import typer
from cigri.cli import common

from cigri import api, db, logs
from cigri import config as configuration
from cigri.backends.registry import BACKENDS
from cigri.client import TOKEN_FILE, prepare_token_file, save_token, server_address
from cigri.cycle import run_logged
from cigri.daemon import daemon_lock, daemon_running, run_daemon
from cigri.doctor import diagnose
from cigri.errors import Busy, CigriError, InputError, Refused
from cigri.leadership import Leadership
from cigri.users import grid_account, require_admin

app = typer.Typer(add_completion=True, no_args_is_help=True, help="Administer the cigri grid.")
db_app = typer.Typer(no_args_is_help=True, help="The database.")
cluster_app = typer.Typer(no_args_is_help=True, help="The clusters of the grid.")
token_app = typer.Typer(no_args_is_help=True, help="API tokens, for using the grid's server from other machines.")
app.add_typer(db_app, name="db")
app.add_typer(cluster_app, name="cluster")
app.add_typer(token_app, name="token")
overrides: dict[str, Any] = {}


@app.callback()
@common.errors_to_exit
def options(
    home: Optional[str] = typer.Option(None, "--home", metavar="<path>",  # a Path would read "" as "."
                                       help="Directory holding the database, spool and logs (overrides CIGRI_HOME)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Log what each module does."),
    version: bool = common.VersionOption,
) -> None:
    if home is not None:
        if not home:
            raise InputError("--home: must not be empty")
        overrides["cigri.home"] = home
    logs.setup_logging(verbose)


def _grid(command: str):
    """The grid itself, for its admins: ``command`` is one of its own operations (cycles, the
    daemon, the server, the database), never done through a server. On a fresh install, whoever
    runs it creates the database, owns it, and so is its admin: the service account in the
    unit's ExecStartPre, before which nobody (but root) is one. Creating it takes write access
    to its directory, which the role adds nothing to."""
    config = configuration.load(overrides)
    if config.owned_path.exists():
        require_admin(config, api.current_user(), f"cigri {command}")
    elif command not in CREATORS and server_address(config) is not None:
        raise InputError(f"cigri {command} works on the grid's database, and {config.store_name} is none: "
                         "run it on the server's host, as the grid's account")
    if command in DRIVERS:
        _as_the_grids_account(config, command)
    return common.grid(overrides)


DRIVERS = ("cycle", "daemon", "server")  # they make the grid's files: logs, locks, the spool, the socket
CREATORS = (*DRIVERS, "db init")  # may make the grid's database; the others only work on one


def _as_the_grids_account(config: configuration.Config, command: str) -> None:
    """Root driving a grid that another account owns (its database, else its home) would leave it
    files that account cannot use, and run the local cluster's jobs with root's rights: refused,
    naming the account."""
    owner = grid_account(config) or "root"
    if os.geteuid() == 0 and owner != "root":
        raise Refused(f"cigri {command}: the grid at {config.home} is {owner}'s: run it as {owner} "
                      f"(sudo -u {owner} cigri {command}), not as root")


@app.command()
@common.errors_to_exit
def cycle(as_json: bool = typer.Option(False, "--json", help="Print the cycle report as JSON.")) -> None:
    """Run exactly one scheduling cycle and exit (for cron); log to {log_dir}/cigri.log; exit 1 if it fails, another cycle runs, or a daemon or server runs the grid's cycles."""
    grid = _grid("cycle")
    logs.log_to_file(grid.config.log_path / "cigri.log", grid.config.settings)
    if daemon_running(grid):  # they drive this grid's cycles (and the cycle lock keeps any two apart)
        raise Busy(f"a cigri daemon or server runs the cycles of {grid.config.home}: not running one beside it")
    leadership = Leadership(grid)
    if not leadership.lead():  # PostgreSQL: a server elsewhere holds the lease
        raise Busy(f"another server runs the cycles of {grid.config.store_name}: not running one beside it")
    try:
        report = run_logged(grid)
    finally:
        leadership.release()
    if as_json:
        common.print_json(report.__dict__)
    else:
        print(f"cycle: {report}")


@app.command()
@common.errors_to_exit
def daemon(period: Optional[float] = typer.Option(None, "--period", help="Seconds between cycles (default: cigri.cycle_period)."),
           cycles: Optional[int] = typer.Option(None, "--cycles", help="Stop after this many cycles.")) -> None:
    """Loop over cycles until SIGTERM or SIGINT; log to {log_dir}/cigri.log."""
    if cycles is not None and cycles < 1:
        raise InputError("--cycles: must be >= 1")
    if period is not None:
        overrides["cigri.cycle_period"] = common.positive("--period", period)  # the predictor's drain floor and flood timeout use it too
    grid = _grid("daemon")
    logs.log_to_file(grid.config.log_path / "cigri.log", grid.config.settings)
    run_daemon(grid, cycles)


@app.command()
@common.errors_to_exit
def server(listen: Optional[str] = typer.Option(None, "--listen", metavar="HOST:PORT",
                                                help="Also serve HTTPS (or HTTP on loopback) there, for tokens (default: server.listen; none)."),
           socket: Optional[str] = typer.Option(None, "--socket", metavar="PATH",
                                                help="The Unix socket for this machine's users (default: server.socket, {home}/cigri.sock).")
           ) -> None:
    """Serve the grid to its users (REST API on a Unix socket, optionally TCP) and run its cycles, until SIGTERM or SIGINT; log to {log_dir}/cigri.log."""
    from cigri.server.run import serve

    if listen is not None:
        overrides["server.listen"] = listen
    if socket is not None:
        if not socket:
            raise InputError("--socket: must not be empty")
        overrides["server.socket"] = socket
    grid = _grid("server")  # the grid's owner or an admin; creates its directories and migrates its database
    grid.close()
    config = grid.config
    logs.log_to_file(config.log_path / "cigri.log", config.settings)

    def announce(_sockets: object) -> None:  # its terminal (or the journal) says where it serves, once it does
        where = [f"unix:{config.server.socket}"] + ([f"{'https' if config.server.tls_cert else 'http'}://"
                                                     f"{config.server.listen}"] if config.server.listen else [])
        print(f"cigri server: serving {' and '.join(where)}, cycles every {config.settings.cycle_period:g}s; "
              f"log {config.log_path / 'cigri.log'}; SIGTERM or Ctrl-C stops it", file=sys.stderr, flush=True)

    serve(config, ready=announce)
    print("cigri server: stopped", file=sys.stderr)


@app.command()
@common.errors_to_exit
def pool(cluster: str = typer.Argument("local", help="The local cluster of the configuration whose pool this is.")) -> None:
    """Run a local cluster's pool in the foreground until SIGTERM, as a service of its own (conf/cigri-pool.service): as the cluster's pool_account, root on a site, it runs each job as its owner."""
    from cigri.backends.local import slots
    from cigri.backends.local.pool import run_service, spool_problems

    config = configuration.load(overrides)
    found = next((c for c in config.clusters if c.name == cluster and c.backend == "local"), None)
    if found is None:
        raise InputError(f"cluster {cluster}: no local cluster of that name in the configuration")
    account = str(found.options.get("pool_account") or "")
    if not account:
        raise InputError(f"clusters.{cluster}.pool_account: not set: the cycles start that cluster's pool themselves")
    if api.current_user() != account:
        raise Refused(f"cigri pool: clusters.{cluster}.pool_account is {account}: run it as {account}, "
                      f"not as {api.current_user()}")
    spool = config.spool_path / cluster
    problems = spool_problems(str(spool)) if os.geteuid() == 0 else []
    if problems:
        raise Refused(f"cigri pool: {problems[0]}")
    raise typer.Exit(run_service(str(spool), slots(found.options)))


@token_app.command("create")
@common.errors_to_exit
def token_create(user: Optional[str] = typer.Option(None, "--user", metavar="USER", help="Whose token (admins; default: yours)."),
                 ttl: Optional[str] = typer.Option(None, "--ttl", metavar="DURATION", help="Lifetime: 30d, 12h, 90m (default: server.token_ttl)."),
                 note: str = typer.Option("", "--note", help="What it is for (shown by cigri token list)."),
                 save: bool = typer.Option(False, "--save", help="Write it to ~/.config/cigri/token (0600, the directory made 0700) instead of printing it."),
                 as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Make a token and print it once (or --save it where the commands read it): on the machine you submit from, in ~/.config/cigri/token (0600) or CIGRI_TOKEN."""
    if save and user is not None:
        raise InputError("--save writes your own token file: not with --user")
    if save:
        prepare_token_file()  # before the token exists: a directory that cannot be made costs none
    token = common.client(overrides).create_token(owner=user, ttl=ttl, note=note)
    if save:
        save_token(token.pop("token"))
        token["file"] = str(TOKEN_FILE)
    if as_json:
        return common.print_json(token)
    if not save:
        print(token["token"])
    print(f"token {token['id']} for {token['user']}, valid until {common.when(token['expires_at'])}: "
          + (f"saved in {TOKEN_FILE}" if save else "it is shown only now"), file=sys.stderr)
    return None


@token_app.command("list")
@common.errors_to_exit
def token_list(all_users: bool = typer.Option(False, "-a", "--all", help="Everyone's tokens (admins)."),
               as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Your tokens (never their secrets): owner, state, expiry, last use."""
    rows = common.client(overrides).tokens(all_users=all_users)
    if as_json:
        return common.print_json(rows)
    common.print_table(None, ["id", "user", "state", "created", "expires", "last used", "note"],
                       [[r["id"], r["user"], r["state"], common.when(r["created_at"]), common.when(r["expires_at"]),
                         common.when(r["last_used_at"]) or "never", r["note"]] for r in rows])
    return None


@token_app.command("revoke")
@common.errors_to_exit
def token_revoke(token: int = typer.Argument(..., metavar="ID", help="The token's id (cigri token list).")) -> None:
    """Revoke a token: the server refuses it from then on."""
    common.client(overrides).revoke_token(token)
    print(f"Token {token}: revoked")


@app.command()
@common.errors_to_exit
def shares(scenario: Optional[Path] = typer.Option(None, "--scenario", metavar="FILE",
                                                   help="Allocate a hypothetical grid read from a JSON scenario file (README, \"Fair share\"); the database is not opened."),
           as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Explain the fair-share allocation: per class, user, campaign and cluster, the share, target, running and queued jobs, demand and why."""
    if scenario is not None:
        result = api.shares_of_scenario(scenario, configuration.load(overrides))
    else:
        result = common.client(overrides).shares()
    if as_json:
        return common.print_json(result)
    common.print_table("classes", ["class", "priority", "weight", "policy", "campaigns", "demand", "running", "queued",
                                   "target", "start", "preempt", "held", "share"],
                       [[c["name"], c["priority"], c["weight"], c["policy"], *_group_row(c)] for c in result["classes"]])
    common.print_table("users", ["user", "campaigns", "demand", "running", "queued", "target", "start", "preempt",
                                 "held", "share"],
                       [[u["name"], *_group_row(u)] for u in result["users"]])
    common.print_table("campaigns", ["id", "user", "class", "demand", "running", "queued", "target", "start",
                                     "preempt", "share", "reason"],
                       [[c["id"], c["user"], c["class"], c["demand"],
                         *(_per_cluster(c[key]) for key in ("running", "queued", "target", "start", "preempt")),
                         _percent(c["fair_share"]["dominant"]), c["reason"]] for c in result["campaigns"]])
    common.print_table("clusters", ["cluster", "cores", "running", "queued", "target", "start", "preempt",
                                    "running cores", "target cores", "memory GB", "target memory GB"],
                       [[c["name"] + (" (left out)" if c["left_out"] else ""), c["cores"], c["running"], c["queued"],
                         c["target"], c["start"], c["preempt"], c["running_cores"], c["target_cores"], c["memory_gb"],
                         None if c["memory_gb"] is None else round(c["target_memory_gb"], 1)]
                        for c in result["clusters"]])
    print(f"preemption: at most {result['preempt_cap']} job(s) this cycle "
          f"({100 * result['preempt_fraction']:.0f}% of running)")
    for cluster in result.get("clusters_left_out", ()):
        print(f"left out of this cycle: {cluster['name']} ({cluster['error']}); cigri's jobs there keep their place")
    for refusal in result.get("clusters_refused", ()):
        print(f"campaign {refusal['campaign']} never runs on {refusal['cluster']}: {refusal['why']}")
    for aside in result.get("campaigns_set_aside", ()):
        print(f"campaign {aside['campaign']} left out (event {aside['event']}): {common.printable(aside['message'])}")


def _group_row(group: dict[str, Any]) -> list[Any]:
    """A class's or user's totals; held and share are dominant shares of the grid (now, running or
    queued; at target)."""
    return [group["campaigns"], group["demand"], group["running"], group["queued"], group["target"], group["start"],
            group["preempt"], _percent(group["held"]), _percent(group["fair_share"]["dominant"])]


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def _per_cluster(counts: dict[str, int]) -> str:
    return " ".join(f"{cluster}:{n}" for cluster, n in counts.items()) or "0"


FINALIZE = {True: "yes", False: "no", None: "best-effort"}  # a class's finalize; None: only best-effort campaigns


@app.command()
@common.errors_to_exit
def classes(as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """List the classes in evaluation order: their configuration and their active campaigns, users,
    pending tasks, waiting and running jobs (from the database: no cluster is asked)."""
    result = common.client(overrides).classes()
    if as_json:
        return common.print_json({"classes": result})
    common.print_table(None, ["class", "priority", "weight", "policy", "users", "clusters", "default", "finalize",
                              "campaigns", "active users", "pending", "waiting", "running"],
                       [[c["name"], c["priority"], f"{c['weight']:g}", c["policy"], _names(c["users"], "everyone"),
                         _names(c["clusters"], "all"), "yes" if c["default"] else "no", FINALIZE[c["finalize"]],
                         c["campaigns"], c["users_active"], c["pending"], c["waiting"], c["running"]] for c in result])


@app.command()
@common.errors_to_exit
def users(as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """List the users configured or with active campaigns: allotment, affinity, classes, load, and
    what their fixed_share and reserve jobs hold against the allotment (no cluster is asked)."""
    result = common.client(overrides).users()
    if as_json:
        return common.print_json(result)
    common.print_table(None, ["user", "configured", "classes", "campaigns", "pending", "waiting", "running",
                              "held/allotment", "affinity"],
                       [[u["name"], "yes" if u["configured"] else "no", ",".join(u["classes"]), u["campaigns"],
                         u["pending"], u["waiting"], u["running"], _held(u), _affinity(u["affinity"])]
                        for u in result["users"]])
    default = result["default"]
    print(f"defaults: allotment {_limit(default['allotment'], 'cores')}, memory "
          f"{_limit(default['allotment_memory_gb'], 'GB')}, affinity {_affinity(default['affinity']) or 'none'}")


def _names(names: list[str] | None, everything: str) -> str:
    return everything if names is None else ",".join(names)


def _held(user: dict[str, Any]) -> str:
    """What the user's fixed_share and reserve jobs hold against the allotment: ``12/64 cores``,
    and the memory when it is capped or held."""
    held = user["held_non_preemptable"]
    parts = [_against(held["cores"], user["allotment"], "cores")]
    if user["allotment_memory_gb"] is not None or held["memory_gb"]:
        parts.append(_against(held["memory_gb"], user["allotment_memory_gb"], "GB"))
    return ", ".join(parts)


def _against(held: float, limit: float | None, unit: str) -> str:
    return f"{held:g} {unit} (no limit)" if limit is None else f"{held:g}/{limit:g} {unit}"


def _limit(value: float | None, unit: str) -> str:
    return "no limit" if value is None else f"{value:g} {unit}"


def _affinity(affinity: dict[str, float]) -> str:
    return " ".join(f"{cluster}:{weight:g}" for cluster, weight in affinity.items())


@app.command()
@common.errors_to_exit
def doctor(as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Check configuration, database, permissions and each cluster; exit 1 if anything is wrong."""
    checks = diagnose(overrides)
    if as_json:
        common.print_json([check.as_dict() for check in checks])
    else:
        common.print_table(None, ["check", "status", "detail"],
                           [[c.what, "ok" if c.ok else "FAILED", c.detail] for c in checks])
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


@db_app.command("init")
@common.errors_to_exit
def db_init() -> None:
    """Create the database (and apply migrations): an admin, or on a fresh install the account that will own it."""
    grid = _grid("db init")
    print(f"{grid.config.store_name}: schema {db.schema_version(grid.db)}")


@db_app.command("upgrade")
@common.errors_to_exit
def db_upgrade() -> None:
    """Apply pending migrations (on a fresh install, create the database, as db init)."""
    grid = _grid("db upgrade")
    print(f"{grid.config.store_name}: schema {db.schema_version(grid.db)}")


@db_app.command("copy")
@common.errors_to_exit
def db_copy(to: str = typer.Option(..., "--to", metavar="<url>",
                                   help="The fresh PostgreSQL database: postgresql://user@host[:port]/dbname "
                                        "(its password in ~/.pgpass, never here).")) -> None:
    """Copy this SQLite grid, running campaigns included, into a fresh PostgreSQL database; then set [database] url to it."""
    from cigri.db import postgres
    from cigri.db.copy import copy_store

    if not to.startswith(("postgresql://", "postgres://")):
        raise InputError("--to: expected postgresql://user@host[:port]/dbname")
    if postgres.carries_password(to):
        raise InputError("--to: no password on a command line; put it in ~/.pgpass (or PGPASSFILE)")
    grid = _grid("db copy")
    if grid.config.database.url:
        raise InputError("cigri db copy: this grid's store is already PostgreSQL ([database] url)")
    with daemon_lock(grid):  # no cycle writes while the file is read: stop the server or daemon first
        copied = copy_store(grid.db, postgres.connect(to))
    print(f"{grid.config.store_name} -> {postgres.shown(to)}: " + ", ".join(f"{n} {t}" for t, n in copied.items() if n))
    print(f"now set [database] url = \"{postgres.shown(to)}\" (or CIGRI_DATABASE_URL) and start cigri again")


@db_app.command("path")
@common.errors_to_exit
def db_path() -> None:
    """Print where the database is."""
    print(configuration.load(overrides).store_name)


@cluster_app.command("list")
@common.errors_to_exit
def cluster_list(as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Clusters with their backend, options and blacklist state."""
    rows = common.client(overrides).cluster_table()
    if as_json:
        return common.print_json(rows)
    common.print_table(None, ["name", "backend", "options", "defined in", "blacklisted"],
                       [[r["name"], r["backend"], json.dumps(r["options"]), r["source"],
                         r["blacklist_reason"] or ("yes" if r["blacklisted"] else "no")] for r in rows])


BACKEND_NAMES = ", ".join(BACKENDS)


@cluster_app.command("add")
@common.errors_to_exit
def cluster_add(name: str, backend: str = typer.Option("local", "--backend", help=f"Backend: {BACKEND_NAMES}."),
                option: list[str] = typer.Option([], "-o", "--option", metavar="KEY=VALUE",
                                                 help="A cluster key (see conf/cigri.toml), e.g. -o transport=ssh -o port=2222; repeat.")) -> None:
    """Add a cluster to the database after checking its keys (configured clusters are added automatically)."""
    common.client(overrides).add_cluster(name, backend, dict(_key_value(text) for text in option))
    print(f"Cluster {name} added")


def _key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as a TOML value when it is one (2222, 1.5), else as text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InputError(f"--option {text!r}: expected KEY=VALUE")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


@cluster_app.command("test")
@common.errors_to_exit
def cluster_test(name: str,
                 directory: Optional[str] = typer.Option(None, "--directory", help="Directory the test job runs in on the cluster (default: the home of the account that runs the jobs there)."),
                 timeout: float = typer.Option(120.0, "--timeout", help="Seconds to wait for the job to end."),
                 as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Submit a tiny job to a cluster and report the round trip; exit 1 if it fails."""
    timeout = common.positive("--timeout", timeout)  # before the grid opens: nothing is submitted or written
    result = common.client(overrides).test_cluster(name, directory, timeout)
    if as_json:
        return common.print_json(result)
    print(f"Cluster {name}: job {result['remote_id']} ran in {result['round_trip_seconds']}s "
          f"(submission {result['submit_seconds']}s), {result['free_slots']}/{result['total_slots']} slots free")


@cluster_app.command("remove")
@common.errors_to_exit
def cluster_remove(name: str) -> None:
    """Remove a cluster that no campaign uses."""
    common.client(overrides).remove_cluster(name)
    print(f"Cluster {name} removed")


@cluster_app.command("blacklist")
@common.errors_to_exit
def cluster_blacklist(name: str, reason: str = typer.Option("blacklisted by an admin", "--reason", help="Why.")) -> None:
    """Drain a cluster: no new jobs; cigri's jobs there run on and are still followed."""
    common.client(overrides).blacklist(name, reason)
    print(f"Cluster {name} blacklisted")


@cluster_app.command("cancel-campaigns")
@common.errors_to_exit
def cluster_cancel_campaigns(name: str, as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Cancel every running campaign that may use a cluster; their jobs are killed everywhere."""
    ids = common.client(overrides).cancel_cluster_campaigns(name)
    common.print_json({"cancelled": ids}) if as_json else print(f"{len(ids)} campaign(s) cancelled: "
                                                                 f"{' '.join(map(str, ids)) or '-'}")


@app.command()
@common.errors_to_exit
def purge(campaigns: list[int] = typer.Argument(None, metavar="CAMPAIGN", help="Ended campaigns to purge."),
          ended_days: Optional[float] = typer.Option(None, "--ended-days", metavar="DAYS",
                                                     help="Purge every campaign that ended more than DAYS days ago."),
          as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Delete ended campaigns with their tasks, jobs and events (all or none)."""
    if bool(campaigns) == (ended_days is not None):
        raise InputError("give campaign numbers or --ended-days, not both")
    client = common.client(overrides)
    ids = client.purge_ended(ended_days) if ended_days is not None else client.purge_campaigns(campaigns)
    common.print_json({"purged": ids}) if as_json else print(f"{len(ids)} campaign(s) purged: "
                                                             f"{' '.join(map(str, ids)) or '-'}")


@app.command("import-v3")
@common.errors_to_exit
def import_v3(dsn: str = typer.Option(..., "--dsn", metavar="URL", help="The CiGri v3 database, without its password: postgresql://user@host:port/name. The password comes from PGPASSWORD, ~/.pgpass (or PGPASSFILE) or --password-file; a DSN holding one is refused, as every user reads command lines."),
              password_file: Optional[Path] = typer.Option(None, "--password-file", metavar="FILE", help="Read the database password from FILE's first line."),
              as_json: bool = typer.Option(False, "--json", help="Print one JSON value.")) -> None:
    """Bring a CiGri v3 database's clusters, campaigns, tasks, jobs, events and subscriptions into cigri; running campaigns continue (their jobs adopted); a second run changes nothing."""
    report = api.import_v3(_grid("import-v3"), dsn, user=api.current_user(), password_file=password_file)
    if as_json:
        return common.print_json(report.__dict__)
    print(f"imported: {report.campaigns} campaign(s), {report.tasks} task(s), {report.jobs} job(s) "
          f"({report.adopted} running or waiting, now followed; {report.unconfirmed} perhaps sent by CiGri, "
          f"held for their owners), {report.events} event(s), "
          f"{report.subscriptions} subscription(s); {report.skipped_campaigns} campaign(s) already imported; "
          f"{report.converted} parameter line(s) converted, {report.refused} refused")
    for note in report.notes:
        print(f"note: {common.printable(note)}")


@cluster_app.command("unblacklist")
@common.errors_to_exit
def cluster_unblacklist(name: str) -> None:
    """Send jobs to a cluster again."""
    common.client(overrides).blacklist(name, None)
    print(f"Cluster {name} unblacklisted")


@app.command()
@common.errors_to_exit
def simulate(scenario: Path = typer.Argument(..., help="Scenario file (JSON; see README, Simulator)."),
             as_json: bool = typer.Option(False, "--json", help="Print the whole report as one JSON value."),
             plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw utilization and shares over time (FILE.svg or FILE.png).")) -> None:
    """Run cigri's real cycle against simulated clusters in virtual time and report utilization, shares and kills."""
    from cigri import simulate as simulator

    plan = simulator.load_scenario(scenario)
    if plot is not None:
        simulator.plotter(plot)  # refused now, not after the run
    report = simulator.simulate(plan)
    if plot is not None:
        simulator.plot(report, plot)
    if as_json:
        return common.print_json(report)
    share = report["share"]
    if report["finished"]:
        makespan = (f"{report['makespan_hours']} (lower bound {report['makespan_bound_hours']}, "
                    f"ratio {report['bound_ratio']})")
        listed = f"; ratio {report['list_schedule_ratio']}"
    else:  # the figures measured against the makespan are null
        makespan = f"none: {simulator.stopped(report)} (lower bound {report['makespan_bound_hours']})"
        listed = ""
    common.print_table(None, ["measure", "value"], [
        ["campaigns finished", f"{report['finished']} ({report['scenario']['campaigns']} campaigns, "
                               f"{report['scenario']['tasks']} tasks)"],
        ["makespan (h)", makespan],
        ["list schedule (h)", f"{report['list_schedule_hours']} (each task started as soon as a core is free, "
                              f"never killed{listed})"],
        ["utilization of free cores", f"{report['utilization']} (useful {report['useful_utilization']})"],
        ["harvested / idle core-s", f"{report['harvested_core_seconds']} / {report['idle_core_seconds']}"],
        ["kills", json.dumps(report["kills"])],
        ["resubmissions", str(report["resubmissions"])],
        ["Jain's index users / classes", f"{share['jain_users']} / {share['jain_classes']}"],
        ["cycles (simulated hours)", f"{report['cycles']} ({report['simulated_hours']})"],
    ])


@app.command("man")
@common.errors_to_exit
def man_page(page: str = typer.Argument(..., metavar="PAGE",
                                        help="A command (gridsub, gridstat, griddel, gridevents, gridnotify, "
                                             "gridclusters, gridtoken, cigri) or a file format (cigri-jdl, "
                                             "cigri.toml, cigri-scenario).")) -> None:
    """Show a manual page, wherever cigri is installed (man PAGE finds the same pages when the
    installation's share/man is on its path)."""
    path = common.man_page(page)
    if shutil.which("man") is None:
        raise CigriError(f"man is not installed here; the page is {path}")
    os.execvp("man", ["man", "-l", str(path)])


def main() -> None:
    common.run(app)
