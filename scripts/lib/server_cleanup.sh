# SPDX-License-Identifier: Apache-2.0
# Sourced by scripts that run `nvmemu serve` in the background: makes the scratch directory
# WORK and an EXIT trap that stops the server whose PID is in SERVE_PID (SIGTERM, then waits
# for it) and removes WORK.
WORK=$(mktemp -d)
SERVE_PID=
cleanup() {
  if [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
