#!/usr/bin/env python3
"""Soak: a local cluster under mixed jobs and faults for a fixed time, then one table.

Clients submit barriers, verified collectives, fused matmuls and MoE combines through the real
CLI in a loop; some are killed mid-job, some submit detached and cancel; a fault thread kills a
node (the root too) every --fault-every seconds and starts it again with its command line; a
churn phase opens and drops control connections. Every job must end verified, or failed with an
error that names its cause: a wrong result or a job that outlives its deadline fails the soak,
and so does a fault after which the cluster does not serve again within 30 s.

Usage: bench/soak.sh [--duration 120] [--clients 3] [--nodes 2] [--ranks 2] [--fault-every 30]
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

JOB_DEADLINE_S = 120  # a job running longer than this is counted as hung
SERVE_AGAIN_S = 30    # after a fault, the cluster must verify a job within this
JOBS = [
    ("barrier", ["barrier", "--iters", "200"]),
    ("allreduce", ["collective", "--op", "allreduce", "--bytes", "1MiB", "--iters", "5", "--verify"]),
    ("alltoall", ["collective", "--op", "alltoall", "--bytes", "256KiB", "--iters", "5", "--verify"]),
    ("matmul", ["matmul", "--op", "gemm-allreduce", "--m", "256", "--n", "256", "--k", "256",
                "--iters", "2", "--verify"]),
    ("combine", ["combine", "--tokens", "64", "--hidden", "256", "--topk", "2", "--experts", "8",
                 "--iters", "2", "--verify"]),
]
# What a failed job's error names when a fault caused it.
NAMED = ("node ", "cancelled", "PE ", "re-forming", "not serving", "lost the connection",
         "lost the daemon")


def free_port():
    """A port below the kernel's ephemeral range, probed free: nodes killed and restarted here
    bind theirs again, and a port in that range may meanwhile be some connection's source."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randint(10000, max(10000, low - 1))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def footprint(pid):
    """Threads, RSS (KiB) and open descriptors of a process."""
    out = {"threads": 0, "rss_kib": 0, "fds": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    out["rss_kib"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


class Cluster:
    def __init__(self, bin_dir, nodes, ranks, workdir):
        self.bin = bin_dir
        self.dir = workdir
        self.secret = os.path.join(workdir, "secret")
        with open(self.secret, "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        os.chmod(self.secret, 0o600)
        bootstrap = free_port()
        self.ports = [free_port() for _ in range(nodes)]
        self.args = []
        for n in range(nodes):
            self.args.append([
                f"{bin_dir}/symmeshd", "--node-rank", str(n), "--nodes", str(nodes),
                "--ranks-per-node", str(ranks), "--bootstrap", f"127.0.0.1:{bootstrap}",
                "--listen", "127.0.0.1", "--control-port", str(self.ports[n]),
                "--heap-size", "256MiB", "--secret-file", self.secret, "--data-dir", workdir,
                "--wait-timeout", "20s", "--heartbeat", "500ms", "--rejoin-timeout", "60s",
                "--bootstrap-timeout", "60s", "--log-level", "warn"])
        self.procs = [None] * nodes
        self.starts = [0] * nodes
        for n in range(nodes):
            self.start(n)

    def start(self, n):
        log = open(os.path.join(self.dir, f"node-{n}.{self.starts[n]}.log"), "w")
        self.procs[n] = subprocess.Popen(self.args[n], stdout=log, stderr=subprocess.STDOUT)
        self.starts[n] += 1

    def cli(self, args, node=0, timeout=30):
        command = [f"{self.bin}/symmesh", "--daemon", f"127.0.0.1:{self.ports[node]}",
                   "--secret-file", self.secret, "--connect-timeout", "5s"] + args
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def serving(self):
        try:
            run = self.cli(["status", "--json"], timeout=10)
            status = json.loads(run.stdout)
            return status["state"] == "ready" and all(n["state"] == "up" for n in status["cluster"])
        except (subprocess.TimeoutExpired, ValueError, KeyError):
            return False

    def wait_serving(self, within):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.serving():
                return True
            time.sleep(0.2)
        return False

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            if p:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {k: 0 for k in ("run", "verified", "failed_named", "failed_unnamed",
                                      "wrong", "hung", "client_kills", "detached_cancels")}
        self.latencies = []
        self.unnamed = []
        self.faults = 0
        self.survived = 0

    def add(self, key, latency=None, error=None):
        with self.lock:
            self.counts[key] += 1
            if latency is not None:
                self.latencies.append(latency)
            if error and len(self.unnamed) < 5:
                self.unnamed.append(error)


def client_loop(cluster, tally, stop_at, rng):
    while time.monotonic() < stop_at:
        name, args = rng.choice(JOBS)
        node = rng.randrange(len(cluster.ports))
        roll = rng.random()
        command = [f"{cluster.bin}/symmesh", "--daemon", f"127.0.0.1:{cluster.ports[node]}",
                   "--secret-file", cluster.secret, "--connect-timeout", "5s", "--json",
                   "submit"] + args
        if roll < 0.05:  # detached, then cancelled
            run = subprocess.run(command + ["--detach"], capture_output=True, text=True, timeout=30)
            try:
                job = json.loads(run.stdout)["job_id"]
                cluster.cli(["cancel", str(job)], timeout=30)
                tally.add("detached_cancels")
            except (ValueError, KeyError, subprocess.TimeoutExpired):
                pass
            continue
        tally.add("run")
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if roll < 0.15:  # the client dies mid-job
            time.sleep(rng.uniform(0.0, 0.3))
            proc.kill()
            proc.wait()
            tally.add("client_kills")
            continue
        try:
            out, _ = proc.communicate(timeout=JOB_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            tally.add("hung")
            continue
        elapsed = time.monotonic() - started
        try:
            result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            result = {"status": "error", "error": out.strip()}
        if result.get("status") == "ok":
            verified = result.get("verified")
            if verified is False:
                tally.add("wrong", error=out)
            else:
                tally.add("verified", latency=elapsed)
        elif any(word in result.get("error", "") for word in NAMED):
            tally.add("failed_named")
        else:
            tally.add("failed_unnamed", error=result.get("error", out))


def fault_loop(cluster, tally, stop_at, every, rng, done):
    next_fault = time.monotonic() + every
    while time.monotonic() < stop_at - SERVE_AGAIN_S and not done.is_set():
        if time.monotonic() < next_fault:
            time.sleep(0.2)
            continue
        node = rng.randrange(len(cluster.procs))
        cluster.procs[node].kill()
        cluster.procs[node].wait()
        tally.faults += 1
        time.sleep(rng.uniform(0.5, 2.0))
        cluster.start(node)
        if cluster.wait_serving(SERVE_AGAIN_S):
            tally.survived += 1
        else:
            print(f"soak: node {node} killed and restarted: the cluster did not serve again "
                  f"within {SERVE_AGAIN_S} s", file=sys.stderr)
        next_fault = time.monotonic() + every


def churn(cluster, count):
    """Connections opened and dropped at the root's control port; returns (opened, leaked fds)."""
    pid = cluster.procs[0].pid
    before = footprint(pid)
    for i in range(count):
        with socket.create_connection(("127.0.0.1", cluster.ports[0]), timeout=5) as s:
            if i % 2:
                s.sendall(b"\x05\x00\x00\x00\xff\xff\xff\xff\xff")  # garbage before the handshake
    # The daemon accepts its backlog in order: once a request sent after the churn is answered,
    # every churned connection has been accepted, so a count taken earlier could miss some.
    try:
        cluster.cli(["status", "--json"])
    except subprocess.TimeoutExpired:
        pass
    # Each must then close at once or at the handshake deadline (5 s); two descriptors may be
    # the daemon's own traffic of the moment.
    deadline = time.monotonic() + 15
    fds = footprint(pid)["fds"]
    while time.monotonic() < deadline and fds > before["fds"] + 2:
        time.sleep(0.1)
        fds = footprint(pid)["fds"]
    return count, max(0, fds - before["fds"] - 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--fault-every", type=float, default=30)
    parser.add_argument("--churn", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--summary", help="also write the counts as JSON to this file")
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin"))
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    workdir = tempfile.mkdtemp(prefix="symmesh-soak.")
    cluster = Cluster(os.path.abspath(opts.bin), opts.nodes, opts.ranks, workdir)
    tally = Tally()
    ok = True
    try:
        if not cluster.wait_serving(60):
            print("soak: the cluster never became ready", file=sys.stderr)
            return 1
        start = [footprint(p.pid) for p in cluster.procs]
        opened, leaked = churn(cluster, opts.churn)
        started = time.monotonic()
        stop_at = started + opts.duration
        done = threading.Event()
        threads = [threading.Thread(target=client_loop,
                                    args=(cluster, tally, stop_at, random.Random(rng.random())))
                   for _ in range(opts.clients)]
        faults = threading.Thread(target=fault_loop,
                                  args=(cluster, tally, stop_at, opts.fault_every,
                                        random.Random(rng.random()), done))
        for t in threads + [faults]:
            t.start()
        for t in threads:
            t.join()
        done.set()
        faults.join()
        serving = cluster.wait_serving(SERVE_AGAIN_S)
        end = [footprint(p.pid) for p in cluster.procs]
        c = tally.counts
        lat = sorted(tally.latencies)
        p50 = statistics.median(lat) if lat else float("nan")
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
        restarted = [n for n in range(opts.nodes) if cluster.starts[n] > 1]
        print(f"symmesh bench/soak.sh: {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
              f"{opts.nodes} nodes x {opts.ranks} ranks, {opts.clients} clients, "
              f"{opts.duration:.0f} s, a node killed every {opts.fault_every:.0f} s")
        print("| what | count |")
        print("|---|---|")
        for label, value in [
                ("jobs run", c["run"]), ("jobs verified (or ok)", c["verified"]),
                ("jobs failed with a named error", c["failed_named"]),
                ("jobs failed with another error", c["failed_unnamed"]),
                ("jobs with a wrong result (must be 0)", c["wrong"]),
                ("jobs hung past 120 s (must be 0)", c["hung"]),
                ("clients killed mid-job", c["client_kills"]),
                ("detached jobs cancelled", c["detached_cancels"]),
                ("node kills (with restart) injected", tally.faults),
                ("node kills survived (serving again within 30 s)", tally.survived),
                ("control connections opened and dropped", opened),
                ("descriptors leaked by them (must be 0)", leaked),
                ("job latency p50 / p99 (s)", f"{p50:.2f} / {p99:.2f}")]:
            print(f"| {label} | {value} |")
        print("| node | threads start -> end | RSS MiB start -> end | restarted |")
        print("|---|---|---|---|")
        for n in range(opts.nodes):
            print(f"| {n} | {start[n]['threads']} -> {end[n]['threads']} | "
                  f"{start[n]['rss_kib'] / 1024:.0f} -> {end[n]['rss_kib'] / 1024:.0f} | "
                  f"{'yes' if n in restarted else 'no'} |")
        for error in tally.unnamed:
            print(f"soak: an error that names no cause: {error.strip()[:300]}", file=sys.stderr)
        ok = (c["wrong"] == 0 and c["hung"] == 0 and tally.survived == tally.faults and
              leaked == 0 and serving and c["verified"] > 0)
        if opts.summary:
            with open(opts.summary, "w") as f:
                json.dump(dict(c, faults=tally.faults, survived=tally.survived, opened=opened,
                               leaked=leaked, p50_s=p50, p99_s=p99, passed=ok), f)
        print(f"soak: {'passed' if ok else 'FAILED'}")
    finally:
        cluster.stop()
    if ok:
        subprocess.run(["rm", "-rf", workdir])
    else:
        print(f"soak: logs kept in {workdir}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
