#!/usr/bin/env bash
# Three local Apache Kafka brokers (KRaft, each broker + controller, one quorum of three) for
# the long mode of the cluster tests: replication factor 3, min.insync.replicas 2, unclean
# leader election off. Each broker is compose/kafka.sh with its own ports and state dir, so
# fetching, formatting and logs work as for the single broker.
#
# Usage: compose/kafka-cluster.sh start|stop|status|brokers|reset|kill N|start-one N
#   start      start the three (formatted with one cluster id), wait until each answers
#   stop       graceful stop of the three
#   status     exit 0 when all three answer
#   brokers    print the bootstrap list (host:port,host:port,host:port)
#   reset      stop and delete the state dirs
#   kill N     SIGKILL broker N (0, 1 or 2): the fault the long mode injects
#   start-one N  start broker N again (after kill) and wait until it answers
#
# Env: KAFKA_CLUSTER_PORT (29092: broker N listens on PORT + 2N, its controller on
#      PORT + 2N + 1), KAFKA_CLUSTER_STATE_DIR ($REPO/.cache/kafka-cluster),
#      KAFKA_CLUSTER_HEAP_OPTS (-Xmx384m -Xms192m each).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
BASE_PORT="${KAFKA_CLUSTER_PORT:-29092}"
STATE_ROOT="${KAFKA_CLUSTER_STATE_DIR:-$REPO/.cache/kafka-cluster}"
HEAP="${KAFKA_CLUSTER_HEAP_OPTS:--Xmx384m -Xms192m}"
COUNT=3

say() { echo "kafka-cluster.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

port_of() { echo $((BASE_PORT + 2 * $1)); }
controller_of() { echo $((BASE_PORT + 2 * $1 + 1)); }

voters() {
  local v="" i
  for ((i = 0; i < COUNT; i++)); do v+="${v:+,}$((i + 1))@127.0.0.1:$(controller_of "$i")"; done
  echo "$v"
}

brokers() {
  local b="" i
  for ((i = 0; i < COUNT; i++)); do b+="${b:+,}127.0.0.1:$(port_of "$i")"; done
  echo "$b"
}

# The cluster id every broker is formatted with, made once.
cluster_id() {
  mkdir -p "$STATE_ROOT"
  local f="$STATE_ROOT/cluster.id" id
  if [[ ! -s "$f" ]]; then
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    while [[ "$id" == -* ]]; do id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"; done
    echo "$id" >"$f"
  fi
  cat "$f"
}

# Runs compose/kafka.sh as broker N.
broker() {
  local n="$1"
  shift
  KAFKA_PORT="$(port_of "$n")" KAFKA_CONTROLLER_PORT="$(controller_of "$n")" \
    KAFKA_STATE_DIR="$STATE_ROOT/broker-$n" KAFKA_NODE_ID="$((n + 1))" \
    KAFKA_QUORUM_VOTERS="$(voters)" KAFKA_CLUSTER_ID="$(cluster_id)" \
    KAFKA_REPLICATION=3 KAFKA_MIN_ISR=2 KAFKA_HEAP_OPTS="$HEAP" \
    "$SCRIPT_DIR/kafka.sh" "$@"
}

valid_n() { [[ "${1:-}" =~ ^[0-2]$ ]] || die "broker number must be 0, 1 or 2 (got '${1:-}')"; }

wait_answering() {
  local n="$1" deadline=$((SECONDS + 90))
  while ((SECONDS < deadline)); do
    broker "$n" status >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "broker $n does not answer on 127.0.0.1:$(port_of "$n") after 90 s (logs in $STATE_ROOT/broker-$n/logs)"
}

cmd_start() {
  local i
  # A quorum member answers only once a majority runs: start all, then wait for each.
  for ((i = 0; i < COUNT; i++)); do KAFKA_START_WAIT=0 broker "$i" start >/dev/null; done
  for ((i = 0; i < COUNT; i++)); do wait_answering "$i"; done
  say "three brokers answer: $(brokers)"
  brokers
}

cmd_stop() {
  local i pids=()
  # All at once: the last broker of a quorum stopped one by one waits for a majority that has
  # already gone (then the 30 s SIGKILL).
  for ((i = 0; i < COUNT; i++)); do
    broker "$i" stop &
    pids+=("$!")
  done
  for i in "${pids[@]}"; do wait "$i"; done
}

cmd_status() {
  local i
  for ((i = 0; i < COUNT; i++)); do broker "$i" status >/dev/null 2>&1 || { say "broker $i does not answer"; return 1; }; done
  brokers
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  brokers) brokers ;;
  reset)
    cmd_stop
    [[ -n "$STATE_ROOT" && "$STATE_ROOT" != "/" && "$STATE_ROOT" != "$REPO" ]] || die "refusing to delete '$STATE_ROOT'"
    rm -rf "$STATE_ROOT"
    say "deleted $STATE_ROOT"
    ;;
  kill)
    valid_n "${2:-}"
    broker "$2" kill
    ;;
  start-one)
    valid_n "${2:-}"
    KAFKA_START_WAIT=0 broker "$2" start >/dev/null
    wait_answering "$2"
    say "broker $2 answers again"
    ;;
  *)
    echo "usage: $0 start|stop|status|brokers|reset|kill N|start-one N" >&2
    exit 2
    ;;
esac
