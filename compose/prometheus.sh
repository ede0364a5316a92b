#!/usr/bin/env bash
# A local Prometheus (Debian's prometheus package) scraping a feed-server, with the repo's
# configuration and recording rules (compose/prometheus/).
#
#   compose/prometheus.sh start [METRICS_TARGET] [LISTEN]   # default 127.0.0.1:9464, 127.0.0.1:9090
#   compose/prometheus.sh stop | status
#
# State (configuration copy, TSDB, log, pid) in .cache/prometheus-run, or PROMETHEUS_STATE.
# `start` waits until Prometheus answers and prints its address.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${PROMETHEUS_STATE:-$REPO/.cache/prometheus-run}"
PID_FILE="$STATE/prometheus.pid"

running() { [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

case "${1:-}" in
  start)
    TARGET="${2:-127.0.0.1:9464}"
    LISTEN="${3:-127.0.0.1:9090}"
    command -v prometheus >/dev/null || { echo "prometheus.sh: prometheus is not installed (compose/install-deps.sh)" >&2; exit 1; }
    if running; then cat "$STATE/listen"; exit 0; fi
    mkdir -p "$STATE/data"
    sed "s|FEED_METRICS_TARGET|$TARGET|" "$REPO/compose/prometheus/prometheus.yml" >"$STATE/prometheus.yml"
    cp "$REPO/compose/prometheus/rules.yml" "$STATE/rules.yml"
    promtool check config "$STATE/prometheus.yml" >"$STATE/check.log" 2>&1 ||
      { cat "$STATE/check.log" >&2; exit 1; }
    prometheus --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
      --web.listen-address="$LISTEN" --storage.tsdb.retention.time=2d \
      >"$STATE/prometheus.log" 2>&1 &
    echo $! >"$PID_FILE"
    echo "$LISTEN" >"$STATE/listen"
    for _ in $(seq 1 100); do
      curl -sf "http://$LISTEN/-/ready" >/dev/null 2>&1 && { echo "$LISTEN"; exit 0; }
      running || { tail -5 "$STATE/prometheus.log" >&2; exit 1; }
      sleep 0.1
    done
    echo "prometheus.sh: not ready after 10 s" >&2
    exit 1
    ;;
  stop)
    if running; then
      kill "$(cat "$PID_FILE")"
      for _ in $(seq 1 50); do running || break; sleep 0.1; done
    fi
    rm -f "$PID_FILE"
    ;;
  status)
    running && { echo "prometheus.sh: running at $(cat "$STATE/listen")"; exit 0; }
    echo "prometheus.sh: not running"
    exit 1
    ;;
  *)
    sed -n 2,9p "$0" >&2
    exit 1
    ;;
esac
