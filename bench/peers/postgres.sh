#!/usr/bin/env bash
# The PostgreSQL peer: Debian's PostgreSQL 15 in a throw-away data directory on a free
# loopback port, synchronous_commit=on and fsync=on, driven by pgbench with 50 clients running
# reserve.sql (a conditional UPDATE of the stock row and a hold row, in one transaction).
#
#   bench/peers/postgres.sh OUT_DIR SECONDS
#
# Writes OUT_DIR/peer_postgres.json. SERVER_CPU / LOAD_CPU (core numbers) pin the server and
# pgbench with taskset. PostgreSQL refuses to run as root: as root, it runs as the
# `postgres` user that Debian's package creates.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 1; }
OUT="$1" SECS="$2"
CLIENTS=50
SKUS=10000
BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
[ -x "$BIN/postgres" ] || { echo "postgres.sh: no PostgreSQL (run bench/peers/install.sh)" >&2; exit 1; }
SRV=() LOAD=() PLACEMENT=shared
if [ -n "${SERVER_CPU:-}" ]; then SRV=(taskset -c "$SERVER_CPU") PLACEMENT=pinned; fi
if [ -n "${LOAD_CPU:-}" ]; then LOAD=(taskset -c "$LOAD_CPU"); fi
AS=()
[ "$(id -u)" = 0 ] && AS=(runuser -u postgres --)
. "$HERE/../../tests/util/free_port.sh"
PORT="$(free_port)"
DIR="$(mktemp -d /tmp/peer-postgres-XXXXXX)"
chmod 755 "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
PID=""
# runuser does not pass signals on: pg_ctl stops the server (fast: connections are cut).
stop() {
  if [ -n "$PID" ]; then
    "${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || kill -9 "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap stop EXIT

"${AS[@]}" "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust >"$DIR/initdb.log" 2>&1 ||
  { echo "postgres.sh: initdb failed:" >&2; cat "$DIR/initdb.log" >&2; exit 1; }
"${SRV[@]}" "${AS[@]}" "$BIN/postgres" -D "$DIR/data" -p "$PORT" -c listen_addresses=127.0.0.1 \
  -c unix_socket_directories="$DIR" -c fsync=on -c synchronous_commit=on -c max_connections=100 \
  -c shared_buffers=128MB >"$DIR/postgres.log" 2>&1 &
PID=$!
psql() { "${AS[@]}" "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -q -v ON_ERROR_STOP=1 "$@"; }
for _ in $(seq 1 100); do psql -c 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
psql -c 'select 1' >/dev/null 2>&1 || { echo "postgres.sh: postgres did not start:" >&2; cat "$DIR/postgres.log" >&2; exit 1; }

psql <<SQL
CREATE TABLE stock (sku text PRIMARY KEY, available bigint NOT NULL);
CREATE TABLE holds (id bigserial PRIMARY KEY, sku text NOT NULL, quantity bigint NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO stock SELECT 'bench-' || i, 1000000000 FROM generate_series(0, $((SKUS - 1))) i;
VACUUM ANALYZE stock;
SQL
cp "$HERE/reserve.sql" "$DIR/reserve.sql"
(cd "$DIR" && "${LOAD[@]}" "${AS[@]}" "$BIN/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n \
  -c "$CLIENTS" -j 2 -T "$SECS" -M prepared -f reserve.sql --log --log-prefix="$DIR/txn" postgres \
  >"$DIR/pgbench.out" 2>"$DIR/pgbench.err") ||
  { echo "postgres.sh: pgbench failed:" >&2; cat "$DIR/pgbench.err" >&2; exit 1; }
holds="$(psql -At -c 'select count(*) from holds')"
python3 - "$DIR" "$OUT/peer_postgres.json" "$CLIENTS" "$PLACEMENT" "$holds" <<'PY'
import glob, json, re, sys
d, path, clients, placement, holds = sys.argv[1:]
out = open(f"{d}/pgbench.out").read()
tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
# One line per transaction: client_id transaction_no time_us script_no time_epoch time_us.
lat = sorted(int(l.split()[2]) for f in glob.glob(f"{d}/txn*") for l in open(f) if l.strip())
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000
if int(holds) == 0:
    sys.exit("postgres.sh: no hold was written")
json.dump({"peer": "postgres", "fsync": "synchronous_commit=on", "pipeline": 1,
           "clients": int(clients), "placement": placement, "transactions": len(lat),
           "holds_written": int(holds), "ops_per_s": tps, "p50_ms": pct(0.50), "p99_ms": pct(0.99),
           "durability": "nothing acknowledged (the WAL is flushed before COMMIT returns)"},
          open(path, "w"), indent=1)
print(f"postgres ({placement}): {tps:,.0f} transactions/s, p99 {pct(0.99):.2f} ms")
PY
