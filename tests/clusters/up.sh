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
#   - one sshd per cluster front-end (slurm-a, slurm-b, oar, gridengine) for user gridtest,
#     with a generated client key and a known_hosts; the Slurm ones set
#     SLURM_CONF (sshd SetEnv) so a plain `sbatch` hits that cluster;
#   - OAR 2.5.9: private PostgreSQL, server (Almighty), node, 8 core resources,
#     REST API in a private apache2;
#   - Son of Grid Engine 8.1.9 in a cell of its own, `cigri` (linked as
#     /var/lib/gridengine/cigri, its files in DIR/gridengine): qmaster and execd on this host,
#     queue all.q (8 slots, the default of a plain qsub), parallel environment smp
#     ($pe_slots: a job's slots on one host), best-effort queue besteffort.q (8 slots; slot-wise
#     subordinate of all.q: beyond 8 tasks running in both, the youngest besteffort.q task is
#     suspended, which its suspend_method SIGKILL turns into a kill), h_vmem consumable
#     (8000M per queue, 1000M per slot unless a job asks), accounting flushed every second
#     (qacct), a scheduling run every second; its front-end sshd sets SGE_ROOT, SGE_CELL and
#     the ports;
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
# CIGRI_CLUSTERS_SSH_PORT=2222 (slurm-a; slurm-b +1, oar +2, gridengine +3),
# CIGRI_CLUSTERS_OAR_PG_PORT=15432, CIGRI_CLUSTERS_OAR_API_PORT=6668,
# CIGRI_CLUSTERS_SGE_PORT=16444 (sge_qmaster; sge_execd +1).
# OAR also uses 6666 (Almighty) and 6667 (node sshd), fixed by the package, and
# /etc/oar/oar.conf (restored by down.sh): one OAR, hence one DIR, per host; Grid
# Engine's cell is /var/lib/gridengine/cigri (its cells live there): one per host too.
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
SGE_PORT=${CIGRI_CLUSTERS_SGE_PORT:-16444}
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
      apache2 apache2-utils libyaml-perl libyaml-syck-perl libxml-dumper-perl
      gridengine-master gridengine-exec gridengine-client"
OARCONF=/etc/oar/oar.conf
SGE_ROOT=/var/lib/gridengine   # Debian's; every cell lives under it
SGE_CELL=cigri
# Grid Engine: all.q takes the jobs that name no queue, besteffort.q the best-effort ones,
# smp gives a job several slots on one host, h_vmem is the memory a job asks (per slot)
SGE_QUEUE=all.q
SGE_BEST_EFFORT_QUEUE=besteffort.q
SGE_PE=smp
SGE_MEMORY=8000M          # h_vmem of each queue on the host (as Slurm's nodes have 8000 MB)
SGE_MEMORY_DEFAULT=1000M  # h_vmem of a slot whose job asks none: 8 of them fill the 8000M

slurm_port() { # CLUSTER OFFSET
  local i=0 c
  for c in $SLURM_CLUSTERS; do [ "$c" = "$1" ] && break; i=$((i + 1)); done
  echo $((SLURM_PORT + 10 * i + $2))
}
ssh_port() {
  case $1 in slurm-a) echo "$SSH_PORT" ;; slurm-b) echo $((SSH_PORT + 1)) ;; oar) echo $((SSH_PORT + 2)) ;;
    gridengine) echo $((SSH_PORT + 3)) ;; esac
}
all_ports() {
  local c
  for c in $SLURM_CLUSTERS; do echo "$(slurm_port "$c" 0) $(slurm_port "$c" 1) $(slurm_port "$c" 2) $(ssh_port "$c")"; done
  echo "$DBD_PORT $MARIADB_PORT"
  echo "$(ssh_port oar) $PG_PORT $API_PORT 6666 6667"
  echo "$(ssh_port gridengine) $SGE_PORT $((SGE_PORT + 1))"
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
CELL_LINK=$SGE_ROOT/$SGE_CELL
if { [ -e "$CELL_LINK" ] || [ -L "$CELL_LINK" ]; } && [ "$(readlink "$CELL_LINK")" != "$DIR/gridengine/cell" ]; then
  die "$CELL_LINK exists and is not this DIR's Grid Engine cell (another instance? run down.sh on its DIR)"
fi

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
if ! dpkg-query -W -f='${Status}' gridengine-common 2>/dev/null | grep -q "ok installed"; then
  # else the packages make (and start) a cell "default" of their own
  printf 'gridengine-%s shared/gridengineconfig boolean false\n' common master client | debconf-set-selections
fi
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

# ------------------------------------------------------------- Grid Engine
# Started first: its execd takes ~2 s to report its load, which the other clusters' start
# hides; it is waited for after OAR. What Debian's init_cluster does, into a cell of our own;
# the daemons stay in the foreground (SGE_ND), so that $! is their PID.
G=$DIR/gridengine
export SGE_ROOT SGE_CELL SGE_QMASTER_PORT=$SGE_PORT SGE_EXECD_PORT=$((SGE_PORT + 1))
SGE_HOST=$(hostname)
mkdir -p "$G/cell/common" "$G/qmaster" "$G/execd" "$G/spooldb" "$G/tmp" "$G/log"
chmod 755 "$G" "$G/log"
chmod 1777 "$G/tmp"   # the queues' tmpdir, parent of each job's $TMPDIR
# for qstat, qconf, qacct as root (and down.sh)
printf 'export %s\n' "SGE_ROOT=$SGE_ROOT" "SGE_CELL=$SGE_CELL" "SGE_QMASTER_PORT=$SGE_QMASTER_PORT" \
  "SGE_EXECD_PORT=$SGE_EXECD_PORT" > "$G/env.sh"
ln -sfn "$G/cell" "$CELL_LINK"
cat > "$G/cell/common/bootstrap" <<EOF
# generated by tests/clusters/up.sh: cell $SGE_CELL of $DIR
admin_user              sgeadmin
default_domain          none
ignore_fqdn             true
spooling_method         berkeleydb
spooling_lib            libspoolb
spooling_params         $G/spooldb
binary_path             /usr/sbin
qmaster_spool_dir       $G/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
echo "$SGE_HOST" > "$G/cell/common/act_qmaster"
# SGE checks the name a client gives for itself against the reverse lookup of its address:
# 127.0.0.1 is "localhost", not "$SGE_HOST" ("access denied"), unless they are aliases
loopback=$(getent hosts 127.0.0.1 | awk '{print $2; exit}')
[ -z "$loopback" ] || [ "$loopback" = "$SGE_HOST" ] || echo "$SGE_HOST $loopback" > "$G/cell/common/host_aliases"
# the cell's default request: a plain qsub goes to $SGE_QUEUE, never to the best-effort queue
echo "-q $SGE_QUEUE" > "$G/cell/common/sge_request"
# min_uid/min_gid: SGE refuses the jobs of lower ids (root's), never the test users'
lowest() { sort -n | head -1; }
min_uid=$( { echo 1000; for U in "$TUSER" $USERS; do id -u "$U"; done; } | lowest)
min_gid=$( { echo 1000; for U in "$TUSER" $USERS; do id -g "$U"; done; } | lowest)
# the execd's spool in G; accounting (qacct) flushed every second
sed -e "s|^execd_spool_dir .*|execd_spool_dir        $G/execd|" \
  -e "s|^min_uid .*|min_uid                $min_uid|" -e "s|^min_gid .*|min_gid                $min_gid|" \
  -e "s|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:15 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:01|" \
  /usr/share/gridengine/default-configuration > "$G/global.conf"
grep -q "accounting_flush_time=00:00:01" "$G/global.conf" || die "gridengine: unexpected default-configuration"
# h_vmem: a consumable, $SGE_MEMORY_DEFAULT per slot unless a job asks (-l h_vmem=...)
cp -r /usr/share/gridengine/util/resources/centry "$G/centry"
sed -i -e 's/^consumable .*/consumable  YES/' -e "s/^default .*/default     $SGE_MEMORY_DEFAULT/" "$G/centry/h_vmem"
chown -R sgeadmin:sgeadmin "$G/cell" "$G/qmaster" "$G/execd" "$G/spooldb"
chmod 755 "$G/cell" "$G/cell/common"; chmod 644 "$G/global.conf"; chmod -R a+rX "$G/centry"
runuser -u sgeadmin -- sh -c "
  set -e
  /usr/lib/gridengine/spoolinit berkeleydb libspoolb '$G/spooldb' init
  /usr/lib/gridengine/spooldefaults configuration '$G/global.conf'
  /usr/lib/gridengine/spooldefaults complexes '$G/centry'
  /usr/lib/gridengine/spooldefaults usersets /usr/share/gridengine/util/resources/usersets
  /usr/lib/gridengine/spooldefaults managers sgeadmin" >"$G/log/init.log" 2>&1 \
  || { cat "$G/log/init.log" >&2; die "gridengine: spool initialisation failed"; }
SGE_ND=1 setsid /usr/sbin/sge_qmaster </dev/null >"$G/log/sge_qmaster.out" 2>&1 &
echo $! > "$DIR/pids/gridengine-qmaster.pid"
for _ in $(seq 1 300); do qstat >/dev/null 2>&1 && break; sleep 0.1; done
qstat >/dev/null || { cat "$G/log/sge_qmaster.out" "$G/qmaster/messages" >&2; die "gridengine: sge_qmaster does not answer on $SGE_PORT"; }
# sgeconf ARGS: qconf, its words logged (-A: add from a file, -M: modify from one)
sgeconf() { qconf "$@" >>"$G/log/qconf.log" 2>&1 || { cat "$G/log/qconf.log" >&2; die "gridengine: qconf $*"; }; }
sgeconf -as "$SGE_HOST"
# a scheduling run every second and one second after a submission or an end (default: 15 s)
qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval                 0:0:1/' \
  -e 's/^flush_submit_sec .*/flush_submit_sec                  1/' \
  -e 's/^flush_finish_sec .*/flush_finish_sec                  1/' > "$G/sched.conf"
sgeconf -Msconf "$G/sched.conf"
# a job's slots all on one host; the PE's own count is no limit (both queues draw on it,
# and best-effort jobs holding it would keep a normal job from starting): the queues' is
cat > "$G/$SGE_PE.pe" <<EOF
pe_name            $SGE_PE
slots              9999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    \$pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
sgeconf -Ap "$G/$SGE_PE.pe"
# sge_queue QNAME SEQ_NO SUBORDINATES SUSPEND_METHOD: a queue of $CPUS slots on this host,
# with no load threshold ($CPUS slots on fewer cores would put it in alarm) and an h_vmem
# of its own (one of the host would stay held by the best-effort jobs a normal job
# preempts, which then never starts)
sge_queue() {
  cat <<EOF
qname                 $1
hostlist              $SGE_HOST
seq_no                $2
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH
ckpt_list             NONE
pe_list               $SGE_PE
rerun                 FALSE
slots                 $CPUS
tmpdir                $G/tmp
shell                 /bin/sh
prolog                NONE
epilog                NONE
shell_start_mode      unix_behavior
starter_method        NONE
suspend_method        $4
resume_method         NONE
terminate_method      NONE
notify                00:00:30
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      $3
complex_values        h_vmem=$SGE_MEMORY
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
EOF
  for limit in rt cpu fsize data stack core rss vmem; do printf 's_%-20sINFINITY\nh_%-20sINFINITY\n' $limit $limit; done
}
# preemption: beyond $CPUS tasks running in both queues on the host, the youngest best-effort
# task is suspended (Grid Engine's only preemption), which its suspend_method makes a kill
sge_queue "$SGE_BEST_EFFORT_QUEUE" 1 NONE SIGKILL > "$G/$SGE_BEST_EFFORT_QUEUE"
sge_queue "$SGE_QUEUE" 0 "slots=$CPUS($SGE_BEST_EFFORT_QUEUE:0:sr)" NONE > "$G/$SGE_QUEUE"
sgeconf -Aq "$G/$SGE_BEST_EFFORT_QUEUE"   # registers $SGE_HOST as an execution host too
sgeconf -Aq "$G/$SGE_QUEUE"
SGE_ND=1 setsid /usr/sbin/sge_execd </dev/null >"$G/log/sge_execd.out" 2>&1 &
echo $! > "$DIR/pids/gridengine-execd.pid"
log "gridengine: sge_qmaster up on 127.0.0.1:$SGE_PORT, sge_execd started"

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
FRONT_ENDS="slurm-a slurm-b oar gridengine"
for N in $FRONT_ENDS; do
  mkdir -p "$S/$N"; chmod 755 "$S/$N"
  P=$(ssh_port "$N")
  ssh-keygen -q -t ed25519 -N '' -C "$N" -f "$S/$N/host_ed25519_key"
  case $N in
    slurm-*) setenv="SetEnv SLURM_CONF=$DIR/slurm/$N/slurm.conf" ;;
    gridengine) setenv="SetEnv SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL SGE_QMASTER_PORT=$SGE_QMASTER_PORT SGE_EXECD_PORT=$SGE_EXECD_PORT" ;;
    *) setenv="" ;;
  esac
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
for N in $FRONT_ENDS; do
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

# ------------------------------------------------------------- Grid Engine: ready
# once the execd has reported its load: the queue instances lose their states ("au": alarm,
# unknown) and the front-end sees the slots of both queues
sge_unready() {
  qstat -f 2>/dev/null | awk -v host="@$SGE_HOST" -v queues="$SGE_QUEUE $SGE_BEST_EFFORT_QUEUE" '
    BEGIN { n = split(queues, q, " "); for (i = 1; i <= n; i++) left[q[i] host] = 1 }
    $1 in left && $6 == "" { delete left[$1] }
    END { for (k in left) printf "%s ", k }'
}
for _ in $(seq 1 300); do [ -z "$(sge_unready)" ] && break; sleep 0.1; done
[ -z "$(sge_unready)" ] || { qstat -f >&2; die "gridengine: not ready: $(sge_unready)(see $G/log and $G/execd/*/messages)"; }
out=$(ssh -F "$S/ssh_config" gridengine 'qstat -g c' 2>/dev/null \
      | awk -v a="$SGE_QUEUE" -v b="$SGE_BEST_EFFORT_QUEUE" '$1 == a || $1 == b { printf "%s=%s ", $1, $6 }' || true)
[ "$out" = "$SGE_QUEUE=$CPUS $SGE_BEST_EFFORT_QUEUE=$CPUS " ] \
  || { cat "$S/gridengine/sshd.log" >&2; die "ssh front-end of gridengine: qstat -g c gave '$out'"; }
log "gridengine: ready, $SGE_QUEUE and $SGE_BEST_EFFORT_QUEUE of $CPUS slots; sshd up on 127.0.0.1:$(ssh_port gridengine)"

# ------------------------------------------------------------- sudo (CIGRI_TEST_USERS)
# The front-ends' account runs exactly the batch commands as the test users: the rule
# docs/identity.md gives sites (plus SLURM_CONF kept, for one slurm.conf per test cluster, and
# Grid Engine's cell and ports, which a site's front-end sets in every login's environment).
if [ -n "$USERS" ]; then
  grep -qx '@includedir /etc/sudoers.d' /etc/sudoers || die "/etc/sudoers does not read /etc/sudoers.d"
  runas=$(printf '%s\n' $USERS | paste -sd, -)
  rule=$(mktemp)
  cat > "$rule" <<EOF
# generated by cigri tests/clusters/up.sh ($DIR); tests/clusters/down.sh removes it
Defaults:$TUSER !requiretty, !lecture, env_keep += "SLURM_CONF SGE_ROOT SGE_CELL SGE_QMASTER_PORT SGE_EXECD_PORT"
$TUSER ALL = ($runas) NOPASSWD: /usr/bin/sbatch, /usr/bin/scancel, /usr/bin/oarsub, /usr/bin/oardel, /usr/bin/qsub, /usr/bin/qdel, /usr/bin/tail, /usr/bin/tee
EOF
  visudo -cqf "$rule" || { rm -f "$rule"; die "visudo refuses the sudoers rule"; }
  install -m 0440 "$rule" "$SUDOERS"; rm -f "$rule"
  first=${USERS%% *}
  out=$(ssh -F "$S/ssh_config" slurm-a "sudo -n -u $first -- tail -n 1 /etc/hostname && ! sudo -n -u $first -- id" 2>/dev/null || true)
  [ "$out" = "$(tail -n 1 /etc/hostname)" ] || die "sudo as $first from the front-end: got '$out'"
  # and Grid Engine's environment reaches qsub (-w v: checks that the job could run, submits nothing)
  out=$(ssh -F "$S/ssh_config" gridengine "sudo -n -u $first -- qsub -w v -b y -shell no /bin/true" 2>&1 || true)
  grep -q "found suitable queue" <<<"$out" || die "sudo qsub as $first from the gridengine front-end: got '$out'"
  log "sudo: $TUSER runs sbatch, scancel, oarsub, oardel, qsub, qdel, tail and tee as $runas ($SUDOERS)"
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
toml_gridengine() {
  printf '\n[clusters.gridengine-ssh]\nbackend = "gridengine"\ntransport = "ssh"\nhost = "127.0.0.1"\nport = %s\n' \
    "$(ssh_port gridengine)"
  printf 'user = "%s"\nkey_file = "%s"\nknown_hosts = "%s"\n' "$TUSER" "$S/id_ed25519" "$S/known_hosts"
  [ $IDENTITY = account ] || printf 'identity = "sudo"\n'
  printf 'queue = "%s"\nparallel_environment = "%s"\nbest_effort_queue = "%s"\nmemory_complex = "h_vmem"\n' \
    "$SGE_QUEUE" "$SGE_PE" "$SGE_BEST_EFFORT_QUEUE"
}
# what the Grid Engine cluster is, for the comments of the files that hold it
GRIDENGINE_COMMENT="# Grid Engine: queue $SGE_QUEUE, $CPUS slots and h_vmem $SGE_MEMORY ($SGE_MEMORY_DEFAULT a slot unless asked), parallel
# environment $SGE_PE; a job in $SGE_QUEUE beyond $CPUS running tasks has the youngest $SGE_BEST_EFFORT_QUEUE task killed."
jobs_run_as() {
  if [ $IDENTITY = account ]; then echo "Jobs run as $TUSER"; else echo "Jobs run as their owner ($USERS; cigri's own as $TUSER)"; fi
}
clusters_toml() {
  cat <<EOF
# cigri configuration for the test clusters of $DIR
# generated by tests/clusters/up.sh; stop them with tests/clusters/down.sh $DIR
# $(jobs_run_as); $DIR/exec (mode 1777) is a directory they can all write.
# Slurm: $CPUS CPUs and 8000 MB per cluster (slurm-b allocates memory too); a job in
# partition "main" cancels (PREEMPTED) the "besteffort" jobs whose CPUs it needs. OAR: $CPUS cores; -t besteffort jobs are
# killed (state Error) when a normal job needs their cores.
EOF
  echo "$GRIDENGINE_COMMENT"
  printf '\n[clusters.local]\nbackend = "local"\n'
  toml_slurm slurm-a-ssh slurm-a ssh main besteffort
  toml_slurm slurm-a-rest slurm-a rest main besteffort
  toml_slurm slurm-b-ssh slurm-b ssh main besteffort
  toml_oar
  toml_gridengine
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
# SSH front-ends: ssh -F \$CIGRI_SSH_CONFIG slurm-a|slurm-b|oar|gridengine
export CIGRI_SSH_CONFIG=$S/ssh_config
export CIGRI_SSH_KEY=$S/id_ed25519
export CIGRI_SSH_KNOWN_HOSTS=$S/known_hosts
export SLURM_A_SSH_PORT=$(ssh_port slurm-a)
export SLURM_B_SSH_PORT=$(ssh_port slurm-b)
export OAR_SSH_PORT=$(ssh_port oar)
export GRIDENGINE_SSH_PORT=$(ssh_port gridengine)
# OAR: curl -u $TUSER:\$(cat \$OAR_API_PASSWORD_FILE) \$OAR_API_PRIV_URL/resources.json
export OAR_API_URL=$API/oarapi
export OAR_API_PRIV_URL=$API/oarapi-priv
export OAR_API_PASSWORD_FILE=$O/oar_api_password
export OAR_PG_PORT=$PG_PORT
export OAR_LOG=$O/oar.log
# Grid Engine, cell $SGE_CELL: qstat -f, qconf, qacct -j ID (as root, or over ssh as $TUSER)
export SGE_ROOT=$SGE_ROOT
export SGE_CELL=$SGE_CELL
export SGE_QMASTER_PORT=$SGE_QMASTER_PORT
export SGE_EXECD_PORT=$SGE_EXECD_PORT
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
  echo "  gridengine: cell $SGE_CELL  sge_qmaster 127.0.0.1:$SGE_QMASTER_PORT  sge_execd :$SGE_EXECD_PORT  ssh :$(ssh_port gridengine)  ($CPUS slots, queues $SGE_QUEUE + $SGE_BEST_EFFORT_QUEUE, PE $SGE_PE, h_vmem)"
  echo "  ssh: ssh -F $S/ssh_config slurm-a|slurm-b|oar|gridengine    stop: $HERE/down.sh $DIR"
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
