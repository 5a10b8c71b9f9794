# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts and tests that run a server (`nvmemu serve`, SPDK's nvmf_tgt) in the
# background: start it, wait until it listens, stop it, clean up. The Python twin is
# scripts/lib/serve.py.
#
#   serve_start LOG PATH... -- CMD...
#       runs CMD in the background with its output in LOG and sets SERVE_PID; returns once
#       every PATH is a socket. If the server exits first, or SERVE_TIMEOUT seconds (default
#       30) pass, prints one line saying which and the log's last lines, stops it and
#       returns 1.
#   serve_wait PID LOG PATH...
#       the waiting part alone, for a server started some other way.
#   serve_stop [PID]
#       SIGTERM, SIGKILL after 10 s (a wedged server may ignore SIGTERM), then reaps it;
#       without PID, SERVE_PID (cleared). A server that has already exited is only reaped.
#   serve_log_tail LOG [LINES]
#       the last LINES (default 40) lines of LOG, indented, on stderr.
#   serve_scratch
#       makes the scratch directory WORK (mktemp -d, named after the calling script) and an
#       EXIT trap (serve_cleanup) that, when the script fails, shows the tail of the last
#       server's log, then stops SERVE_PID and removes WORK. Scripts with their own EXIT
#       trap call serve_cleanup from it instead.

SERVE_PID=
SERVE_LOG=

serve_log_tail() {
  local log=$1 lines=${2:-40}
  [ -s "$log" ] || { echo "    (the server wrote nothing to $log)" >&2; return 0; }
  echo "    --- last $lines lines of $log:" >&2
  tail -n "$lines" "$log" | sed 's/^/    > /' >&2
}

serve_wait() {
  local pid=$1 log=$2 deadline=$((SECONDS + ${SERVE_TIMEOUT:-30})) path
  shift 2
  for path in "$@"; do
    until [ -S "$path" ]; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "${SERVE_NAME:-server} (pid $pid) exited before listening on $path" >&2
        serve_log_tail "$log"
        return 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "${SERVE_NAME:-server} (pid $pid) not listening on $path after ${SERVE_TIMEOUT:-30} s" >&2
        serve_log_tail "$log"
        return 1
      fi
      sleep 0.1
    done
  done
}

serve_start() {
  local log=$1 paths=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    paths+=("$1")
    shift
  done
  [ "${1:-}" = -- ] || { echo "serve_start: no -- before the command" >&2; return 2; }
  shift
  "$@" >"$log" 2>&1 &
  SERVE_PID=$!
  SERVE_LOG=$log
  # Named in errors by its program and subcommand ("nvmemu serve"), past any `env`.
  while [ "${1:-}" = env ] || [[ "${1:-}" == *=* ]]; do shift; done
  local SERVE_NAME
  SERVE_NAME=$(basename "$1")
  [[ "${2:-}" == -* || -z "${2:-}" ]] || SERVE_NAME+=" $2"
  # On failure the log's tail is shown once, here, and the server is stopped.
  serve_wait "$SERVE_PID" "$log" "${paths[@]}" || { SERVE_LOG=; serve_stop; return 1; }
}

serve_stop() {
  local pid=${1:-$SERVE_PID}
  [ -n "$pid" ] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    timeout 10 tail -s 0.1 --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  [ "$pid" != "$SERVE_PID" ] || SERVE_PID=
}

serve_cleanup() {
  local rc=$?
  [ "$rc" -eq 0 ] || [ -z "$SERVE_LOG" ] || [ ! -e "$SERVE_LOG" ] || serve_log_tail "$SERVE_LOG"
  serve_stop
  [ -z "${WORK:-}" ] || rm -rf "$WORK"
}

serve_scratch() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/nvmemu-$(basename "$0" .sh).XXXXXX")
  trap serve_cleanup EXIT
}
