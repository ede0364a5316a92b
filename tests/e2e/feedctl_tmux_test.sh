#!/usr/bin/env bash
# feedctl in a real terminal (tmux): commands typed into a shell and read off the screen, and
# `feedctl stock watch` as a live table: it shows the snapshot, redraws on every change with
# the last one in reverse video, survives a server restart (resuming without a gap), and ends
# on Ctrl-C with exit status 0.
#
# Usage: feedctl_tmux_test.sh FEED_SERVER FEEDCTL
set -u
SERVER_BIN="$1" FEEDCTL="$2"
WORK="$(mktemp -d /tmp/feedctl-tmux-XXXXXX)"
SESSION="feedctl-test-$$"
SERVER_PID=""
fail() {
  echo "FAIL: $*" >&2
  echo "--- shell pane:" >&2; tmux capture-pane -p -t "$SESSION:0.0" >&2
  echo "--- watch pane:" >&2; tmux capture-pane -p -t "$SESSION:0.1" >&2; tail -5 "$WORK/server.log" >&2
  exit 1
}
cleanup() {
  tmux kill-session -t "$SESSION" 2>/dev/null
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/../util/free_port.sh"
PORT="$(free_port)"
start_server() {
  "$SERVER_BIN" --listen "127.0.0.1:$PORT" --http-listen "" --metrics-listen "" \
    --data-dir "$WORK/data" --log-rpcs false >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0; sleep 0.05; done
  fail "server did not start"
}
# screen PANE [-e]: what the pane shows now.
screen() { tmux capture-pane -p ${2:-} -t "$SESSION:0.$1"; }
# wait_for PANE PATTERN [-e]: until the pane shows a line matching the extended regex.
wait_for() {
  for _ in $(seq 1 100); do
    screen "$1" "${3:-}" | grep -Eq -- "$2" && return 0
    sleep 0.1
  done
  fail "pane $1 never showed /$2/"
}
type_in() { tmux send-keys -t "$SESSION:0.0" "$1" Enter; }

start_server
# Pane 0: a shell to type into; pane 1: the live table.
tmux new-session -d -s "$SESSION" -x 160 -y 40 \
  "env FEEDCTL_SERVER=127.0.0.1:$PORT PS1='$ ' bash --norc --noprofile"
tmux set-option -t "$SESSION" remain-on-exit on >/dev/null
type_in "alias feedctl='$FEEDCTL'"
type_in "feedctl stock adjust sku-a 5 --set; feedctl stock adjust sku-b 8 --set --location wh-2"
wait_for 0 "^sku-b @ wh-2: on_hand 8, reserved 0, available 8"
# The watch's exit status goes to a file (the shell around it ignores Ctrl-C; feedctl does not).
tmux split-window -t "$SESSION:0" -v "env FEEDCTL_SERVER=127.0.0.1:$PORT TERM=xterm bash -c 'trap \"\" INT; $FEEDCTL stock watch sku-a sku-b sku-c; echo \$? >$WORK/watch.status'"
wait_for 1 "^sku-a +default +5 +0 +5 "
wait_for 1 "^sku-b +wh-2 +8 +0 +8 "
wait_for 1 "\[live\]"

# A reservation typed in the shell: the table shows it, that row highlighted.
type_in "feedctl reservation create sku-b:3@wh-2"
wait_for 0 "HELD: 3 x sku-b @ wh-2"
wait_for 1 "^sku-b +wh-2 +8 +3 +5 "
screen 1 -e | grep -q $'\x1b\\[7msku-b' || fail "the last change (sku-b) is not highlighted"
# A new SKU appears in sorted place.
type_in "feedctl stock adjust sku-c 1 --set"
wait_for 1 "^sku-c +default +1 +0 +1 "
rows="$(screen 1 | grep -E '^sku-[abc] ' | cut -c1-5 | tr '\n' ' ')"
[ "$rows" = "sku-a sku-b sku-c " ] || fail "rows not sorted: $rows"
type_in "feedctl stock get sku-z; echo exit=\$?"
wait_for 0 "^exit=0"
type_in "feedctl reservation create sku-a:99; echo exit=\$?"
wait_for 0 "FAILED_PRECONDITION: insufficient stock for sku 'sku-a'"
wait_for 0 "^exit=2"

# The server restarts: the table says it is reconnecting, then goes on from where it was.
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
wait_for 1 "reconnecting"
start_server
type_in "feedctl stock adjust sku-a 2"
wait_for 1 "^sku-a +default +7 +0 +7 "
wait_for 1 "\[live\]"

# Ctrl-C ends the watch with status 0.
tmux send-keys -t "$SESSION:0.1" C-c
for _ in $(seq 1 50); do
  [ "$(tmux display-message -p -t "$SESSION:0.1" '#{pane_dead}')" = 1 ] && break
  sleep 0.1
done
[ "$(tmux display-message -p -t "$SESSION:0.1" '#{pane_dead}')" = 1 ] || fail "watch still running after Ctrl-C"
[ "$(cat "$WORK/watch.status")" = 0 ] || fail "watch exited $(cat "$WORK/watch.status") after Ctrl-C"
echo "feedctl_tmux_test: ok"
