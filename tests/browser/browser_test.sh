#!/usr/bin/env bash
# The gateway's pages in a real headless Chromium (Debian's chromium, driven by npm's
# puppeteer-core from .cache/node): Swagger UI's "Try it out" makes a reservation, an
# EventSource on the watch route sees a stock change arrive, and the dashboard shows a
# reservation and an order made through the API (screenshots in OUT_DIR).
#
# Usage: browser_test.sh FEED_SERVER_BINARY REPO_DIR OUT_DIR (the screenshot goes there)
set -euo pipefail
SERVER_BIN="$1" REPO="$2" OUT="$3"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/feed-browser-XXXXXX)"
. "$REPO/tests/util/free_port.sh"
PORT="$(free_port)" HPORT="$(free_port)"
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"$SERVER_BIN" --listen "127.0.0.1:$PORT" --metrics-listen "" --http-listen "127.0.0.1:$HPORT" \
  --data-dir "$WORK/data" --durability async --log-rpcs false >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  grep -q "feed-server http listening on" "$WORK/server.log" && break
  sleep 0.1
done
grep -q "feed-server http listening on" "$WORK/server.log" || { cat "$WORK/server.log"; exit 1; }
BASE="http://127.0.0.1:$HPORT"
export NODE_PATH="$REPO/.cache/node/node_modules"
node "$REPO/tests/browser/swagger_try_it_out.cjs" "$BASE" "$OUT/swagger-reserve.png"
node "$REPO/tests/browser/eventsource.cjs" "$BASE"
node "$REPO/tests/browser/dashboard.cjs" "$BASE" "$OUT/dashboard.png"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
SERVER_PID=""
echo "browser: OK"
