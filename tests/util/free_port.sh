# free_port: prints a loopback port nobody holds right now, chosen by the kernel. A random
# port can be another test's listener or a client connection's ephemeral port (Linux hands
# those out from 32768 up), and a server that cannot bind its port exits at start.
# Sourced by the test and bench scripts: . "$REPO/tests/util/free_port.sh"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
