#!/usr/bin/env bash
# Stop what up.sh DIR started, by the PIDs it recorded in DIR/pids (plus their
# descendants where a daemon forks per connection or per job), restore
# /etc/oar/oar.conf and Grid Engine's cell link, and remove the state in DIR (KEEP_STATE=1 keeps it, e.g.
# for the logs).  Idempotent: a second run, or a run on an absent DIR, does nothing.
# Jobs still queued or running are cancelled first so that the batch systems
# kill their own processes.  slurm-b's slurmdbd and MariaDB stop after the
# slurmctlds (pending accounting records flushed); Grid Engine's qmaster, whose
# shutdown takes seconds, stops beside the others.  Left in place: Debian
# packages, users gridtest, slurmrest and the CIGRI_TEST_USERS, /run/sshd.
# usage: down.sh DIR     (as root)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root
[ $# = 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$(realpath -m "$1")
unset SLURM_JWT SLURM_CONF
OARCONF=/etc/oar/oar.conf
SUDOERS=/etc/sudoers.d/cigri-tests
CELL_LINK=/var/lib/gridengine/cigri   # up.sh's SGE_ROOT/SGE_CELL

restore_oar_conf() {
  if [ -f $OARCONF.cigri-orig ]; then
    cp -p $OARCONF.cigri-orig $OARCONF && rm -f $OARCONF.cigri-orig
    log "restored $OARCONF"
  fi
}
if [ ! -f "$DIR/.cigri-clusters" ]; then
  log "nothing to stop ($DIR has no up.sh state)"
  # oar.conf is only edited while some DIR's OAR runs; restore it if no OAR does
  [ -f $OARCONF.cigri-orig ] && ! listening 6666 && restore_oar_conf
  exit 0
fi
pid_of() { cat "$DIR/pids/$1.pid" 2>/dev/null; }
# stop NAME [descendants-too] [TIMEOUT]
stop() {
  local p kids=""
  p=$(pid_of "$1")
  if alive "$p"; then
    [ "${2:-0}" = 1 ] && kids=$(descendants "$p")
    # shellcheck disable=SC2086
    stop_pids "${3:-10}" "$p" $kids
    # shellcheck disable=SC2086 # one pid per word
    log "stopped $1 ($p${kids:+ +$(printf ' %s' $kids)})"
  fi
  rm -f "$DIR/pids/$1.pid"
}

# 1. cancel jobs, so that slurmd / OAR reap their job processes themselves
for C in slurm-a slurm-b; do
  conf=$DIR/slurm/$C/slurm.conf
  { [ -f "$conf" ] && alive "$(pid_of "$C-slurmctld")"; } || continue
  if [ -n "$(SLURM_CONF=$conf timeout 10 squeue -h -t PD,R,CG,S -o %i 2>/dev/null)" ]; then
    log "slurm $C: cancelling remaining jobs"
    # by partition, not by id: 22.05 rejects an array task's own job id
    parts=$(SLURM_CONF=$conf timeout 10 sinfo -h -o %R 2>/dev/null | sort -u)
    for part in ${parts:-main besteffort}; do SLURM_CONF=$conf timeout 10 scancel -p "$part" 2>/dev/null || true; done
  fi
done
sge_jobs() { timeout 10 qstat -u '*' 2>/dev/null | awk 'NR > 2 { print $1 }' | sort -u; }
if alive "$(pid_of gridengine-qmaster)" && [ -f "$DIR/gridengine/env.sh" ]; then
  # shellcheck disable=SC1091 # SGE_ROOT, SGE_CELL and the ports
  . "$DIR/gridengine/env.sh"
  sge_ids=$(sge_jobs | tr '\n' ' ')
  if [ -n "${sge_ids// /}" ]; then
    log "gridengine: qdel $sge_ids"
    # shellcheck disable=SC2086
    timeout 10 qdel $sge_ids >/dev/null 2>&1 || true
  fi
fi
if alive "$(pid_of oar-almighty)"; then
  ids=$(oarstat -J 2>/dev/null | sed -n 's/^   "\([0-9][0-9]*\)" : {/\1/p' | tr '\n' ' ')
  if [ -n "${ids// /}" ]; then
    log "oar: oardel $ids"
    # shellcheck disable=SC2086
    timeout 30 oardel $ids >/dev/null 2>&1 || true
  fi
fi
for C in slurm-a slurm-b; do
  conf=$DIR/slurm/$C/slurm.conf
  { [ -f "$conf" ] && alive "$(pid_of "$C-slurmctld")"; } || continue
  for _ in $(seq 1 100); do
    [ -z "$(SLURM_CONF=$conf timeout 5 squeue -h -t R,CG,S -o %A 2>/dev/null)" ] && break
    sleep 0.1
  done
done
if alive "$(pid_of gridengine-qmaster)" && [ -n "${sge_ids:-}" ]; then
  for _ in $(seq 1 100); do [ -z "$(sge_jobs)" ] && break; sleep 0.1; done
fi
if alive "$(pid_of oar-almighty)" && [ -n "${ids:-}" ]; then
  for _ in $(seq 1 100); do
    [ -z "$(oarstat -J 2>/dev/null | sed -n 's/^   "\([0-9][0-9]*\)" : {/\1/p')" ] && break
    sleep 0.2
  done
fi

# 2. front-ends and REST APIs (sessions and CGIs with them); Grid Engine meanwhile: the execd
# (with the shepherds and jobs still under it) and the qmaster, killed if its shutdown (~9 s:
# it saves the state down.sh then removes) takes more than 3 s
stop gridengine-execd 1 10 & sge_stopping=$!
stop gridengine-qmaster 0 3 & sge_stopping="$sge_stopping $!"
stopping=""
for N in slurm-a slurm-b oar gridengine; do stop "sshd-$N" 1 5 & stopping="$stopping $!"; done
stop oar-apache 0 10 & stopping="$stopping $!"
stop slurm-a-slurmrestd 0 10 & stopping="$stopping $!"
stop slurm-b-slurmrestd 0 10 & stopping="$stopping $!"
# shellcheck disable=SC2086
wait $stopping
# 3. OAR server (+ its bipbip/oarexec/scheduler children), node sshd, PostgreSQL
stop oar-almighty 1 10
[ -f /var/run/oar-server.pid ] && ! alive "$(cat /var/run/oar-server.pid)" && rm -f /var/run/oar-server.pid
stop oar-node-sshd 1 5
p=$(pid_of postgres)
if alive "$p"; then
  PGBIN=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/oar/pg/data" -m fast -w -t 30 stop >/dev/null 2>&1 || stop_pids 10 "$p"
  log "stopped postgres ($p)"
fi
rm -f "$DIR/pids/postgres.pid"
restore_oar_conf
# 4. Slurm: slurmd, then slurmctld (~1-3 s), munged last
stop slurm-a-slurmd 0 15 & stop slurm-b-slurmd 0 15; wait $!
stop slurm-a-slurmctld 0 15 & stop slurm-b-slurmctld 0 15; wait $!
# slurm-b's accounting: slurmdbd (needs munged, writes to MariaDB), then MariaDB
stop slurmdbd 0 15
stop mariadb 0 30
stop munged 0 5
# shellcheck disable=SC2086
wait $sge_stopping
if [ -L "$CELL_LINK" ] && [ "$(readlink "$CELL_LINK")" = "$DIR/gridengine/cell" ]; then rm -f "$CELL_LINK"; fi
# 5. anything up.sh recorded that is not handled above
for f in "$DIR"/pids/*.pid; do [ -e "$f" ] && stop "$(basename "$f" .pid)" 1 5; done
# 6. job processes that outlived their batch system (user reserved for these tests; the
# CIGRI_TEST_USERS are shared with other tests: their jobs were cancelled above), and the sudo
# rule for the test users (if up.sh made it for this DIR)
left=$(pgrep -u "$CC_USER" 2>/dev/null | tr '\n' ' ')
if [ -n "${left// /}" ]; then
  log "killing leftover processes of $CC_USER: $left"
  # shellcheck disable=SC2086
  stop_pids 5 $left
fi
if grep -qs "($DIR)" "$SUDOERS"; then rm -f "$SUDOERS"; log "removed $SUDOERS"; fi

rm -f "$DIR/.up-complete"
if [ "${KEEP_STATE:-0}" = 1 ]; then
  log "stopped; state and logs kept in $DIR"
else
  rm -rf "$DIR/pids" "$DIR/munge" "$DIR/slurm" "$DIR/ssh" "$DIR/oar" "$DIR/exec" "$DIR/mariadb" "$DIR/gridengine" \
         "$DIR/cigri.toml" "$DIR/single.toml" "$DIR/tokens.toml" "$DIR/users" "$DIR/limits.toml" "$DIR/env.sh" \
         "$DIR/gridengine.toml" "$DIR/gridengine-single.toml" \
         "$DIR/summary.txt" "$DIR/venv" "$DIR/.cigri-clusters"
  rmdir "$DIR" 2>/dev/null || log "left $DIR in place (it holds files up.sh did not make)"
  log "stopped and removed $DIR"
fi
log "down in $(elapsed)s"
exit 0
