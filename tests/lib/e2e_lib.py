"""Surroundings for end-to-end tests of smg-steerd, run with /usr/bin/python3.

Everything happens in a private network namespace (the test re-executes
itself under `unshare -n`), with a throwaway cgroup that the test process
joins for its client connects, a private pin directory, and fake workers
(tests/lib/fake_worker.py). Env.cleanup() removes all of it, also on failure.
"""
import atexit
import errno
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

TOP = os.environ.get("STEER_TOP") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("STEER_BUILD") or os.path.join(TOP, "build", "san")
PY = "/usr/bin/python3"


def enter_private_netns():
    """Re-exec under `unshare -n` once, then bring lo up."""
    if os.environ.get("STEER_E2E_NETNS") != "1":
        os.environ["STEER_E2E_NETNS"] = "1"
        os.execvp("unshare", ["unshare", "-n", "--", PY] + sys.argv)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[2] == "cgroup2":
                return parts[1]
    raise RuntimeError("no cgroup2 mount")


class Env:
    """One test's cgroup, pin directory, temp files and child processes."""

    def __init__(self, name):
        self.name = name
        self.root_cg = cgroup2_root()
        self.cgroup = os.path.join(self.root_cg, f"smg-steer-test-{name}-{os.getpid()}")
        self.pin = f"/sys/fs/bpf/smg-steer-test-{name}-{os.getpid()}"
        self.tmp = tempfile.mkdtemp(prefix=f"smg-steer-{name}-")
        self.procs = []
        self.children = []
        os.mkdir(self.cgroup)
        atexit.register(self.cleanup)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, sig, frame):
        self.cleanup()
        sys.exit(1)

    def child_cgroup(self, name):
        """A cgroup below the test's, removed (first) by cleanup."""
        path = os.path.join(self.cgroup, name)
        os.mkdir(path)
        self.children.append(path)
        return path

    def enter(self, cgroup):
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def enter_cgroup(self):
        with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def leave_cgroup(self):
        with open(os.path.join(self.root_cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def _to_root_cgroup(self):
        # Children live outside the test's cgroup: only the client is steered.
        with open(os.path.join(self.root_cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, preexec_fn=self._to_root_cgroup, **kw)
        self.procs.append(p)
        return p

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        self.procs = []
        subprocess.run(["rm", "-rf", self.pin], check=False)
        if os.path.isdir(self.cgroup):
            try:
                self.leave_cgroup()
            except OSError:
                pass
            for c in reversed(self.children):
                try:
                    os.rmdir(c)
                except OSError:
                    pass
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass
        subprocess.run(["rm", "-rf", self.tmp], check=False)


class Worker:
    """A fake SGLang worker: GetLoads from a state file, TCP that says its name."""

    def __init__(self, env, name, traffic, grpc, state=None):
        self.env, self.name, self.traffic, self.grpc = env, name, traffic, grpc
        self.state_path = os.path.join(env.tmp, f"{name}.json")
        self.proc = None
        self.set_state(state or {"mode": "ok", "loads": [idle_rank()]})

    def set_state(self, state):
        self.state = state
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.rename(tmp, self.state_path)

    def start(self):
        argv = [PY, os.path.join(TOP, "tests", "lib", "fake_worker.py"), "--name", self.name,
                "--traffic", self.traffic, "--state", self.state_path,
                "--pb2-dir", os.path.join(BUILD, "py")]
        if self.grpc:
            argv += ["--grpc", self.grpc]
        self.proc = self.env.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True)
        deadline = time.monotonic() + 15
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("READY") or not line:
                break
        if not line.startswith("READY"):
            raise RuntimeError(f"worker {self.name} did not start")
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stats(self):
        try:
            with open(self.state_path + ".stats") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}


def idle_rank(rank=0):
    return {"dp_rank": rank, "num_waiting_uncached_tokens": 0, "num_waiting_reqs": 0,
            "num_running_reqs": 0, "token_usage": 0.0, "gen_throughput": 0.0}


def rank(queued, kv, tp, waiting=0, r=0):
    return {"dp_rank": r, "num_waiting_uncached_tokens": queued, "num_waiting_reqs": waiting,
            "num_running_reqs": 4, "token_usage": kv, "gen_throughput": tp}


class Dnsmasq:
    """A real DNS server (Debian's dnsmasq-base) on addr:5353 in the test's
    namespace, answering from a hosts file the test rewrites (reload() makes
    it read the file again), with a TTL of 1 s."""

    def __init__(self, env, addr, hosts):
        self.env, self.addr, self.hosts = env, addr, hosts
        self.proc = None

    def start(self):
        self.proc = self.env.spawn(["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
                                    "--no-resolv", "--no-hosts", "--bind-interfaces",
                                    f"--listen-address={self.addr}", "--port=5353",
                                    "--local-ttl=1", "--pid-file=", "--user=root",
                                    f"--addn-hosts={self.hosts}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def reload(self):
        self.proc.send_signal(signal.SIGHUP)

    def kill(self):
        self.proc.kill()
        self.proc.wait(5)


class Daemon:
    def __init__(self, env, args, metrics_port=9464, binary="smg-steerd"):
        self.env = env
        self.args = list(args)
        self.metrics_port = metrics_port
        self.binary = os.path.join(BUILD, binary)
        self.log_path = os.path.join(env.tmp, f"daemon-{len(env.procs)}.log")
        self.proc = None

    def argv(self):
        return [self.binary, "--pin-path", self.env.pin, "--cgroup", self.env.cgroup,
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}"] + self.args

    def start(self, wait_publish=True):
        self.log = open(self.log_path, "w")
        self.proc = self.env.spawn(self.argv(), stdout=self.log, stderr=subprocess.STDOUT)
        if wait_publish:
            self.wait_publishes(1, timeout=20)
        return self

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def metrics(self):
        """{(name, ((label, value), ...)): value} of the current scrape."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def metric(self, name, **labels):
        try:
            m = self.metrics()
        except (urllib.error.URLError, OSError, ConnectionError):
            return None
        return m.get((name, tuple(sorted(labels.items()))))

    def publishes(self):
        try:
            m = self.metrics()
        except (urllib.error.URLError, OSError, ConnectionError):
            return 0
        return sum(v for (n, _), v in m.items() if n == "smg_steer_table_publishes_total")

    def wait_publishes(self, count, timeout=20):
        """Wait until `count` more publishes have happened."""
        start = self.publishes()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode}:\n"
                                   + self.log_text()[-3000:])
            if self.publishes() >= start + count:
                return
            time.sleep(0.05)
        raise RuntimeError(f"no {count} publishes within {timeout}s:\n" + self.log_text()[-3000:])

    def send(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc, time.monotonic() - t0


def wait_for(cond, timeout, what):
    """Poll cond() until it returns something true, for at most timeout
    seconds (generous: a loaded machine is slow, never wrong). Returns that
    value; raises AssertionError naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def parse_addr(a):
    if a.startswith("["):
        host, port = a[1:].split("]:")
        return socket.AF_INET6, (host, int(port))
    host, port = a.rsplit(":", 1)
    return socket.AF_INET, (host, int(port))


# smg-steer's socket option of the application's affinity key (bpf/steer_common.h)
SOL_SMG_STEER_AFFINITY, SMG_STEER_AFFINITY_KEY = 0x534D47, 1


def connect_name(addr, timeout=3.0, affinity_key=None):
    """Connect (with the application's affinity key, when given), read the
    backend's name line, close. Returns the name, or the errno name of a
    failed connect (e.g. 'ECONNREFUSED')."""
    fam, sa = parse_addr(addr)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        if affinity_key is not None:
            s.setsockopt(SOL_SMG_STEER_AFFINITY, SMG_STEER_AFFINITY_KEY,
                         struct.pack("=Q", affinity_key))
        s.connect(sa)
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
        return data.decode().strip() or "EOF"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    finally:
        s.close()


# ---- the independent reference: smg's least_load formula and the kernel's water-fill ----

def reference_costs(state, w=0.15, default_tp=2000.0):
    """(base_wait_ns, ns_per_token) of a worker from its fake state, written
    out from the formula, not taken from the daemon."""
    loads = state["loads"]
    q = sum(r["num_waiting_uncached_tokens"] for r in loads)
    tp = sum(r["gen_throughput"] for r in loads)
    k = sum(r["token_usage"] for r in loads) / len(loads)
    tp_used = tp if tp > 0 else default_tp
    k = min(max(k, 0.0), 0.999)
    base_s = q / tp_used + w * k / (1.0 - k)
    return int(base_s * 1e9), int(1e9 / tp_used)


def water_fill(entries, n, credit=1024):
    """entries: [(name, base_ns, ns_per_token)] in configuration order.
    The table is sorted by base wait (ties by configuration order); each
    connect takes the least base + inflight * ns_per_token, ties to the
    earlier table position, and credits `credit` tokens."""
    table = sorted(enumerate(entries), key=lambda ie: (ie[1][1], ie[0]))
    inflight = {name: 0 for name, _, _ in entries}
    picks = []
    for _ in range(n):
        best = None
        for _, (name, base, npt) in table:
            score = base + inflight[name] * npt
            if best is None or score < best[0]:
                best = (score, name)
        picks.append(best[1])
        inflight[best[1]] += credit
    return picks
