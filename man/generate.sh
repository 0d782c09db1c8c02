#!/usr/bin/env bash
# Regenerate the man pages from the commands' own --help (help2man; plain Click help, fixed
# width and date so that the output only changes when the CLI does). CI runs this and fails
# if the committed pages differ.
set -euo pipefail
cd "$(dirname "$0")"
bin=${CIGRI_BIN:-$(dirname "$(command -v gridsub)")}
export TYPER_USE_RICH=0 NO_COLOR=1 COLUMNS=100 TERMINAL_WIDTH=100 SOURCE_DATE_EPOCH=1779494400 LC_ALL=C.UTF-8

declare -A summary=(
  [gridsub]="submit campaigns to the cigri grid"
  [gridstat]="show cigri campaigns, tasks and jobs"
  [griddel]="cancel, pause, resume or purge cigri campaigns"
  [gridevents]="list what went wrong in cigri campaigns"
  [gridnotify]="subscribe to notifications of cigri campaigns"
  [gridclusters]="show the clusters of the cigri grid"
  [gridtoken]="register your own tokens for the clusters of the cigri grid"
  [cigri]="administer the cigri grid meta-scheduler"
)
for cmd in "${!summary[@]}"; do
  include=$(mktemp)
  cat sections.h2m "examples/$cmd.h2m" > "$include"
  if [ "$cmd" = cigri ]; then
    {
      echo "[SUBCOMMANDS]"
      for sub in "cycle" "daemon" "server" "doctor" "shares" "classes" "users" "simulate" "db init" "db upgrade" "db copy" "db path" "cluster list" "cluster add" \
                 "cluster test" "cluster remove" "cluster blacklist" "cluster unblacklist" "cluster cancel-campaigns" \
                 "purge" "import-v3" "token create" "token list" "token revoke" "man"; do
        echo ".SS \"cigri $sub\""
        echo ".nf"
        # shellcheck disable=SC2086
        "$bin/cigri" $sub --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
        echo ".fi"
      done
    } >> "$include"
  fi
  if [ "$cmd" = gridnotify ] || [ "$cmd" = gridtoken ]; then
    if [ "$cmd" = gridnotify ]; then subs="subscribe unsubscribe list"; else subs="add list remove"; fi
    {
      echo "[SUBCOMMANDS]"
      for sub in $subs; do
        echo ".SS \"$cmd $sub\""
        echo ".nf"
        "$bin/$cmd" $sub --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
        echo ".fi"
      done
    } >> "$include"
  fi
  help2man --no-info --section 1 --source "cigri" --name "${summary[$cmd]}" \
           --include "$include" --output "$cmd.1" "$bin/$cmd"
  rm -f "$include"
done
