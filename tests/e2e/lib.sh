# Shared by the e2e scripts that drive the feed-server binary with feedctl: sourced after
# SERVER_BIN and WORK are set. Servers started here are SIGKILLed at exit and WORK removed.
PIDS=()
fail() { echo "FAIL: $*" >&2; tail -5 "$WORK"/server*.log >&2 2>/dev/null; exit 1; }
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"; }
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"
# start_server LOG ARGS...: a server on a free loopback port (HTTP only on $HTTP_LISTEN, no
# metrics, access log
# only with LOG_RPCS=true), started
# once it prints its line; sets PORT and PID.
start_server() {
  local log="$1"; shift
  PORT="$(free_port)"
  : >"$log"  # exists before the first grep below (the child opens it after the fork)
  "$SERVER_BIN" --listen "127.0.0.1:$PORT" --http-listen "${HTTP_LISTEN:-}" --metrics-listen "" \
    --log-rpcs "${LOG_RPCS:-false}" "$@" >"$log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 100); do
    grep -q "feed-server listening on" "$log" && return 0
    kill -0 "$PID" 2>/dev/null || fail "server exited at start: $(tail -3 "$log")"
    sleep 0.1
  done
  fail "server did not start"
}
# stop_server: SIGTERM to the last one started; waits up to 15 s for it to exit.
stop_server() {
  kill -TERM "$PID"
  for _ in $(seq 1 150); do kill -0 "$PID" 2>/dev/null || return 0; sleep 0.1; done
  fail "server did not stop"
}
# expect CODE COMMAND...: runs it, checks the exit code; its stdout in $OUT, stderr in $ERR.
expect() {
  local want="$1"; shift
  OUT="$("$@" 2>"$WORK/err")"; local got=$?
  ERR="$(cat "$WORK/err")"
  [ "$got" = "$want" ] || fail "'$*' exited $got, want $want (stdout: $OUT; stderr: $ERR)"
}
