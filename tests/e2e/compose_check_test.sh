#!/usr/bin/env bash
# The docker compose stack, checked without a Docker engine (tests/compose_check: compose-go,
# the library behind `docker compose config`, and BuildKit's Dockerfile parser): the real
# compose file and Dockerfile pass; a broken copy of each is refused, naming the problem.
# Prometheus's configurations and rules pass promtool; the Grafana dashboard is valid JSON
# whose every query names a recording rule or a metric the server exports.
#
# Usage: compose_check_test.sh REPO
set -u
REPO="$1"
WORK="$(mktemp -d /tmp/compose-check-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$REPO/tests/compose_check" || exit 1
export GOFLAGS=-mod=mod
go build -o "$WORK/compose_check" . || fail "building compose_check"

"$WORK/compose_check" "$REPO/compose/docker-compose.yml" >"$WORK/config.yml" 2>"$WORK/err" ||
  fail "the compose stack: $(cat "$WORK/err")"
for service in kafka feed-server prometheus grafana; do
  grep -q "^  $service:" "$WORK/config.yml" || fail "service $service missing from the normalized config"
done

# A broken copy: an unknown key, a mount of a file that does not exist, a one-stage Dockerfile
# running as root.
mkdir -p "$WORK/broken"
cp -r "$REPO/compose/." "$WORK/broken/"
sed -i 's|^    restart: unless-stopped$|    restart: unless-stopped\n    restrat: always|' "$WORK/broken/docker-compose.yml"
"$WORK/compose_check" "$WORK/broken/docker-compose.yml" >/dev/null 2>"$WORK/err" && fail "a misspelt key passed"
grep -q "restrat" "$WORK/err" || fail "the misspelt key is not named: $(cat "$WORK/err")"
cp -r "$REPO/compose/." "$WORK/broken/"
sed -i 's|./prometheus/rules.yml|./prometheus/rulez.yml|' "$WORK/broken/docker-compose.yml"
printf 'FROM debian:bookworm\nRUN true\n' >"$WORK/broken/Dockerfile"
sed -i 's|      context: ..|      context: .|; s|      dockerfile: compose/Dockerfile|      dockerfile: Dockerfile|' "$WORK/broken/docker-compose.yml"
"$WORK/compose_check" "$WORK/broken/docker-compose.yml" >/dev/null 2>"$WORK/err" && fail "a broken stack passed"
grep -q "rulez.yml, which does not exist" "$WORK/err" || fail "missing mount not named: $(cat "$WORK/err")"
grep -q "one stage" "$WORK/err" || fail "one-stage Dockerfile not named: $(cat "$WORK/err")"
grep -q "runs as root" "$WORK/err" || fail "root user not named: $(cat "$WORK/err")"

# Prometheus: both configurations and the recording rules.
cd "$REPO/compose/prometheus" || exit 1
promtool check rules rules.yml >/dev/null || fail "promtool check rules"
sed 's|FEED_METRICS_TARGET|127.0.0.1:9464|' prometheus.yml >"$WORK/prometheus.yml"
cp rules.yml "$WORK/rules.yml"
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool check config (local)"
cp prometheus-compose.yml "$WORK/prometheus-compose.yml"
promtool check config "$WORK/prometheus-compose.yml" >/dev/null || fail "promtool check config (compose)"

# Grafana: the dashboard parses and queries only what exists.
python3 - "$REPO" <<'PY' || fail "grafana dashboard"
import json, re, sys, pathlib
repo = pathlib.Path(sys.argv[1])
dash = json.loads((repo / "compose/grafana/dashboards/inventory-feed.json").read_text())
rules = re.findall(r"record: (\S+)", (repo / "compose/prometheus/rules.yml").read_text())
source = "".join(p.read_text() for p in (repo / "feed-server").rglob("*.cc"))
assert dash["uid"] and dash["panels"], "no panels"
for panel in dash["panels"]:
    for target in panel["targets"]:
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", target["expr"]).group(0)
        assert name in rules or f'"{name}"' in source, f"panel {panel['title']!r} queries {name}, which nothing records or exports"
print(f"grafana: {len(dash['panels'])} panels, every query known")
PY
echo "compose_check_test: ok"
