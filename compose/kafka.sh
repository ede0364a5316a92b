#!/usr/bin/env bash
# One Apache Kafka broker (KRaft combined mode: broker + controller) for local runs and
# tests, bound to 127.0.0.1 only. The broker jars come from Maven Central (compose/kafka/pom.xml)
# and run with `java -cp`; no Docker and no Kafka distribution tarball needed.
#
# Usage: compose/kafka.sh fetch|start|stop|kill|status|reset
#   fetch   download the broker jars once into the cache dir
#   start   fetch if needed, format storage if new, start the broker, wait until it answers
#   stop    graceful shutdown (SIGTERM, SIGKILL after 30 s)
#   kill    SIGKILL at once (fault injection)
#   status  exit 0 and print the bootstrap address if running and answering, else exit 1
#   reset   stop and delete the state dir (data included)
#
# Env: KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093),
#      KAFKA_CACHE_DIR ($REPO/.cache/kafka-3.9.1/libs), KAFKA_STATE_DIR ($REPO/.cache/kafka-run),
#      KAFKA_HEAP_OPTS (-Xmx512m -Xms256m), KAFKA_START_TIMEOUT (60), KAFKA_STOP_TIMEOUT (30).
# One broker of several (compose/kafka-cluster.sh sets these): KAFKA_NODE_ID (1),
#      KAFKA_QUORUM_VOTERS (this node alone), KAFKA_CLUSTER_ID (random; every node of a
#      cluster is formatted with the same one), KAFKA_REPLICATION (1: default and internal
#      topics' replication factor), KAFKA_MIN_ISR (1), KAFKA_START_WAIT (1; 0: start returns
#      without waiting, since a broker of a quorum answers only once a majority runs).
#
# SASL_SSL (optional): with KAFKA_SASL_PORT set (e.g. 19094) the broker also listens on
# SASL_SSL://127.0.0.1:$KAFKA_SASL_PORT: TLS with the development server certificate
# (KAFKA_CERTS_DIR/server.p12, made by compose/dev-certs.sh when missing; clients trust
# KAFKA_CERTS_DIR/ca.crt) and SCRAM-SHA-512 (and SCRAM-SHA-256) login of one user,
# KAFKA_SASL_USER / KAFKA_SASL_PASSWORD. The user is created when the storage is formatted
# (StorageTool --add-scram); a state dir formatted earlier without it, or with another
# password, gets it (SCRAM-SHA-512 only) through the plaintext listener once the broker is up
# (ConfigCommand).
# The plaintext listener, the controller and inter-broker traffic stay PLAINTEXT on loopback.
# A kcat/librdkafka client config for the SASL listener is written to
# $KAFKA_STATE_DIR/sasl-client.properties (mode 600):
#   kcat -F .cache/kafka-run/sasl-client.properties -b 127.0.0.1:19094 -L
# `status` then checks both listeners (stdout still prints the plaintext address).
#   KAFKA_SASL_PORT (unset: no SASL_SSL listener), KAFKA_SASL_USER (feed),
#   KAFKA_SASL_PASSWORD (feed-dev-password), KAFKA_CERTS_DIR ($REPO/.cache/dev-certs).
# Development only: the SCRAM password is on the StorageTool command line while the format
# runs, and the keystore password is in the state dir's server.properties (mode 600).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
POM="$SCRIPT_DIR/kafka/pom.xml"

KAFKA_VERSION=3.9.1
PORT="${KAFKA_PORT:-19092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
CACHE_DIR="${KAFKA_CACHE_DIR:-$REPO/.cache/kafka-$KAFKA_VERSION/libs}"
STATE_DIR="${KAFKA_STATE_DIR:-$REPO/.cache/kafka-run}"
HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
START_TIMEOUT="${KAFKA_START_TIMEOUT:-60}"
STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
SASL_PORT="${KAFKA_SASL_PORT:-}"
SASL_USER="${KAFKA_SASL_USER:-feed}"
SASL_PASSWORD="${KAFKA_SASL_PASSWORD:-feed-dev-password}"
CERTS_DIR="${KAFKA_CERTS_DIR:-$REPO/.cache/dev-certs}"
NODE_ID="${KAFKA_NODE_ID:-1}"
QUORUM_VOTERS="${KAFKA_QUORUM_VOTERS:-$NODE_ID@127.0.0.1:$CONTROLLER_PORT}"
CLUSTER_ID="${KAFKA_CLUSTER_ID:-}"
REPLICATION="${KAFKA_REPLICATION:-1}"
MIN_ISR="${KAFKA_MIN_ISR:-1}"
START_WAIT="${KAFKA_START_WAIT:-1}"

CACHE_DIR="${CACHE_DIR%/}"
STATE_DIR="${STATE_DIR%/}"
ADDR="127.0.0.1:$PORT"
MARKER="$CACHE_DIR/.fetch-complete"
PID_FILE="$STATE_DIR/kafka.pid"
PROPS="$STATE_DIR/server.properties"
LOG4J="$STATE_DIR/log4j.properties"
DATA_DIR="$STATE_DIR/data"
LOG_DIR="$STATE_DIR/logs"
SERVER_LOG="$LOG_DIR/server.log"   # broker log (log4j file appender)
CONSOLE_LOG="$LOG_DIR/console.out" # JVM stdout/stderr (normally near empty)
SASL_CLIENT_CONF="$STATE_DIR/sasl-client.properties" # librdkafka/kcat config for SASL_SSL
SCRAM_MARKER="$STATE_DIR/scram-user.sha256"           # which user/password the broker knows

say() { echo "kafka.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found (${2:-install it})"; }

# Serialize start/stop/kill/reset of the same state dir. The lock file lives beside the state dir
# so that `reset` can delete the state dir while holding it.
take_lock() {
  mkdir -p "$(dirname "$STATE_DIR")"
  exec 9>"$STATE_DIR.lock"
  flock 9
}

pom_sum() { sha256sum "$POM" | cut -d' ' -f1; }

fetched() { [[ -f "$MARKER" && "$(cat "$MARKER")" == "$(pom_sum)" ]]; }

cmd_fetch() {
  if fetched; then
    say "jars already fetched in $CACHE_DIR"
    return 0
  fi
  need mvn "apt-get install maven"
  local tmp="$CACHE_DIR.partial.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  say "fetching Kafka $KAFKA_VERSION jars from Maven Central into $CACHE_DIR ..."
  local t0=$SECONDS
  # Output goes to a log (Debian's Maven 3.8 prints stray colour codes even with -q -B).
  local log="$tmp.log"
  if ! mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
      -DoutputDirectory="$tmp" -DincludeScope=runtime >"$log" 2>&1 </dev/null; then
    sed -e 's/\x1b\[[0-9;]*m//g' "$log" >&2
    rm -rf "$tmp" "$log"
    die "maven fetch failed"
  fi
  rm -f "$log"
  ls "$tmp"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "fetch incomplete: kafka_2.13-$KAFKA_VERSION.jar missing"; }
  pom_sum >"$tmp/.fetch-complete"
  rm -rf "$CACHE_DIR"
  mkdir -p "$(dirname "$CACHE_DIR")"
  mv "$tmp" "$CACHE_DIR"
  say "fetched $(ls "$CACHE_DIR"/*.jar | wc -l) jars in $((SECONDS - t0)) s"
}

# Pid of our broker if it is alive (not a zombie, and really a kafka.Kafka JVM), else nothing.
broker_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid state cmd
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/stat" ]] || return 1
  state="$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [[ "$state" != Z && "$state" != X ]] || return 1
  cmd="$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null || true)"
  [[ "$cmd" == *"kafka.Kafka $PROPS"* ]] || return 1
  echo "$pid"
}

port_busy() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

answering() {
  timeout 10 kcat -b "$ADDR" -L -m 3 >/dev/null 2>&1
}

# The SASL_SSL port the broker's config (the running one's, once started) listens on, or nothing.
configured_sasl_port() {
  [[ -f "$PROPS" ]] || return 0
  sed -n -e 's/^listeners=.*SASL_SSL:\/\/127\.0\.0\.1:\([0-9]*\).*$/\1/p' "$PROPS"
}

# The SASL_SSL listener answers a metadata request, with the client config written at start.
answering_sasl() {
  [[ -f "$SASL_CLIENT_CONF" ]] || return 1
  timeout 10 kcat -F "$SASL_CLIENT_CONF" -b "127.0.0.1:$1" -L -m 3 >/dev/null 2>&1
}

scram_sum() { printf '%s\n%s\n' "$SASL_USER" "$SASL_PASSWORD" | sha256sum | cut -d' ' -f1; }

# Certificates for the SASL_SSL listener: made by compose/dev-certs.sh when missing.
ensure_certs() {
  if [[ ! -f "$CERTS_DIR/server.p12" || ! -f "$CERTS_DIR/p12.password" || ! -f "$CERTS_DIR/ca.crt" ]]; then
    say "making development certificates in $CERTS_DIR"
    # --server-only keeps an existing CA (and what it signed); without one it makes it too.
    "$SCRIPT_DIR/dev-certs.sh" "$CERTS_DIR" --force --server-only || die "compose/dev-certs.sh $CERTS_DIR failed"
  fi
  [[ -f "$CERTS_DIR/server.p12" ]] || die "$CERTS_DIR/server.p12 missing after compose/dev-certs.sh"
}

# The SASL_SSL part of server.properties (appended by write_config).
sasl_config() {
  local pw
  pw="$(cat "$CERTS_DIR/p12.password")"
  cat <<EOF
# SASL_SSL listener (KAFKA_SASL_PORT): TLS with the development certificate, SCRAM logins.
sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$CERTS_DIR/server.p12
listener.name.sasl_ssl.ssl.keystore.password=$pw
listener.name.sasl_ssl.ssl.key.password=$pw
listener.name.sasl_ssl.ssl.client.auth=none
EOF
}

write_sasl_client_conf() {
  (
    umask 077
    cat >"$SASL_CLIENT_CONF" <<EOF
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=$SASL_USER
sasl.password=$SASL_PASSWORD
ssl.ca.location=$CERTS_DIR/ca.crt
EOF
  )
}

# A state dir formatted without this user (or with another password): add or update the
# user's SCRAM-SHA-512 credentials through the plaintext listener (the password goes in a
# file, not on the command line).
upsert_scram_user() {
  [[ -f "$SCRAM_MARKER" && "$(cat "$SCRAM_MARKER")" == "$(scram_sum)" ]] && return 0
  say "adding SCRAM credentials for user '$SASL_USER'"
  local f="$STATE_DIR/scram-add.properties"
  (
    umask 077
    # One mechanism per request (the broker refuses two changes of one user at once).
    printf 'SCRAM-SHA-512=password=%s\n' "$SASL_PASSWORD" >"$f"
  )
  java_cmd
  if ! "${JAVA_CMD[@]}" kafka.admin.ConfigCommand --bootstrap-server "$ADDR" --alter \
      --entity-type users --entity-name "$SASL_USER" --add-config-file "$f" \
      >"$LOG_DIR/scram.out" 2>&1 </dev/null; then
    rm -f "$f"
    cat "$LOG_DIR/scram.out" >&2
    die "cannot add SCRAM credentials for '$SASL_USER'"
  fi
  rm -f "$f"
  scram_sum >"$SCRAM_MARKER"
}

# Line counts of the logs when this start began, so that errors show only this run's lines.
SERVER_LOG_START=0
CONSOLE_LOG_START=0

show_log_tail() {
  local f from
  for f in "$SERVER_LOG" "$CONSOLE_LOG"; do
    from=$SERVER_LOG_START
    [[ "$f" == "$CONSOLE_LOG" ]] && from=$CONSOLE_LOG_START
    if [[ -s "$f" ]] && (($(wc -l <"$f") > from)); then
      say "---- last lines of $f ----"
      tail -n +"$((from + 1))" "$f" | tail -n 40 >&2
    fi
  done
}

write_config() {
  mkdir -p "$DATA_DIR" "$LOG_DIR"
  local listeners="PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT"
  local advertised="PLAINTEXT://127.0.0.1:$PORT"
  local protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  if [[ -n "$SASL_PORT" ]]; then
    listeners+=",SASL_SSL://127.0.0.1:$SASL_PORT"
    advertised+=",SASL_SSL://127.0.0.1:$SASL_PORT"
    protocols+=",SASL_SSL:SASL_SSL"
  fi
  # Mode 600: with SASL_SSL it holds the keystore password.
  rm -f "$PROPS"
  (umask 077 && : >"$PROPS")
  cat >"$PROPS" <<EOF
# Written by compose/kafka.sh on every start; edits here are overwritten.
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$QUORUM_VOTERS
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$DATA_DIR
num.partitions=3
default.replication.factor=$REPLICATION
min.insync.replicas=$MIN_ISR
offsets.topic.replication.factor=$REPLICATION
transaction.state.log.replication.factor=$REPLICATION
transaction.state.log.min.isr=$MIN_ISR
unclean.leader.election.enable=false
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
# After a SIGKILL the controller refuses the restarted broker (DUPLICATE_BROKER_REGISTRATION)
# until the old registration's session expires (default 9 s, plus retry backoff: ~16 s restart).
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
EOF
  if [[ -n "$SASL_PORT" ]]; then
    sasl_config >>"$PROPS"
    write_sasl_client_conf
  fi
  cat >"$LOG4J" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$SERVER_LOG
log4j.appender.file.MaxFileSize=50MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
EOF
}

java_cmd() {
  # shellcheck disable=SC2206
  local heap=($HEAP_OPTS)
  JAVA_CMD=(java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError
    -Djava.awt.headless=true
    "-Dlog4j.configuration=file:$LOG4J" "-Dkafka.logs.dir=$LOG_DIR"
    -cp "$CACHE_DIR/*")
}

format_storage() {
  if [[ -f "$DATA_DIR/meta.properties" ]]; then
    return 0
  fi
  # Cluster id: 16 random bytes, URL-safe base64 without padding (what `random-uuid` prints);
  # Kafka rejects ids that start with '-'.
  local id="$CLUSTER_ID"
  [[ -n "$id" ]] || id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  while [[ "$id" == -* ]]; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  say "formatting storage in $DATA_DIR (cluster id $id)"
  local scram=()
  if [[ -n "$SASL_PORT" ]]; then
    scram=(--add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]"
      --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]")
  fi
  java_cmd
  if ! "${JAVA_CMD[@]}" kafka.tools.StorageTool format -t "$id" -c "$PROPS" "${scram[@]}" \
      >"$LOG_DIR/format.out" 2>&1; then
    cat "$LOG_DIR/format.out" >&2
    die "storage format failed"
  fi
  if [[ -n "$SASL_PORT" ]]; then
    scram_sum >"$SCRAM_MARKER"
  else
    rm -f "$SCRAM_MARKER"
  fi
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! broker_pid >/dev/null; then
      show_log_tail
      rm -f "$PID_FILE"
      die "broker (pid $pid) exited during startup; logs in $LOG_DIR"
    fi
    if answering; then
      [[ -z "$SASL_PORT" ]] && return 0
      upsert_scram_user
      answering_sasl "$SASL_PORT" && return 0
    fi
    sleep 0.5
  done
  show_log_tail
  local what="$ADDR"
  [[ -n "$SASL_PORT" ]] && what="$ADDR and SASL_SSL 127.0.0.1:$SASL_PORT (user $SASL_USER)"
  die "broker (pid $pid) not answering on $what after ${START_TIMEOUT} s; it is still running (stop it with: $0 stop); logs in $LOG_DIR"
}

cmd_start() {
  need java "Java 17+"
  need kcat "apt-get install kcat"
  take_lock
  local pid t0=$SECONDS
  if pid="$(broker_pid)"; then
    say "already running (pid $pid)"
    if [[ -n "$SASL_PORT" && "$(configured_sasl_port)" != "$SASL_PORT" ]]; then
      die "the running broker has no SASL_SSL listener on port $SASL_PORT; stop it first ($0 stop)"
    fi
    [[ -n "$SASL_PORT" ]] && write_sasl_client_conf
    wait_ready "$pid"
    echo "$ADDR"
    return 0
  fi
  rm -f "$PID_FILE"
  local p
  for p in "$PORT" "$CONTROLLER_PORT" $SASL_PORT; do
    if port_busy "$p"; then
      die "port 127.0.0.1:$p is in use by another process (another broker with a different KAFKA_STATE_DIR?); set KAFKA_PORT / KAFKA_CONTROLLER_PORT / KAFKA_SASL_PORT"
    fi
  done
  cmd_fetch
  [[ -n "$SASL_PORT" ]] && ensure_certs
  write_config
  format_storage
  java_cmd
  [[ -f "$SERVER_LOG" ]] && SERVER_LOG_START=$(wc -l <"$SERVER_LOG")
  [[ -f "$CONSOLE_LOG" ]] && CONSOLE_LOG_START=$(wc -l <"$CONSOLE_LOG")
  local sasl_note=""
  [[ -n "$SASL_PORT" ]] && sasl_note=", SASL_SSL on 127.0.0.1:$SASL_PORT (SCRAM user $SASL_USER, CA $CERTS_DIR/ca.crt)"
  say "starting broker on $ADDR (controller 127.0.0.1:$CONTROLLER_PORT)$sasl_note, logs in $LOG_DIR"
  # setsid: own session, so the broker outlives this script and a Ctrl-C in the caller's terminal;
  # 9>&- : the broker must not inherit the lock.
  setsid "${JAVA_CMD[@]}" kafka.Kafka "$PROPS" >>"$CONSOLE_LOG" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  if [[ "$START_WAIT" == 0 ]]; then
    say "started (pid $pid), not waiting for it to answer"
    echo "$ADDR"
    return 0
  fi
  wait_ready "$pid"
  say "ready (pid $pid) in $((SECONDS - t0)) s"
  echo "$ADDR"
}

wait_gone() {
  local pid="$1" secs="$2" deadline
  deadline=$((SECONDS + secs))
  while ((SECONDS < deadline)); do
    broker_pid >/dev/null || return 0
    sleep 0.2
  done
  ! broker_pid >/dev/null
}

cmd_stop() {
  take_lock
  local pid
  if ! pid="$(broker_pid)"; then
    rm -f "$PID_FILE"
    say "not running"
    return 0
  fi
  say "stopping broker (pid $pid) ..."
  kill -TERM "$pid" 2>/dev/null || true
  if wait_gone "$pid" "$STOP_TIMEOUT"; then
    say "stopped"
  else
    say "still running after ${STOP_TIMEOUT} s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || die "pid $pid did not die"
    say "killed"
  fi
  rm -f "$PID_FILE"
}

cmd_kill() {
  take_lock
  local pid
  if ! pid="$(broker_pid)"; then
    rm -f "$PID_FILE"
    say "not running"
    return 0
  fi
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" 10 || die "pid $pid did not die"
  rm -f "$PID_FILE"
  say "killed broker (pid $pid)"
}

cmd_status() {
  need kcat "apt-get install kcat"
  local pid sasl
  if pid="$(broker_pid)" && answering; then
    # A SASL_SSL listener must answer too; with KAFKA_SASL_PORT set, it must be there.
    sasl="$(configured_sasl_port)"
    if [[ -n "$SASL_PORT" && "$sasl" != "$SASL_PORT" ]]; then
      say "running (pid $pid) without a SASL_SSL listener on port $SASL_PORT"
      return 1
    fi
    if [[ -n "$sasl" ]]; then
      if ! answering_sasl "$sasl"; then
        say "running (pid $pid); $ADDR answers, SASL_SSL 127.0.0.1:$sasl does not"
        return 1
      fi
      say "SASL_SSL on 127.0.0.1:$sasl answers"
    fi
    echo "$ADDR"
    return 0
  fi
  if [[ -n "${pid:-}" ]]; then
    say "running (pid $pid) but not answering on $ADDR"
  else
    say "not running"
  fi
  return 1
}

cmd_reset() {
  cmd_stop
  [[ -n "$STATE_DIR" && "$STATE_DIR" != "/" && "$STATE_DIR" != "$REPO" ]] || die "refusing to delete '$STATE_DIR'"
  rm -rf "$STATE_DIR"
  say "deleted $STATE_DIR"
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  status) cmd_status ;;
  reset) cmd_reset ;;
  *)
    echo "usage: $0 fetch|start|stop|kill|status|reset" >&2
    exit 2
    ;;
esac
