# free_port: prints a loopback port nobody holds right now, chosen by the kernel. A random
# port can be another test's listener or a client connection's ephemeral port (Linux hands
# those out from 32768 up), and a server that cannot bind its port exits at start. The
# kernel may hand the same free port to two calls in a row, so the ports given to one script
# ($$ is the script's pid in every subshell) are kept in a file and never given twice; the
# files of scripts that have ended are removed by the next call.
# Sourced by the test and bench scripts: . "$REPO/tests/util/free_port.sh"
free_port() {
  python3 - "${TMPDIR:-/tmp}/feed-free-ports.$$" <<'PY'
import glob, os, socket, sys

path = sys.argv[1]
for old in glob.glob(os.path.join(os.path.dirname(path), "feed-free-ports.*")):
    if not os.path.exists("/proc/" + old.rsplit(".", 1)[1]):
        try:
            os.remove(old)
        except FileNotFoundError:  # another script's call removed it first
            pass
try:
    with open(path) as f:
        given = set(f.read().split())
except FileNotFoundError:
    given = set()
held = []  # kept bound until one is chosen, so the kernel cannot offer the same one again
for _ in range(64):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
    port = str(s.getsockname()[1])
    if port not in given:
        break
else:
    sys.exit("free_port: no port that this script has not been given already")
with open(path, "a") as f:
    f.write(port + "\n")
print(port)
PY
}
