# shellcheck shell=bash
# Helpers shared by up.sh and down.sh (sourced, not executed).
# Adapted from the loopback batch-scheduler scripts measured on the 2-core CI
# machine; everything is loopback-only and touches no daemon it did not start.

CC_USER=${CIGRI_TEST_USER:-gridtest}   # unprivileged account jobs run as (and SSH logs in as)
CC_REST_USER=slurmrest                 # slurmrestd refuses to run as root / SlurmUser
_T0=${_T0:-$(date +%s.%N)}

log() { echo "[$(basename "$0" .sh) $(date +%T) +$(elapsed)s] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
elapsed() { echo "$(date +%s.%N) $_T0" | awk '{printf "%.1f", $1-$2}'; }
need_root() { [ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }; }

# alive PID: the process exists and is not a zombie (PID 1 on the CI machine is
# not a real init and reaps orphans late; kill -0 succeeds on a zombie)
alive() {
  [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]
}

# install_missing PKG...: apt-get install only what is missing.  While apt runs, a
# temporary /usr/sbin/policy-rc.d (exit 101) keeps the maintainer scripts from
# starting system daemons (slurmctld, munge, ssh, apache2, postgresql...); an
# existing policy-rc.d is left alone.  Retries after `apt-get update`.
install_missing() {
  local p missing="" made_policy=0 rc=0
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  if [ "${CIGRI_CLUSTERS_NO_INSTALL:-0}" = 1 ]; then log "missing packages:$missing"; return 1; fi
  log "apt-get install$missing"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing >/tmp/cigri-clusters-apt.log 2>&1 || {
    apt-get update >>/tmp/cigri-clusters-apt.log 2>&1
    apt-get install -y -q --no-install-recommends $missing >>/tmp/cigri-clusters-apt.log 2>&1 || rc=$?
  }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $rc = 0 ] || { tail -20 /tmp/cigri-clusters-apt.log >&2; return $rc; }
  rm -f /tmp/cigri-clusters-apt.log
}

# ensure_users: the test user (password field '*', not the locked '!': sshd with
# UsePAM=no refuses key logins to accounts whose password starts with '!') and
# the unprivileged user slurmrestd drops to.
ensure_users() {
  id "$CC_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$CC_USER"
  case "$(getent shadow "$CC_USER" | cut -d: -f2)" in '!'*) usermod -p '*' "$CC_USER" ;; esac
  id "$CC_REST_USER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$CC_REST_USER"
}

# descendants PID: all descendant PIDs of PID (walks /proc, no name matching)
descendants() {
  local kids k
  kids=$(awk -v p="$1" '$4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null)
  for k in $kids; do echo "$k"; descendants "$k"; done
}

# stop_pids TIMEOUT_S PID...: SIGTERM all, wait, SIGKILL survivors
stop_pids() {
  local t=$1 p left=""; shift
  for p in "$@"; do alive "$p" && kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 $((t * 10))); do
    left=""
    for p in "$@"; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  for p in $left; do log "pid $p ignored SIGTERM, sending SIGKILL"; kill -KILL "$p" 2>/dev/null; done
  return 0
}

# listening PORT: some socket listens on TCP PORT, any address (no connection is made,
# so the daemons log nothing)
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
# listening_ports: the TCP ports something listens on, one per line (one ss call)
listening_ports() { ss -Hltn 2>/dev/null | awk '{ sub(/.*:/, "", $4); print $4 }' | sort -u; }
# tcp_open PORT: something accepts connections on 127.0.0.1:PORT
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_tcp PORT [TIMEOUT_S]
wait_tcp() {
  for _ in $(seq 1 $(( ${2:-10} * 10 ))); do tcp_open "$1" && return 0; sleep 0.1; done
  return 1
}
# wait_file FILE [TIMEOUT_S]: until FILE exists and is not empty
wait_file() {
  for _ in $(seq 1 $(( ${2:-10} * 10 ))); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
randpw() { head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20; }
