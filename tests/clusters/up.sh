#!/usr/bin/env bash
# Start the real batch clusters cigri's integration tests run against, all on
# 127.0.0.1, all state under DIR:
#   - munged (private key + socket) shared by two Slurm 22.05 clusters slurm-a
#     and slurm-b: own slurmctld + slurmd + slurmrestd (JWT) each, one node with
#     8 (fake) CPUs and 8000 MB, partitions `main` (default) and `besteffort` (lower
#     PriorityTier; a `main` job cancels the besteffort jobs it needs the CPUs of);
#     slurm-a allocates cores only (CR_Core), slurm-b cores and memory
#     (CR_Core_Memory, 500 MB per CPU unless a job asks), as sites do either;
#   - accounting on slurm-b only (slurm-a has none): a private MariaDB and one
#     slurmdbd, so sacct works there; account `grid` holds root and gridtest;
#     AccountingStorageEnforce=associations,limits,qos; a third partition
#     `capped` on slurm-b whose partition QOS `capped` has MaxSubmitJobsPerUser=6
#     (a 7th queued or running job of a user in that partition is refused at
#     submission; main and besteffort are not capped) and MaxWall=00:10:00 with
#     DenyOnLimit (a longer job is refused at submission too); a fourth partition
#     `walled` whose partition QOS `walled` has MaxWall=00:10:00 without
#     DenyOnLimit, Slurm's default (a longer job is accepted and pends forever,
#     reason QOSMaxWallDurationPerJobLimit);
#   - one sshd per cluster front-end (slurm-a, slurm-b, oar) for user gridtest,
#     with a generated client key and a known_hosts; the Slurm ones set
#     SLURM_CONF (sshd SetEnv) so a plain `sbatch` hits that cluster;
#   - OAR 2.5.9: private PostgreSQL, server (Almighty), node, 8 core resources,
#     REST API in a private apache2;
#   - DIR/exec (mode 1777) where jobs can write;
#   - with CIGRI_TEST_USERS="u1 u2" (Unix users, created if missing): jobs run as
#     their owner everywhere (docs/identity.md): a sudoers rule lets the front-ends'
#     account run exactly the batch commands as those users (SSH), slurmrestd is
#     given SlurmUser's token to impersonate them (slurm-a) and a token of each
#     user (DIR/slurm/slurm-b/jwt.USER, for gridtoken) for slurm-b, slurm-b's
#     accounting knows them, and OAR's REST API is used through its trusted
#     front (/oarapi, X-Remote-Ident), where a user whose name has characters
#     other than letters, digits and '_' gets a login of its own (cigri-u1 ->
#     cigri_u1, created too: OAR 2.5's API keeps only the first word of a name);
#   - DIR/cigri.toml (one [clusters.*] entry per backend x transport; with
#     CIGRI_TEST_USERS, each in a per-user identity mode), DIR/single.toml (the
#     same clusters, every job as the front-ends' account: the single-account
#     setup), DIR/tokens.toml (with CIGRI_TEST_USERS: slurm-b over REST with
#     each user's own token),
#     DIR/limits.toml (slurm-b's partitions `capped` and `walled` over ssh and
#     REST; kept out of cigri.toml, which the conformance suite runs against in
#     full) and
#     DIR/env.sh (variables for humans).
# Missing Debian packages are installed first (no system daemon is started).
#
# usage: up.sh DIR        (as root; down.sh DIR stops it all, smoke.sh DIR checks it)
# A second run with everything up changes nothing and returns at once; a run
# over a half-started or dead DIR stops its leftovers and starts afresh.
# On failure: non-zero exit, daemons stopped, logs kept in DIR.
#
# Ports (environment overrides): CIGRI_CLUSTERS_SLURM_PORT=16810 (slurm-a:
# slurmctld +0, slurmd +1, slurmrestd +2; slurm-b: +10, +11, +12),
# CIGRI_CLUSTERS_SLURMDBD_PORT=slurm port +20 (16830),
# CIGRI_CLUSTERS_MARIADB_PORT=13306 (slurm-b's accounting database),
# CIGRI_CLUSTERS_SSH_PORT=2222 (slurm-a; slurm-b +1, oar +2),
# CIGRI_CLUSTERS_OAR_PG_PORT=15432, CIGRI_CLUSTERS_OAR_API_PORT=6668.
# OAR also uses 6666 (Almighty) and 6667 (node sshd), fixed by the package, and
# /etc/oar/oar.conf (restored by down.sh): one OAR, hence one DIR, per host.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root
[ $# = 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$(realpath -m "$1")
unset SLURM_JWT SLURM_CONF   # SLURM_JWT would switch the CLI from munge to JWT auth

SLURM_PORT=${CIGRI_CLUSTERS_SLURM_PORT:-16810}
SSH_PORT=${CIGRI_CLUSTERS_SSH_PORT:-2222}
PG_PORT=${CIGRI_CLUSTERS_OAR_PG_PORT:-15432}
API_PORT=${CIGRI_CLUSTERS_OAR_API_PORT:-6668}
DBD_PORT=${CIGRI_CLUSTERS_SLURMDBD_PORT:-$((SLURM_PORT + 20))}
MARIADB_PORT=${CIGRI_CLUSTERS_MARIADB_PORT:-13306}
CPUS=8
SLURM_CLUSTERS="slurm-a slurm-b"
select_parameters() { case $1 in slurm-a) echo "CR_Core" ;; *) echo "CR_Core_Memory
DefMemPerCPU=500" ;; esac; }
TOKEN_LIFESPAN=$((30 * 86400))
ACCT_CLUSTER=slurm-b     # the one cluster with slurmdbd accounting
ACCT_ACCOUNT=grid        # account holding root and the test user there
# MaxSubmitJobsPerUser of QOS `capped`, the partition QOS of slurm-b's partition
# `capped`: the integration tests rely on this number (a 7th job is refused)
CAPPED_MAX_SUBMIT=6
CAPPED_MAX_WALL=00:10:00  # and its MaxWall, with DenyOnLimit: a longer job is refused at submission
WALLED_MAX_WALL=00:10:00  # MaxWall of QOS `walled`, without DenyOnLimit: a longer job pends forever
USERS=${CIGRI_TEST_USERS:-}   # jobs run as their owner, one of these users (docs/identity.md)
SUDOERS=/etc/sudoers.d/cigri-tests
PKGS="iproute2 munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin slurmdbd mariadb-server sudo
      openssh-server openssh-client curl
      postgresql oar-server oar-server-pgsql oar-node oar-user oar-user-pgsql oar-restful-api
      apache2 apache2-utils libyaml-perl libyaml-syck-perl libxml-dumper-perl"
OARCONF=/etc/oar/oar.conf

slurm_port() { # CLUSTER OFFSET
  local i=0 c
  for c in $SLURM_CLUSTERS; do [ "$c" = "$1" ] && break; i=$((i + 1)); done
  echo $((SLURM_PORT + 10 * i + $2))
}
ssh_port() { case $1 in slurm-a) echo "$SSH_PORT" ;; slurm-b) echo $((SSH_PORT + 1)) ;; oar) echo $((SSH_PORT + 2)) ;; esac; }
all_ports() {
  local c
  for c in $SLURM_CLUSTERS; do echo "$(slurm_port "$c" 0) $(slurm_port "$c" 1) $(slurm_port "$c" 2) $(ssh_port "$c")"; done
  echo "$DBD_PORT $MARIADB_PORT"
  echo "$(ssh_port oar) $PG_PORT $API_PORT 6666 6667"
}

# ------------------------------------------------------------- already up?
if [ -f "$DIR/.up-complete" ]; then
  ok=1
  for f in "$DIR"/pids/*.pid; do [ -e "$f" ] && { alive "$(cat "$f")" || { ok=0; log "dead: $(basename "$f" .pid)"; }; }; done
  # shellcheck disable=SC2046
  open_ports=$(listening_ports)
  for p in $(all_ports); do grep -qx "$p" <<<"$open_ports" || { ok=0; log "nothing listens on port $p"; }; done
  [ "$(cat "$DIR/users" 2>/dev/null)" = "$USERS" ] || { ok=0; log "CIGRI_TEST_USERS is not what it was: starting afresh"; }
  if [ $ok = 1 ]; then
    log "already up (state in $DIR); nothing to do"
    cat "$DIR/summary.txt"
    exit 0
  fi
fi
if [ -e "$DIR" ] && [ ! -f "$DIR/.cigri-clusters" ] && [ -n "$(ls -A "$DIR")" ]; then
  die "$DIR exists, is not empty and was not made by up.sh: refusing to use it"
fi
if [ -f "$DIR/.cigri-clusters" ]; then
  log "stale or half-started state in $DIR: stopping its leftovers first"
  "$HERE/down.sh" "$DIR" || true
fi
busy=""
# shellcheck disable=SC2046
open_ports=$(listening_ports)
for p in $(all_ports); do grep -qx "$p" <<<"$open_ports" && busy="$busy $p"; done
[ -z "$busy" ] || die "TCP ports already in use:$busy (another instance? run down.sh on its DIR)"

# from here on, a failure stops whatever was started (logs stay in DIR)
on_exit() {
  local rc=$?
  [ $rc = 0 ] && return 0
  log "FAILED (exit $rc) after $(elapsed)s; stopping what was started, logs kept in $DIR"
  KEEP_STATE=1 "$HERE/down.sh" "$DIR" >/dev/null 2>&1 || true
  exit $rc
}
trap on_exit EXIT
trap 'log "line $LINENO: failed: $BASH_COMMAND"' ERR

# ------------------------------------------------------------- packages
# shellcheck disable=SC2086
install_missing $PKGS
T_PKG=$(elapsed)
log "packages present (${T_PKG}s)"
ensure_users
TUSER=$CC_USER
# oar_login USER: USER's login for OAR's REST API, which keeps only the first \w+ of a name
oar_login() { printf '%s' "$1" | tr -c 'A-Za-z0-9_' '_'; }
for U in $USERS; do
  case "$U" in "$TUSER"|root|*[!A-Za-z0-9_.-]*|-*) die "CIGRI_TEST_USERS: '$U' cannot be a test user" ;; esac
  for L in "$U" "$(oar_login "$U")"; do
    id "$L" >/dev/null 2>&1 || useradd -m -s /bin/sh "$L"
  done
done

mkdir -p "$DIR"
touch "$DIR/.cigri-clusters"    # marks DIR as ours: down.sh only removes what it lists
mkdir -p "$DIR/pids" "$DIR/munge" "$DIR/slurm" "$DIR/ssh" "$DIR/oar" "$DIR/exec"
chmod 755 "$DIR" "$DIR/pids" "$DIR/slurm" "$DIR/ssh" "$DIR/oar"
chmod 1777 "$DIR/exec"
# daemons inherit the cwd (slurmrestd uses it as a job's default WorkDir)
cd /

# ------------------------------------------------------------- munge
# munged insists: socket dir world-executable, key 0400 owned by munge
chown munge:munge "$DIR/munge"; chmod 755 "$DIR/munge"
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$DIR/munge/munge.key"; chmod 400 "$DIR/munge/munge.key"
MSOCK=$DIR/munge/munge.sock
runuser -u munge -- /usr/sbin/munged --socket="$MSOCK" --key-file="$DIR/munge/munge.key" \
  --log-file="$DIR/munge/munged.log" --pid-file="$DIR/munge/munged.pid" \
  --seed-file="$DIR/munge/munged.seed"
cp "$DIR/munge/munged.pid" "$DIR/pids/munged.pid"
munge -S "$MSOCK" -n | unmunge -S "$MSOCK" >/dev/null || die "munge does not work"
log "munged up"

# ------------------------------------------------------------- accounting (slurm-b)
# start_accounting: private MariaDB (state in DIR/mariadb, 127.0.0.1 only) + one
# slurmdbd; slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF (here
# slurm-b's), 0600 owned by SlurmUser (root). Called in the Slurm loop right
# before slurm-b's slurmctld, so that slurm-a starts meanwhile.
start_accounting() {
  DB=$DIR/mariadb
  DBD_DIR=$DIR/slurm/$ACCT_CLUSTER
  mkdir -p "$DB" "$DBD_DIR/log"
  chmod 755 "$DBD_DIR" "$DBD_DIR/log"
  chown mysql:mysql "$DB"; chmod 700 "$DB"
  mariadb-install-db --no-defaults --user=mysql --datadir="$DB/data" --auth-root-authentication-method=socket \
    --skip-test-db >"$DB/install.log" 2>&1 || { cat "$DB/install.log" >&2; die "mariadb-install-db failed"; }
  # started as root with --user=mysql (not through runuser) so that $! is mariadbd itself
  setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB/data" \
    --socket="$DB/mysqld.sock" --pid-file="$DB/mysqld.pid" --port="$MARIADB_PORT" --bind-address=127.0.0.1 \
    --log-error="$DB/error.log" --skip-log-bin --innodb-flush-log-at-trx-commit=0 \
    --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
  echo $! > "$DIR/pids/mariadb.pid"
  sql() { mariadb --no-defaults -S "$DB/mysqld.sock" -u root -e "$1"; }
  for _ in $(seq 1 300); do sql 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
  sql 'select 1' >/dev/null || { cat "$DB/error.log" >&2; die "mariadb does not answer on $DB/mysqld.sock"; }
  DBPW=$(randpw)
  sql "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DBPW';
       CREATE USER 'slurm'@'localhost' IDENTIFIED BY '$DBPW';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  log "mariadb up on 127.0.0.1:$MARIADB_PORT"
  (umask 077; cat > "$DBD_DIR/slurmdbd.conf" <<EOF
# generated by tests/clusters/up.sh -- slurmdbd of $ACCT_CLUSTER on 127.0.0.1
AuthType=auth/munge
AuthInfo=socket=$MSOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$DBD_DIR/log/slurmdbd.log
PidFile=$DBD_DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MARIADB_PORT
StorageUser=slurm
StoragePass=$DBPW
StorageLoc=slurm_acct_db
EOF
  )
  SLURM_CONF=$DBD_DIR/slurm.conf /usr/sbin/slurmdbd
  wait_file "$DBD_DIR/slurmdbd.pid" 30 || die "slurmdbd wrote no pid file; see $DBD_DIR/log/slurmdbd.log"
  cp "$DBD_DIR/slurmdbd.pid" "$DIR/pids/slurmdbd.pid"
  wait_tcp "$DBD_PORT" 30 || { cat "$DBD_DIR/log/slurmdbd.log" >&2; die "slurmdbd not listening on $DBD_PORT"; }
  log "slurmdbd up on 127.0.0.1:$DBD_PORT"
}

# slurm.conf lines for the cluster with accounting; the munge socket for
# slurmctld/sacctmgr -> slurmdbd comes from AccountingStoragePass, not AuthInfo
accounting() {
  if [ "$1" = "$ACCT_CLUSTER" ]; then
    cat <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MSOCK
AccountingStorageEnforce=associations,limits,qos
EOF
  else
    echo "AccountingStorageType=accounting_storage/none"
  fi
}
# partition QOS capped (walled): every job of partition `capped` (`walled`) is under it, no --qos needed
limited_partitions() {
  [ "$1" = "$ACCT_CLUSTER" ] || return 0
  echo "PartitionName=capped Nodes=ALL Default=NO PriorityTier=10 QOS=capped MaxTime=INFINITE State=UP OverSubscribe=NO"
  echo "PartitionName=walled Nodes=ALL Default=NO PriorityTier=10 QOS=walled MaxTime=INFINITE State=UP OverSubscribe=NO"
}

# ------------------------------------------------------------- Slurm clusters
for C in $SLURM_CLUSTERS; do
  D=$DIR/slurm/$C
  mkdir -p "$D/ctld" "$D/spool" "$D/log"
  chmod 755 "$D" "$D/log"
  # JWT signing key (HS256), one per cluster: a token of one is useless on the other
  dd if=/dev/urandom of="$D/jwt_hs256.key" bs=32 count=1 status=none
  chmod 600 "$D/jwt_hs256.key"
  cat > "$D/slurm.conf" <<EOF
# generated by tests/clusters/up.sh -- cluster $C on 127.0.0.1
ClusterName=$C
SlurmctldHost=localhost(127.0.0.1)
# bind slurmd and slurmctld to 127.0.0.1 instead of 0.0.0.0
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmctldPort=$(slurm_port "$C" 0)
SlurmdPort=$(slurm_port "$C" 1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$D/jwt_hs256.key
StateSaveLocation=$D/ctld
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups (containers, sandbox kernels)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
$(accounting "$C")
JobAcctGatherType=jobacct_gather/none
# one line per finished job even without slurmdbd
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=$(select_parameters "$C")
# advertise the CPUs/memory below whatever the hardware has
SlurmdParameters=config_overrides
ReturnToService=2
# finished jobs stay visible to squeue/scontrol for 10 minutes
MinJobAge=600
MaxArraySize=10001
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
# preemption: a job of a partition with a higher PriorityTier cancels the jobs
# of lower-tier partitions whose CPUs it needs (state PREEMPTED)
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
NodeName=$C-n1 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$CPUS RealMemory=8000 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES PriorityTier=10 MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=besteffort Nodes=ALL Default=NO PriorityTier=1 PreemptMode=CANCEL MaxTime=INFINITE State=UP OverSubscribe=NO
$(limited_partitions "$C")
EOF
  chmod 644 "$D/slurm.conf"
  if [ "$C" = "$ACCT_CLUSTER" ]; then
    start_accounting
    # before slurmctld starts: cluster, QOS (a partition QOS must exist), account, users
    sam() { SLURM_CONF=$D/slurm.conf sacctmgr -i "$@" >>"$D/log/sacctmgr.log" 2>&1 || { cat "$D/log/sacctmgr.log" >&2; die "sacctmgr $*"; }; }
    sam add cluster "$C"
    # DenyOnLimit: a job over MaxWall is refused at submission (else it would pend forever)
    sam add qos capped MaxSubmitJobsPerUser=$CAPPED_MAX_SUBMIT MaxWall=$CAPPED_MAX_WALL Flags=DenyOnLimit
    # Slurm's default: a job over MaxWall is accepted and pends forever
    sam add qos walled MaxWall=$WALLED_MAX_WALL
    sam add account "$ACCT_ACCOUNT" Cluster="$C" Description="cigri tests" Organization=cigri
    acct_users=root,$TUSER
    for U in $USERS; do acct_users=$acct_users,$U; done
    sam add user "$acct_users" Account="$ACCT_ACCOUNT" DefaultAccount="$ACCT_ACCOUNT" Cluster="$C"
    log "slurm $C: accounting: cluster, account $ACCT_ACCOUNT ($acct_users)"
    log "slurm $C: QOS capped (MaxSubmitJobsPerUser=$CAPPED_MAX_SUBMIT, MaxWall=$CAPPED_MAX_WALL), QOS walled (MaxWall=$WALLED_MAX_WALL)"
  fi
  SLURM_CONF=$D/slurm.conf /usr/sbin/slurmctld -f "$D/slurm.conf"
  SLURM_CONF=$D/slurm.conf /usr/sbin/slurmd -f "$D/slurm.conf" -N "$C-n1"
  # recorded at once: a later failure (slurm-b's accounting) must stop these too
  wait_file "$D/slurmctld.pid" 30 || die "slurm $C: slurmctld wrote no pid file; see $D/log"
  wait_file "$D/slurmd.pid" 30 || die "slurm $C: slurmd wrote no pid file; see $D/log"
  cp "$D/slurmctld.pid" "$DIR/pids/$C-slurmctld.pid"
  cp "$D/slurmd.pid" "$DIR/pids/$C-slurmd.pid"
done
for C in $SLURM_CLUSTERS; do
  D=$DIR/slurm/$C
  st=""
  for _ in $(seq 1 600); do
    st=$(SLURM_CONF=$D/slurm.conf sinfo -h -N -p main -o %T 2>/dev/null | head -1 || true)
    case "$st" in idle|mixed|allocated) break ;; esac
    sleep 0.1
  done
  case "$st" in idle|mixed|allocated) ;; *) die "slurm $C: node not ready (state '$st'); see $D/log" ;; esac
  cpus=$(SLURM_CONF=$D/slurm.conf sinfo -h -p main -o %C)
  [ "${cpus##*/}" = $CPUS ] || die "slurm $C: node has $cpus CPUs (A/I/O/T), expected $CPUS"
  log "slurm $C: node idle, CPUs $cpus"
done

# slurmrestd, JWT auth. The dbv0.0.3x plugins are fatal without slurmdbd.
OPENAPI=openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38
for C in $SLURM_CLUSTERS; do
  D=$DIR/slurm/$C
  P=$(slurm_port "$C" 2)
  # token for the test user, minted by root; kept in a 0600 file, never inline
  TOKEN=$(SLURM_CONF=$D/slurm.conf scontrol token username="$TUSER" lifespan=$TOKEN_LIFESPAN | sed -n 's/^SLURM_JWT=//p')
  [ -n "$TOKEN" ] || die "slurm $C: scontrol token gave nothing"
  (umask 077; printf '%s\n' "$TOKEN" > "$D/jwt")
  if [ -n "$USERS" ]; then
    # SlurmUser's (root's) token: slurmrestd lets it act as anyone named in X-SLURM-USER-NAME
    TOKEN=$(SLURM_CONF=$D/slurm.conf scontrol token username=root lifespan=$TOKEN_LIFESPAN | sed -n 's/^SLURM_JWT=//p')
    (umask 077; printf '%s\n' "$TOKEN" > "$D/jwt.slurmuser")
    for U in $USERS; do   # each user's own, as `scontrol token` gives a user (for gridtoken)
      TOKEN=$(SLURM_CONF=$D/slurm.conf scontrol token username="$U" lifespan=$TOKEN_LIFESPAN | sed -n 's/^SLURM_JWT=//p')
      (umask 077; printf 'SLURM_JWT=%s\n' "$TOKEN" > "$D/jwt.$U")
    done
  fi
  # SLURM_JWT=daemon: slurmrestd itself uses auth/jwt (else the pass-through
  # token is rejected); -u: drop to an unprivileged user after binding
  SLURM_CONF=$D/slurm.conf SLURM_JWT=daemon setsid /usr/sbin/slurmrestd -f "$D/slurm.conf" \
    -a rest_auth/jwt -u "$CC_REST_USER" -s "$OPENAPI" "127.0.0.1:$P" \
    </dev/null >"$D/log/slurmrestd.log" 2>&1 &
  echo $! > "$DIR/pids/$C-slurmrestd.pid"
done
for C in $SLURM_CLUSTERS; do
  D=$DIR/slurm/$C
  URL=http://127.0.0.1:$(slurm_port "$C" 2)/slurm/v0.0.38/ping
  ok=0
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null -H "X-SLURM-USER-NAME: $TUSER" -H "X-SLURM-USER-TOKEN: $(cat "$D/jwt")" "$URL" 2>/dev/null && { ok=1; break; }
    sleep 0.1
  done
  [ $ok = 1 ] || { cat "$D/log/slurmrestd.log" >&2; die "slurmrestd of $C does not answer $URL"; }
  log "slurm $C: slurmrestd up on 127.0.0.1:$(slurm_port "$C" 2)"
done

# ------------------------------------------------------------- sshd front-ends
# /run/sshd: privilege separation dir, normally made by systemd (left in place)
mkdir -p /run/sshd; chmod 755 /run/sshd
S=$DIR/ssh
ssh-keygen -q -t ed25519 -N '' -C "cigri-tests-$TUSER" -f "$S/id_ed25519"
cp "$S/id_ed25519.pub" "$S/authorized_keys"; chmod 644 "$S/authorized_keys"
: > "$S/known_hosts"; : > "$S/ssh_config"
for N in slurm-a slurm-b oar; do
  mkdir -p "$S/$N"; chmod 755 "$S/$N"
  P=$(ssh_port "$N")
  ssh-keygen -q -t ed25519 -N '' -C "$N" -f "$S/$N/host_ed25519_key"
  setenv=""
  [ "$N" != oar ] && setenv="SetEnv SLURM_CONF=$DIR/slurm/$N/slurm.conf"
  cat > "$S/$N/sshd_config" <<EOF
# generated by tests/clusters/up.sh: front-end of $N
ListenAddress 127.0.0.1
Port $P
HostKey $S/$N/host_ed25519_key
PidFile $S/$N/sshd.pid
AuthorizedKeysFile $S/authorized_keys
# DIR may live under /tmp (mode 1777): StrictModes would reject the path
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowUsers $TUSER
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
UseDNS no
LogLevel INFO
MaxStartups 100:30:200
MaxSessions 50
Subsystem sftp internal-sftp
$setenv
EOF
  /usr/sbin/sshd -t -f "$S/$N/sshd_config"
  /usr/sbin/sshd -f "$S/$N/sshd_config" -E "$S/$N/sshd.log"
  echo "[127.0.0.1]:$P $(cut -d' ' -f1,2 "$S/$N/host_ed25519_key.pub")" >> "$S/known_hosts"
  cat >> "$S/ssh_config" <<EOF
Host $N
  HostName 127.0.0.1
  Port $P
  User $TUSER
  IdentityFile $S/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $S/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5

EOF
done
chmod 644 "$S/known_hosts" "$S/ssh_config"
for N in slurm-a slurm-b oar; do
  wait_file "$S/$N/sshd.pid" 10 || die "sshd $N did not start; see $S/$N/sshd.log"
  cp "$S/$N/sshd.pid" "$DIR/pids/sshd-$N.pid"
done
# ready = a real key login; the Slurm front-ends must see their own cluster
for C in $SLURM_CLUSTERS; do
  out=""
  for _ in $(seq 1 30); do
    out=$(ssh -F "$S/ssh_config" "$C" 'scontrol show config | sed -n "s/^ClusterName *= *//p"' 2>/dev/null || true)
    [ "$out" = "$C" ] && break; sleep 0.1
  done
  [ "$out" = "$C" ] || { cat "$S/$C/sshd.log" >&2; die "ssh front-end of $C: login or SLURM_CONF failed (got '$out')"; }
  log "sshd $C up on 127.0.0.1:$(ssh_port "$C") (sees cluster $out)"
done

# ------------------------------------------------------------- OAR
O=$DIR/oar
PGBIN=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)
mkdir -p "$O/pg" "$O/pgsock" "$O/apache/run" "$O/apache/htdocs"
PGPW=$(randpw); OARPW=$(randpw); OARROPW=$(randpw); APIPW=$(randpw)
(umask 077; printf '%s\n' "$PGPW" > "$O/pg/admin.pw"; printf '%s\n' "$APIPW" > "$O/oar_api_password")
chown -R postgres:postgres "$O/pg" "$O/pgsock"; chmod 700 "$O/pg"
runuser -u postgres -- "$PGBIN/initdb" -D "$O/pg/data" -U postgres --pwfile="$O/pg/admin.pw" \
  -A scram-sha-256 --auth-local=peer -E UTF8 --locale=C.UTF-8 --no-sync >"$O/initdb.log" 2>&1 \
  || { cat "$O/initdb.log" >&2; die "initdb failed"; }
# throw-away database: favour speed over durability
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$O/pg/data" -l "$O/pg/postgres.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$O/pgsock -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB -c max_connections=50" \
  start >/dev/null || { cat "$O/pg/postgres.log" >&2; die "postgres did not start"; }
head -1 "$O/pg/data/postmaster.pid" > "$DIR/pids/postgres.pid"
log "oar: postgres up on 127.0.0.1:$PG_PORT"

# OAR's setuid wrappers hard-code /etc/oar/oar.conf: edit it, keep the pristine
# file as oar.conf.cigri-orig (down.sh puts it back)
[ -f $OARCONF.cigri-orig ] || cp -p $OARCONF $OARCONF.cigri-orig
cp -p $OARCONF.cigri-orig $OARCONF
touch "$O/oar.log"; chown oar:oar "$O/oar.log"
sed -i \
  -e "s|^DB_HOSTNAME=.*|DB_HOSTNAME=\"127.0.0.1\"|" \
  -e "s|^DB_PORT=.*|DB_PORT=\"$PG_PORT\"|" \
  -e "s|^DB_BASE_PASSWD=.*|DB_BASE_PASSWD=\"$OARPW\"|" \
  -e "s|^DB_BASE_PASSWD_RO=.*|DB_BASE_PASSWD_RO=\"$OARROPW\"|" \
  -e "s|^SERVER_HOSTNAME=.*|SERVER_HOSTNAME=\"localhost\"|" \
  -e "s|^LOG_FILE=.*|LOG_FILE=\"$O/oar.log\"|" \
  -e "s|^JOB_RESOURCE_MANAGER_PROPERTY_DB_FIELD=|#JOB_RESOURCE_MANAGER_PROPERTY_DB_FIELD=|" \
  $OARCONF
cat >> $OARCONF <<EOF

# ---- added by cigri tests/clusters/up.sh ($DIR); down.sh restores the original ----
# no cpuset/cgroup confinement (JOB_RESOURCE_MANAGER_PROPERTY_DB_FIELD unset above);
# run the scheduler on every notification (default: at most every 5 s, then the 10 s poll)
SCHEDULER_MIN_TIME_BETWEEN_2_CALLS="0"
EOF
oar-database --create --db-admin-user=postgres --db-admin-pass="$PGPW" -y >"$O/oar-database.log" 2>&1 \
  || { cat "$O/oar-database.log" >&2; die "oar-database --create failed"; }
oar-database --check >/dev/null || die "oar-database --check failed"
log "oar: database created"

# node side: the server launches every job as user oar through this sshd
/usr/sbin/sshd -f /etc/oar/sshd_config -o PidFile="$O/node-sshd.pid" \
  -o ListenAddress=127.0.0.1 -E "$O/node-sshd.log"
wait_file "$O/node-sshd.pid" 10 || die "oar node sshd did not start; see $O/node-sshd.log"
cp "$O/node-sshd.pid" "$DIR/pids/oar-node-sshd.pid"

# server: Almighty (forks as user oar; pid in /var/run/oar-server.pid).
# Almighty listens on 6666 with no local address (0.0.0.0), and OAR has no
# setting for it: this module, loaded into it and its children through PERL5OPT
# (its setuid wrapper keeps that variable), makes every listening
# IO::Socket::INET that names no address bind 127.0.0.1. No OAR file is changed.
mkdir -p "$O/perl"; chmod 755 "$O/perl"
cat > "$O/perl/CigriBindLoopback.pm" <<'PERL'
package CigriBindLoopback;
# generated by cigri tests/clusters/up.sh: listening sockets bind 127.0.0.1
use strict;
use warnings;
use IO::Socket::INET;
my $configure = \&IO::Socket::INET::configure;
{
    no warnings 'redefine';
    *IO::Socket::INET::configure = sub {
        my ($sock, $arg) = @_;
        $arg->{LocalAddr} = '127.0.0.1'
            if $arg->{Listen} && !defined $arg->{LocalAddr} && !defined $arg->{LocalHost};
        return $configure->(@_);
    };
}
1;
PERL
chmod 644 "$O/perl/CigriBindLoopback.pm"
rm -f /var/run/oar-server.pid
PERL5OPT="-I$O/perl -MCigriBindLoopback" /usr/sbin/oar-server
wait_file /var/run/oar-server.pid 10 || die "oar-server wrote no pid file; see $O/oar.log"
cp /var/run/oar-server.pid "$DIR/pids/oar-almighty.pid"
wait_tcp 6666 20 || { cat "$O/oar.log" >&2; die "Almighty not listening on 6666"; }
ss -Hltn 'sport = :6666' | grep -q '127.0.0.1:6666' || die "Almighty does not listen on 127.0.0.1:6666 only: $(ss -Hltn 'sport = :6666')"
log "oar: Almighty up"

oarproperty -q -c -a host
oarproperty -q -a cpu -a core
adders=""
for c in $(seq 0 $((CPUS - 1))); do   # in parallel: ~0.8 s of perl start-up each
  oarnodesetting -a -h localhost -p host=localhost -p cpu=0 -p core="$c" -p cpuset="$c" >/dev/null &
  adders="$adders $!"
done
for p in $adders; do wait "$p" || die "oarnodesetting failed"; done
alive_n=$(oarnodes -s | grep -c Alive || true)
[ "$alive_n" = $CPUS ] || die "oar: $alive_n resources Alive, expected $CPUS"
log "oar: $CPUS core resources Alive"

# REST API: private apache2 running as user oar (oarapi.cgi then needs neither
# suexec nor fastcgi). /oarapi-priv = HTTP basic auth, REMOTE_USER = OAR user;
# /oarapi = trusted-proxy mode (header "X-Remote-Ident: <user>").
A=$O/apache
htpasswd -bc "$A/htpasswd" "$TUSER" "$APIPW" 2>/dev/null; chmod 644 "$A/htpasswd"
chown oar:oar "$A/run"
M=/usr/lib/apache2/modules
cat > "$A/httpd.conf" <<EOF
# generated by tests/clusters/up.sh: OAR REST API on 127.0.0.1 only
ServerRoot /etc/apache2
ServerName localhost
Listen 127.0.0.1:$API_PORT
PidFile $A/httpd.pid
DefaultRuntimeDir $A/run
Mutex file:$A/run
User oar
Group oar
ErrorLog $A/error.log
LogLevel warn
LogFormat "%h %u %t \\"%r\\" %>s %b %D" short
CustomLog $A/access.log short
LoadModule mpm_prefork_module $M/mod_mpm_prefork.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule authz_host_module $M/mod_authz_host.so
LoadModule authz_user_module $M/mod_authz_user.so
LoadModule authn_core_module $M/mod_authn_core.so
LoadModule authn_file_module $M/mod_authn_file.so
LoadModule auth_basic_module $M/mod_auth_basic.so
LoadModule alias_module $M/mod_alias.so
LoadModule cgi_module $M/mod_cgi.so
LoadModule env_module $M/mod_env.so
LoadModule headers_module $M/mod_headers.so
LoadModule rewrite_module $M/mod_rewrite.so
LoadModule mime_module $M/mod_mime.so
TypesConfig /etc/mime.types
StartServers 2
MinSpareServers 1
MaxSpareServers 4
MaxRequestWorkers 16
DocumentRoot $A/htdocs
<Directory />
  Require all denied
</Directory>
ScriptAlias /oarapi /usr/lib/cgi-bin/oarapi/oarapi.cgi
ScriptAlias /oarapi-priv /usr/lib/cgi-bin/oarapi/oarapi.cgi
<Directory /usr/lib/cgi-bin/oarapi>
  Options +ExecCGI -MultiViews +FollowSymLinks
  SetEnv OARCONFFILE /etc/oar/oar.conf
  Require local
</Directory>
<Location /oarapi-priv>
  AuthType Basic
  AuthName "OAR API"
  AuthUserFile $A/htpasswd
  Require valid-user
  RequestHeader unset X-Remote-Ident
  RewriteEngine On
  RewriteCond %{REMOTE_USER} (.+)
  RewriteRule .* - [E=X_REMOTE_IDENT:%1]
</Location>
EOF
/usr/sbin/apache2 -t -f "$A/httpd.conf" >/dev/null 2>&1 || { /usr/sbin/apache2 -t -f "$A/httpd.conf"; die "bad apache config"; }
/usr/sbin/apache2 -f "$A/httpd.conf" -k start
wait_file "$A/httpd.pid" 10 || die "apache did not start; see $A/error.log"
cp "$A/httpd.pid" "$DIR/pids/oar-apache.pid"
wait_tcp "$API_PORT" 10 || die "apache not listening on $API_PORT"
API=http://127.0.0.1:$API_PORT
n=$(curl -fsS -u "$TUSER:$APIPW" "$API/oarapi-priv/resources.json" | sed -n 's/.*"total" *: *\([0-9]*\).*/\1/p')
[ "$n" = $CPUS ] || die "OAR REST API: $API/oarapi-priv/resources.json gave total '$n', expected $CPUS"
log "oar: REST API up at $API/oarapi-priv ($n resources)"

out=$(ssh -F "$S/ssh_config" oar 'oarnodes -s | grep -c Alive' 2>/dev/null || true)
[ "$out" = $CPUS ] || { cat "$S/oar/sshd.log" >&2; die "ssh front-end of oar: got '$out'"; }
log "sshd oar up on 127.0.0.1:$(ssh_port oar)"

# ------------------------------------------------------------- sudo (CIGRI_TEST_USERS)
# The front-ends' account runs exactly the batch commands as the test users: the rule
# docs/identity.md gives sites (plus SLURM_CONF kept, for one slurm.conf per test cluster).
if [ -n "$USERS" ]; then
  grep -qx '@includedir /etc/sudoers.d' /etc/sudoers || die "/etc/sudoers does not read /etc/sudoers.d"
  runas=$(printf '%s\n' $USERS | paste -sd, -)
  rule=$(mktemp)
  cat > "$rule" <<EOF
# generated by cigri tests/clusters/up.sh ($DIR); tests/clusters/down.sh removes it
Defaults:$TUSER !requiretty, !lecture, env_keep += "SLURM_CONF"
$TUSER ALL = ($runas) NOPASSWD: /usr/bin/sbatch, /usr/bin/scancel, /usr/bin/oarsub, /usr/bin/oardel, /usr/bin/tail, /usr/bin/tee
EOF
  visudo -cqf "$rule" || { rm -f "$rule"; die "visudo refuses the sudoers rule"; }
  install -m 0440 "$rule" "$SUDOERS"; rm -f "$rule"
  first=${USERS%% *}
  out=$(ssh -F "$S/ssh_config" slurm-a "sudo -n -u $first -- tail -n 1 /etc/hostname && ! sudo -n -u $first -- id" 2>/dev/null || true)
  [ "$out" = "$(tail -n 1 /etc/hostname)" ] || die "sudo as $first from the front-end: got '$out'"
  log "sudo: $TUSER runs sbatch, scancel, oarsub, oardel, tail and tee as $runas ($SUDOERS)"
fi

# ------------------------------------------------------------- outputs
# toml_slurm NAME CLUSTER ssh|rest PARTITION [BEST_EFFORT_PARTITION]: one cigri cluster entry;
# with IDENTITY=users (CIGRI_TEST_USERS), its jobs run as their owner
IDENTITY=account
toml_slurm() {
  printf '\n[clusters.%s]\nbackend = "slurm"\ntransport = "%s"\n' "$1" "$3"
  if [ "$3" = ssh ]; then
    printf 'host = "127.0.0.1"\nport = %s\nuser = "%s"\nkey_file = "%s"\nknown_hosts = "%s"\n' \
      "$(ssh_port "$2")" "$TUSER" "$S/id_ed25519" "$S/known_hosts"
    [ $IDENTITY = account ] || printf 'identity = "sudo"\n'
  elif [ $IDENTITY = account ]; then
    printf 'base_url = "http://127.0.0.1:%s"\nuser = "%s"\ntoken_file = "%s"\n' \
      "$(slurm_port "$2" 2)" "$TUSER" "$DIR/slurm/$2/jwt"
  else
    printf 'base_url = "http://127.0.0.1:%s"\nuser = "root"\ntoken_file = "%s"\nidentity = "impersonate"\n' \
      "$(slurm_port "$2" 2)" "$DIR/slurm/$2/jwt.slurmuser"
  fi
  printf 'partition = "%s"\n' "$4"
  [ -z "${5:-}" ] || printf 'best_effort_partition = "%s"\n' "$5"
}
toml_oar() {
  printf '\n[clusters.oar-rest]\nbackend = "oar"\ntransport = "rest"\n'
  if [ $IDENTITY = account ]; then
    printf 'base_url = "%s"\nuser = "%s"\npassword_file = "%s"\n' "$API/oarapi-priv" "$TUSER" "$O/oar_api_password"
  else
    printf 'base_url = "%s"\nuser = "%s"\nidentity = "ident"\nlogins = {%s}\n' "$API/oarapi" "$TUSER" \
      "$(for U in $USERS; do printf '"%s" = "%s", ' "$U" "$(oar_login "$U")"; done | sed 's/, $//')"
  fi
  printf '\n[clusters.oar-ssh]\nbackend = "oar"\ntransport = "ssh"\nhost = "127.0.0.1"\nport = %s\n' "$(ssh_port oar)"
  printf 'user = "%s"\nkey_file = "%s"\nknown_hosts = "%s"\n' "$TUSER" "$S/id_ed25519" "$S/known_hosts"
  [ $IDENTITY = account ] || printf 'identity = "sudo"\n'
}
clusters_toml() {
  if [ $IDENTITY = account ]; then who="Jobs run as $TUSER"; else who="Jobs run as their owner ($USERS; cigri's own as $TUSER)"; fi
  cat <<EOF
# cigri configuration for the test clusters of $DIR
# generated by tests/clusters/up.sh; stop them with tests/clusters/down.sh $DIR
# $who; $DIR/exec (mode 1777) is a directory they can all write.
# Slurm: $CPUS CPUs and 8000 MB per cluster (slurm-b allocates memory too); a job in
# partition "main" cancels (PREEMPTED) the "besteffort" jobs whose CPUs it needs. OAR: $CPUS cores; -t besteffort jobs are
# killed (state Error) when a normal job needs their cores.

[clusters.local]
backend = "local"
EOF
  toml_slurm slurm-a-ssh slurm-a ssh main besteffort
  toml_slurm slurm-a-rest slurm-a rest main besteffort
  toml_slurm slurm-b-ssh slurm-b ssh main besteffort
  toml_oar
}
clusters_toml > "$DIR/single.toml"
if [ -n "$USERS" ]; then
  IDENTITY=users
  clusters_toml > "$DIR/cigri.toml"
  cat > "$DIR/tokens.toml" <<EOF
# slurm-b over REST, each job with its owner's own token (gridtoken add slurm-b-rest-tokens;
# the users' tokens are $DIR/slurm/slurm-b/jwt.USER); polls with $TUSER's own
# (generated by tests/clusters/up.sh)

[clusters.slurm-b-rest-tokens]
backend = "slurm"
transport = "rest"
base_url = "http://127.0.0.1:$(slurm_port slurm-b 2)"
user = "$TUSER"
token_file = "$DIR/slurm/slurm-b/jwt"
identity = "tokens"
partition = "main"
EOF
else
  cp "$DIR/single.toml" "$DIR/cigri.toml"
fi
IDENTITY=account  # limits.toml: the limits of the front-ends' account
cat > "$DIR/env.sh" <<EOF
# source me: variables for the test clusters of $DIR (generated by up.sh)
export CIGRI_CONFIG=$DIR/cigri.toml
export CIGRI_TEST_CLUSTERS=$DIR
export CIGRI_TEST_USER=$TUSER
# CIGRI_TEST_USERS (jobs run as their owner in cigri.toml; single.toml: every job as $TUSER)
export CIGRI_TEST_USERS="$USERS"
export CIGRI_SINGLE_CONFIG=$DIR/single.toml
export CIGRI_TEST_EXEC_DIR=$DIR/exec
# Slurm: \`SLURM_CONF=\$SLURM_A_CONF sinfo\` (as root; munge socket $MSOCK)
export SLURM_A_CONF=$DIR/slurm/slurm-a/slurm.conf
export SLURM_B_CONF=$DIR/slurm/slurm-b/slurm.conf
# slurm-b only: accounting (sacct, sacctmgr) through slurmdbd 127.0.0.1:$DBD_PORT, MariaDB 127.0.0.1:$MARIADB_PORT;
# its partition capped is limited to $CAPPED_MAX_SUBMIT jobs per user (QOS capped), its partition walled
# leaves a job longer than $WALLED_MAX_WALL pending (QOS walled); cigri entries in CIGRI_LIMITS_CONFIG
export CIGRI_LIMITS_CONFIG=$DIR/limits.toml
export SLURM_CAPPED_MAX_SUBMIT=$CAPPED_MAX_SUBMIT
export SLURM_A_REST_URL=http://127.0.0.1:$(slurm_port slurm-a 2)
export SLURM_B_REST_URL=http://127.0.0.1:$(slurm_port slurm-b 2)
# JWT files (send X-SLURM-USER-NAME: $TUSER and X-SLURM-USER-TOKEN: \$(cat file));
# deliberately not SLURM_JWT, which makes the Slurm CLI use the token instead of munge
export SLURM_A_TOKEN_FILE=$DIR/slurm/slurm-a/jwt
export SLURM_B_TOKEN_FILE=$DIR/slurm/slurm-b/jwt
# SSH front-ends: ssh -F \$CIGRI_SSH_CONFIG slurm-a|slurm-b|oar
export CIGRI_SSH_CONFIG=$S/ssh_config
export CIGRI_SSH_KEY=$S/id_ed25519
export CIGRI_SSH_KNOWN_HOSTS=$S/known_hosts
export SLURM_A_SSH_PORT=$(ssh_port slurm-a)
export SLURM_B_SSH_PORT=$(ssh_port slurm-b)
export OAR_SSH_PORT=$(ssh_port oar)
# OAR: curl -u $TUSER:\$(cat \$OAR_API_PASSWORD_FILE) \$OAR_API_PRIV_URL/resources.json
export OAR_API_URL=$API/oarapi
export OAR_API_PRIV_URL=$API/oarapi-priv
export OAR_API_PASSWORD_FILE=$O/oar_api_password
export OAR_PG_PORT=$PG_PORT
export OAR_LOG=$O/oar.log
EOF
{
  cat <<EOF
# cigri clusters on slurm-b's partitions with site limits (generated by tests/clusters/up.sh)
# capped: MaxSubmitJobsPerUser = $CAPPED_MAX_SUBMIT through partition QOS capped (a further job of $TUSER
# in this partition is refused at submission; array tasks count one each)
# walled: MaxWall = $WALLED_MAX_WALL through partition QOS walled, without DenyOnLimit (a longer
# job is accepted and pends forever, reason QOSMaxWallDurationPerJobLimit)
# Not part of cigri.toml on purpose: the conformance suite runs against every cluster there.
EOF
  toml_slurm slurm-b-capped-ssh slurm-b ssh capped
  toml_slurm slurm-b-capped-rest slurm-b rest capped
  toml_slurm slurm-b-walled-ssh slurm-b ssh walled
  toml_slurm slurm-b-walled-rest slurm-b rest walled
} > "$DIR/limits.toml"
chmod 644 "$DIR/cigri.toml" "$DIR/single.toml" "$DIR/env.sh" "$DIR/limits.toml"
[ -z "$USERS" ] || chmod 644 "$DIR/tokens.toml"

{
  echo "test clusters up in $(elapsed)s (packages ${T_PKG}s); state in $DIR"
  echo "  config: $DIR/cigri.toml   env: source $DIR/env.sh   exec dir: $DIR/exec"
  for C in $SLURM_CLUSTERS; do
    if [ "$C" = "$ACCT_CLUSTER" ]; then parts="main + besteffort + capped + walled"; else parts="main + besteffort"; fi
    echo "  $C: slurmctld 127.0.0.1:$(slurm_port "$C" 0)  slurmd :$(slurm_port "$C" 1)  slurmrestd http://127.0.0.1:$(slurm_port "$C" 2)  ssh :$(ssh_port "$C")  ($CPUS CPUs, partitions $parts)"
  done
  echo "  accounting: $ACCT_CLUSTER only: slurmdbd 127.0.0.1:$DBD_PORT  MariaDB 127.0.0.1:$MARIADB_PORT  (sacct; account $ACCT_ACCOUNT: root, $TUSER$(for U in $USERS; do printf ', %s' "$U"; done))"
  echo "  limits: $ACCT_CLUSTER partition capped, MaxSubmitJobsPerUser=$CAPPED_MAX_SUBMIT (partition QOS capped)"
  echo "          $ACCT_CLUSTER partition walled, MaxWall=$WALLED_MAX_WALL without DenyOnLimit (partition QOS walled)"
  echo "          cigri entries in $DIR/limits.toml"
  echo "  oar: REST $API/oarapi-priv  ssh :$(ssh_port oar)  postgres :$PG_PORT  Almighty :6666  node sshd :6667  ($CPUS cores)"
  echo "  ssh: ssh -F $S/ssh_config slurm-a|slurm-b|oar    stop: $HERE/down.sh $DIR"
  if [ -n "$USERS" ]; then
    echo "  users: jobs run as their owner ($USERS) in cigri.toml (sudo rule $SUDOERS, slurmrestd impersonation,"
    echo "         OAR's trusted front; tokens.toml: slurm-b with each user's token); single.toml: every job as $TUSER"
  else
    echo "  users: every job runs as $TUSER (CIGRI_TEST_USERS=\"u1 u2\": as their owner)"
  fi
} > "$DIR/summary.txt"
printf '%s' "$USERS" > "$DIR/users"
touch "$DIR/.up-complete"
cat "$DIR/summary.txt"
