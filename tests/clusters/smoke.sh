#!/usr/bin/env bash
# Check every cluster of DIR/cigri.toml (see smoke.py); last line "N passed, M failed".
# usage: smoke.sh DIR [ENTRY...]
# Python: $PYTHON, else the repo's .venv, else /tmp/venv, else python3 -- the
# first that has paramiko and httpx; without one, a venv is made in DIR/venv.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 DIR [ENTRY...]" >&2; exit 2; }
DIR=$(realpath -m "$1"); shift
[ -f "$DIR/cigri.toml" ] || { echo "no $DIR/cigri.toml: run up.sh $DIR first" >&2; echo "0 passed, 1 failed"; exit 1; }
PY=""
for p in ${PYTHON:-} "$HERE/../../.venv/bin/python" /tmp/venv/bin/python "$DIR/venv/bin/python" python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import paramiko, httpx, tomllib' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
  python3 -m venv "$DIR/venv" && "$DIR/venv/bin/pip" install -q paramiko httpx
  PY=$DIR/venv/bin/python
fi
exec "$PY" "$HERE/smoke.py" "$DIR" "$@"
