"""Configuration layers, precedence, CIGRI_HOME, and errors that name the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cigri import config
from cigri.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Point the system and user files into tmp_path (absent until a test writes them)."""
    paths = {name: tmp_path / f"{name}.toml" for name in ("system", "user", "explicit")}
    monkeypatch.setattr(config, "SYSTEM_FILE", paths["system"])
    monkeypatch.setattr(config, "USER_FILE", paths["user"])
    return paths


def load(overrides: dict | None = None, **env: str) -> config.Config:
    return config.load(overrides, environ=env)


def test_defaults_without_any_configuration(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = load(CIGRI_HOME=str(tmp_path / "home"))
    assert cfg.settings.cycle_period == 10.0
    assert cfg.settings.default_walltime == "01:00:00"
    assert cfg.runner.tap_initial == 3
    assert cfg.settings.counts_retention_days == 30.0
    assert [(c.name, c.backend, c.options) for c in cfg.clusters] == [("local", "local", {})]


def test_cigri_home_moves_every_path(files: dict[str, Path], tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    cfg = load(CIGRI_HOME=str(home))
    assert cfg.home == home
    assert cfg.database_path == home / "cigri.db"
    assert cfg.spool_path == home / "spool"
    assert cfg.log_path == home / "log"


def test_explicit_database_is_kept(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = load(CIGRI_HOME=str(tmp_path), CIGRI_DATABASE=str(tmp_path / "other.db"))
    assert cfg.database_path == tmp_path / "other.db"
    assert cfg.spool_path == tmp_path / "spool"


def test_precedence_of_every_layer(files: dict[str, Path], tmp_path: Path) -> None:
    files["system"].write_text('[cigri]\ncycle_period = 1\nstderr_tail_lines = 1\nmax_resubmit = 1\n'
                               'default_resources = "system"\n[runner]\ntap_max = 7\n')
    files["user"].write_text('[cigri]\nstderr_tail_lines = 2\nmax_resubmit = 2\ndefault_resources = "user"\n')
    files["explicit"].write_text('[cigri]\nmax_resubmit = 3\ndefault_resources = "explicit"\n')
    cfg = load({"cigri.default_resources": "flag"}, CIGRI_CONFIG=str(files["explicit"]),
               CIGRI_HOME=str(tmp_path), CIGRI_DEFAULT_RESOURCES="env")
    assert cfg.settings.cycle_period == 1.0  # system only
    assert cfg.runner.tap_max == 7
    assert cfg.settings.stderr_tail_lines == 2  # user beats system
    assert cfg.settings.max_resubmit == 3  # CIGRI_CONFIG beats user
    assert cfg.settings.default_resources == "flag"  # overrides beat the environment
    assert load(CIGRI_CONFIG=str(files["explicit"]), CIGRI_HOME=str(tmp_path),
                CIGRI_DEFAULT_RESOURCES="env").settings.default_resources == "env"


def test_environment_is_typed(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = load(CIGRI_HOME=str(tmp_path), CIGRI_CYCLE_PERIOD="0.5", CIGRI_RUNNER_TAP_INITIAL="4",
               CIGRI_RUNNER_TAP_FACTOR="2")
    assert cfg.settings.cycle_period == 0.5
    assert cfg.runner.tap_initial == 4
    assert cfg.runner.tap_factor == 2.0


def test_clusters_replace_the_implicit_local(files: dict[str, Path], tmp_path: Path) -> None:
    files["system"].write_text('[clusters.a]\nbackend = "local"\nslots = 2\n')
    files["user"].write_text('[clusters.a]\nmax_waiting = 5\n[clusters.b]\nbackend = "local"\n')
    cfg = load(CIGRI_HOME=str(tmp_path))
    assert {c.name: c.options for c in cfg.clusters} == {"a": {"slots": 2, "max_waiting": 5}, "b": {}}


def test_a_leading_tilde_in_a_clusters_file_keys_is_the_home_of_cigri(files: dict[str, Path], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """paramiko and open() take ~ literally; the README's examples write ~/.ssh/..."""
    monkeypatch.setenv("HOME", str(tmp_path / "admin"))
    files["system"].write_text('[clusters.s]\nbackend = "slurm"\ntransport = "ssh"\nhost = "h"\nuser = "u"\n'
                               'key_file = "~/.ssh/id_ed25519"\nknown_hosts = "~/.ssh/known_hosts"\n'
                               '[clusters.o]\nbackend = "oar"\ntransport = "rest"\nbase_url = "http://h/oarapi"\n'
                               'user = "u"\npassword_file = "~/oar.secret"\n')
    cfg = load(CIGRI_HOME=str(tmp_path))
    options = {c.name: c.options for c in cfg.clusters}
    assert options["s"]["key_file"] == str(tmp_path / "admin/.ssh/id_ed25519")
    assert options["s"]["known_hosts"] == str(tmp_path / "admin/.ssh/known_hosts")
    assert options["o"]["password_file"] == str(tmp_path / "admin/oar.secret")


def test_rest_clusters_need_exactly_what_their_backend_reads(files: dict[str, Path], tmp_path: Path) -> None:
    """OAR's REST API works without a password (its trusted-proxy mode): only slurmrestd needs a secret."""
    files["system"].write_text('[clusters.o]\nbackend = "oar"\ntransport = "rest"\nbase_url = "http://h:6668/oarapi"\n'
                               'user = "u"\n[clusters.s]\nbackend = "slurm"\ntransport = "rest"\n'
                               'base_url = "https://[::1]:6820"\nuser = "u"\ntoken_file = "/t"\n')
    assert [c.name for c in load(CIGRI_HOME=str(tmp_path)).clusters] == ["o", "s"]


def test_documented_example_file_loads_with_default_values(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = load(CIGRI_CONFIG=str(REPO / "conf" / "cigri.toml"), CIGRI_HOME=str(tmp_path))
    assert cfg.settings == load(CIGRI_HOME=str(tmp_path)).settings
    assert cfg.runner == config.RunnerSettings()


BAD_FILES = [
    ("[nope]\nx = 1\n", "nope"),
    ("[cigri]\nhomme = '/tmp'\n", "cigri.homme"),
    ("[runner]\ntap_speed = 2\n", "runner.tap_speed"),
    ("[cigri]\ncycle_period = 'fast'\n", "cigri.cycle_period"),
    ("[cigri]\nmax_resubmit = 2.5\n", "cigri.max_resubmit"),
    ("[cigri]\nmax_resubmit = true\n", "cigri.max_resubmit"),
    ("[cigri]\nhome = 3\n", "cigri.home"),
    ("[cigri]\ndefault_walltime = '1:2:3:4'\n", "cigri.default_walltime"),
    ("[cigri]\ndefault_walltime = '0'\n", "cigri.default_walltime"),
    ("[cigri]\ncycle_period = 0\n", "cigri.cycle_period"),
    ("[metascheduler]\nreplica_delay = -1\n", "metascheduler.replica_delay"),
    ("[metascheduler]\npreempt_deadzone = nan\n", "metascheduler.preempt_deadzone"),
    ("[metascheduler]\npreempt_horizon = -30\n", "metascheduler.preempt_horizon"),
    ("[metascheduler]\npreempt_threshold = 1.2\n", "metascheduler.preempt_threshold"),
    ("[metascheduler]\npreempt_threshold = nan\n", "metascheduler.preempt_threshold"),
    ("[cigri]\nmax_resubmit = -1\n", "cigri.max_resubmit"),
    ("[cigri]\ncounts_retention_days = -1\n", "cigri.counts_retention_days"),
    ("[runner]\ntap_factor = 0.5\n", "runner.tap_factor"),
    ("[runner]\ntap_initial = 10\ntap_max = 5\n", "runner.tap_initial"),
    ("[clusters.c]\nbackend = 'pbs'\n", "clusters.c.backend"),
    ("[clusters.c]\nslots = 2\n", "clusters.c.backend"),
    ("[clusters.c]\nbackend = 'local'\ncores = 2\n", "clusters.c.cores"),
    ("[clusters.c]\nbackend = 'local'\nslots = 'two'\n", "clusters.c.slots"),
    ("[clusters.c]\nbackend = 'local'\nmax_waiting = -1\n", "clusters.c.max_waiting"),
    ("[clusters.c]\nbackend = 'oar'\ntransport = 'ssh'\nhost = 'h'\nuser = 'u'\nkill_grace = 600\n",
     "clusters.c.kill_grace"),
    ("[clusters.c]\nbackend = 'slurm'\ntransport = 'ssh'\nhost = 'h'\nuser = 'u'\nkill_grace = 5\n",
     "clusters.c.kill_grace"),  # Slurm's own KillWait gives the grace
    ("[clusters.c]\nbackend = 'slurm'\ntransport = 'rest'\nbase_url = 'https://h'\nuser = 'u'\n",
     "clusters.c.token_file"),  # slurmrestd wants its JWT
    ("[clusters.c]\nbackend = 'slurm'\ntransport = 'rest'\nbase_url = 'https://h'\ntoken_file = 't'\n",
     "clusters.c.user"),
    ("[clusters.c]\nbackend = 'oar'\ntransport = 'rest'\nbase_url = 'https://h'\n", "clusters.c.user"),
    ("[clusters.c]\nbackend = 'oar'\ntransport = 'rest'\nbase_url = 'h/oarapi'\nuser = 'u'\n", "clusters.c.base_url"),
    ("[clusters.c]\nbackend = 'oar'\ntransport = 'rest'\nbase_url = 'ftp://h'\nuser = 'u'\n", "clusters.c.base_url"),
    ("[clusters.c]\nbackend = 'oar'\ntransport = 'rest'\nbase_url = 'http://h:x'\nuser = 'u'\n", "clusters.c.base_url"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 0\n", "clusters.c.cores"),  # the sim backend's own checks
    ("[clusters.c]\nbackend = 'sim'\nlocal_load = 0.5\n", "clusters.c.cores"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nlocal_load = 5\n", "clusters.c.local_load"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nlocal_load_steps = 'garbage'\n", "clusters.c.local_load_steps"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nlocal_load_steps = '-1:0.5'\n", "clusters.c.local_load_steps"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nlocal_load_steps = 'inf:0.5'\n", "clusters.c.local_load_steps"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nlocal_load_steps = 'nan:0.5'\n", "clusters.c.local_load_steps"),
    ("[clusters.c]\nbackend = 'sim'\ncores = 4\nnode_cores = 3\n", "clusters.c.node_cores"),
    ("clusters = 3\n", "clusters"),
    ("[users.root.affinity]\nlocal = nan\n", "users.root.affinity.local"),  # cigri users --json printed NaN
    ("[users.affinity]\nlocal = -inf\n", "users.affinity.local"),
    ("[users.root.affinity]\nlocal = 'near'\n", "users.root.affinity.local"),
    ("[users.root]\naffinity = 3\n", "users.root.affinity"),
    ("[cigri\n", "line 1"),
]


@pytest.mark.parametrize(("text", "key"), BAD_FILES)
def test_bad_file_names_the_key(files: dict[str, Path], tmp_path: Path, text: str, key: str) -> None:
    files["user"].write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as error:
        load(CIGRI_HOME=str(tmp_path))
    assert error.value.exit_code == 2


@pytest.mark.parametrize(("variable", "value", "named"), [
    ("CIGRI_CYCLE_PERIOD", "abc", "CIGRI_CYCLE_PERIOD"),
    ("CIGRI_MAX_RESUBMIT", "1.5", "CIGRI_MAX_RESUBMIT"),
    ("CIGRI_RUNNER_TAP_INITIAL", "many", "CIGRI_RUNNER_TAP_INITIAL"),
    ("CIGRI_CYCLE_PERIOD", "nan", "CIGRI_CYCLE_PERIOD"),  # a float, but nan slips past every comparison
    ("CIGRI_RUNNER_TAP_FACTOR", "nan", "CIGRI_RUNNER_TAP_FACTOR"),
    ("CIGRI_RUNNER_PENALTY_HALF_LIFE", "inf", "CIGRI_RUNNER_PENALTY_HALF_LIFE"),  # inf past every bound
    ("CIGRI_STUCK_DELAY", "inf", "CIGRI_STUCK_DELAY"),
    ("CIGRI_AUTOFIX_DELAY", "inf", "CIGRI_AUTOFIX_DELAY"),
    ("CIGRI_RUNNER_FLOOD_GRACE", "inf", "CIGRI_RUNNER_FLOOD_GRACE"),
    ("CIGRI_NOTIFY_TIMEOUT", "-inf", "CIGRI_NOTIFY_TIMEOUT"),
    ("CIGRI_DEFAULT_WALLTIME", "soon", "cigri.default_walltime"),  # the right type, a bad value
    ("CIGRI_HOME", "", "CIGRI_HOME"),  # empty would silently mean the default
    ("CIGRI_DATABASE", "", "CIGRI_DATABASE"),
])
def test_bad_environment_names_the_variable(files: dict[str, Path], tmp_path: Path,
                                            variable: str, value: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load(**{"CIGRI_HOME": str(tmp_path), variable: value})


def test_missing_cigri_config_file(files: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CIGRI_CONFIG"):
        load(CIGRI_CONFIG=str(tmp_path / "absent.toml"))


@pytest.mark.parametrize(("overrides", "key"), [
    ({"cigri.nope": 1}, "cigri.nope"),
    ({"nope.home": "/x"}, "nope"),
    ({"cigri.cycle_period": "fast"}, "cigri.cycle_period"),
])
def test_bad_override_names_the_key(files: dict[str, Path], tmp_path: Path, overrides: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load(overrides, CIGRI_HOME=str(tmp_path))
