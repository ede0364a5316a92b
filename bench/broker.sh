# Sourced by the cluster benchmarks: the local broker of compose/kafka.sh, started when none
# runs (and then stopped again by stop_broker_if_started). Sets BROKERS.
STARTED_KAFKA=""
ensure_broker() {
  if ! "$REPO/compose/kafka.sh" status >/dev/null 2>&1; then
    "$REPO/compose/kafka.sh" start >/dev/null
    STARTED_KAFKA=1
  fi
  BROKERS="$("$REPO/compose/kafka.sh" status)"
}
stop_broker_if_started() {
  [ -z "$STARTED_KAFKA" ] || "$REPO/compose/kafka.sh" stop >/dev/null 2>&1 || true
}
