#!/usr/bin/env python3
"""Drive echo-server + ghz on loopback and record throughput, latency and CPU per run.

Each run starts a fresh echo-server, runs ghz against it for --duration, then SIGTERMs the
server (the exit code and shutdown time are checked). Besides ghz's numbers it records:
  * load average before the run (/proc/loadavg),
  * server CPU (all threads) and ghz CPU, in core-seconds, and per server thread (by name),
  * "foreign" CPU = system user+nice+system time - server - ghz: anything else on the machine
    (another build, a broker, ...) during the run; irq/softirq (loopback TCP work) and steal
    (hypervisor) are reported separately. Runs with foreign CPU above --max-foreign (fraction
    of one core) are flagged and repeated once.
Rounds are interleaved (all configs once, then all again) so slow drift hits every config.

Usage: measure.py --server /tmp/echo-build/echo-server --ghz /tmp/gobin/ghz \
                  --proto bench/echo/echo.proto --rounds 2 --duration 15 --out results.json
"""
import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time

TCK = os.sysconf("SC_CLK_TCK")

# name, pinned (server on CPU 0, ghz on CPU 1), server args, ghz concurrency
CONFIGS = [
    ("cq-t2   c50  shared", False, ["--api", "cq", "--threads", "2"], 50),
    ("cq-t1   c50  shared", False, ["--api", "cq", "--threads", "1"], 50),
    ("callback c50  shared", False, ["--api", "callback"], 50),
    ("cq-t2   c200 shared", False, ["--api", "cq", "--threads", "2"], 200),
    ("cq-t1   c200 shared", False, ["--api", "cq", "--threads", "1"], 200),
    ("callback c200 shared", False, ["--api", "callback"], 200),
    ("cq-t1   c50  pinned", True, ["--api", "cq", "--threads", "1"], 50),
    ("cq-t2   c50  pinned", True, ["--api", "cq", "--threads", "2"], 50),
    ("callback c50  pinned", True, ["--api", "callback"], 50),
    ("cq-t1   c200 pinned", True, ["--api", "cq", "--threads", "1"], 200),
    ("callback c200 pinned", True, ["--api", "callback"], 200),
]


def system_busy():
    """(task time = user+nice+system, irq+softirq, steal) in seconds, whole machine."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    return ((vals[0] + vals[1] + vals[2]) / TCK, (vals[5] + vals[6]) / TCK, vals[7] / TCK)


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TCK


def thread_cpu(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except FileNotFoundError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / TCK)
    return out


def all_procs():
    """pid -> (comm, own + reaped-children CPU seconds) for every process."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        v = s[s.rindex(")") + 2:].split()
        out[int(pid)] = (name, sum(int(x) for x in v[11:15]) / TCK)
    return out


def top_foreign(p0, p1, exclude, wall, n=3):
    deltas = []
    for pid, (name, cpu) in p1.items():
        if pid in exclude:
            continue
        d = cpu - p0.get(pid, (name, 0.0))[1]
        if d > 0.01 * wall:
            deltas.append((round(d / wall, 2), f"{name}[{pid}]"))
    return sorted(deltas, reverse=True)[:n]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_port(port, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on {port}")


def one_run(a, name, pinned, sargs, conc, port):
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    addr = f"127.0.0.1:{port}"
    scmd = ([ "taskset", "-c", "0"] if pinned else []) + [a.server, "--listen", addr] + sargs
    gcmd = (["taskset", "-c", "1"] if pinned else []) + [
        a.ghz, "--insecure", "--proto", a.proto, "--call", "bench.echo.v1.Echo.Echo",
        "-d", '{"value":"hello"}', "-c", str(conc), "--connections", "4",
        "-z", f"{a.duration}s", "-O", "json", addr]
    srv = subprocess.Popen(scmd, stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port)
        time.sleep(0.3)
        busy0, s0, c0, t0 = system_busy(), proc_cpu(srv.pid), children_cpu(), time.time()
        th0 = thread_cpu(srv.pid)
        p0 = all_procs()
        g = subprocess.run(gcmd, capture_output=True, text=True)
        busy1, s1, c1, t1 = system_busy(), proc_cpu(srv.pid), children_cpu(), time.time()
        th1 = thread_cpu(srv.pid)
        p1 = all_procs()
    finally:
        ts = time.time()
        srv.send_signal(signal.SIGTERM)
        try:
            rc = srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            rc = "timeout"
        shutdown_s = time.time() - ts
        serr = srv.stderr.read()
    if g.returncode != 0:
        raise RuntimeError(f"ghz failed: {g.stderr}")
    d = json.loads(g.stdout)
    lat = {p["percentage"]: p["latency"] / 1e6 for p in d["latencyDistribution"]}
    wall = t1 - t0
    server_cpu, ghz_cpu = s1 - s0, c1 - c0
    foreign = (busy1[0] - busy0[0]) - server_cpu - ghz_cpu
    irq = busy1[1] - busy0[1]
    steal = busy1[2] - busy0[2]
    threads = {}
    for tid, (tname, cpu) in th1.items():
        before = th0.get(tid, (tname, 0.0))[1]
        e = threads.setdefault(tname, [0, 0.0])
        e[0] += 1
        e[1] += cpu - before
    ok = d["statusCodeDistribution"].get("OK", 0)
    return {
        "config": name, "pinned": pinned, "server_args": sargs, "concurrency": conc,
        "load_before": load, "rps": d["rps"], "count": d["count"], "ok": ok,
        "non_ok": d["count"] - ok, "status": d["statusCodeDistribution"],
        "p50_ms": lat[50], "p99_ms": lat[99], "avg_ms": d["average"] / 1e6,
        "wall_s": wall, "server_cpu_cores": server_cpu / wall, "ghz_cpu_cores": ghz_cpu / wall,
        "foreign_cpu_cores": foreign / wall, "irq_softirq_cores": irq / wall,
        "steal_cores": steal / wall,
        "top_foreign": top_foreign(p0, p1, {os.getpid(), srv.pid}, wall),
        "server_cpu_us_per_req": server_cpu / max(ok, 1) * 1e6,
        "server_threads": {k: {"n": v[0], "cpu_cores": round(v[1] / wall, 3)}
                           for k, v in sorted(threads.items())},
        "server_rc": rc, "shutdown_s": shutdown_s, "server_stderr": serr.strip(),
        "cmd_server": " ".join(scmd), "cmd_ghz": " ".join(gcmd).replace(
            '{"value":"hello"}', "'{\"value\":\"hello\"}'"),
    }


def fmt(r):
    return (f"{r['config']:<28} load[{r['load_before']}] rps={r['rps']:8.0f} "
            f"p50={r['p50_ms']:6.2f}ms p99={r['p99_ms']:6.2f}ms "
            f"srv={r['server_cpu_cores']:.2f} ghz={r['ghz_cpu_cores']:.2f} "
            f"foreign={r['foreign_cpu_cores']:.2f} si={r['irq_softirq_cores']:.2f} st={r['steal_cores']:.2f} cores  srv_us/req={r['server_cpu_us_per_req']:.1f} "
            f"rc={r['server_rc']} shut={r['shutdown_s']:.2f}s non_ok={r['non_ok']}"
            + (f" others={r['top_foreign']}" if r["top_foreign"] else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--ghz", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--max-foreign", type=float, default=0.10)
    ap.add_argument("--only", default="", help="comma-separated substrings of config names")
    ap.add_argument("--port", type=int, default=50071)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    configs = CONFIGS
    if a.only:
        keys = a.only.split(",")
        configs = [c for c in CONFIGS if any(k in c[0] for k in keys)]
    results = []
    port = a.port
    for rnd in range(a.rounds):
        for name, pinned, sargs, conc in configs:
            for attempt in range(2):
                port += 1
                r = one_run(a, name, pinned, sargs, conc, port)
                r["round"], r["attempt"] = rnd + 1, attempt + 1
                r["disturbed"] = r["foreign_cpu_cores"] > a.max_foreign
                results.append(r)
                print(f"r{rnd + 1}a{attempt + 1} " + fmt(r) + ("  DISTURBED" if r["disturbed"] else ""),
                      flush=True)
                with open(a.out, "w") as f:
                    json.dump(results, f, indent=1)
                if not r["disturbed"]:
                    break
    return 0


if __name__ == "__main__":
    sys.exit(main())
