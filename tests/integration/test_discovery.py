#!/usr/bin/python3
"""DNS discovery end to end: the real smg-steerd finds fake SGLang workers
through a real DNS server (dnsmasq, Debian's dnsmasq-base, on
127.0.0.53:5353 in the test's network namespace), whose hosts file the test
rewrites while a client keeps connecting to the VIP.

One IPv4 service mixes a literal backend (wL) with the name workers.test; an
IPv6 service uses the same name, whose AAAA record is its only backend.
Checked: 0 failed connects through the whole churn; a new record's worker
gets nothing until its first good poll, and traffic soon after; a removed
record's worker gets no new connect once the publish without it is out, and
its open connections stay up; a dead DNS server keeps the last known set
(and the metrics say so); SIGHUP keeps the set of a name that stays; live
connection counts follow closes, also of a removed backend's connections.
"""
import os
import signal
import socket
import subprocess
import threading
import time

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP = "127.0.0.100:8000"
VIP6 = "[2001:db8::100]:8000"
# Absolute names (a trailing dot): never tried with the host's search domains
# first, which a resolv.conf with ndots > 1 would do (and dnsmasq, with no
# upstream, refuses those).
NAME = "workers.test."
EXTRA = "extra.test."
DNS = "127.0.0.53"
t = Tap()
env = L.Env("discovery")
HOSTS = os.path.join(env.tmp, "hosts")
CONFIG = os.path.join(env.tmp, "steer.yaml")

# Workers: w1..w5 are found through DNS, wL is a literal backend, w6 the
# IPv6 service's (an AAAA record of the same name).
ADDR = {"w1": "127.0.0.21", "w2": "127.0.0.22", "w3": "127.0.0.23", "w4": "127.0.0.24",
        "w5": "127.0.0.25", "wL": "127.0.0.31", "w6": "2001:db8::26"}


def hostport(n, port):
    a = ADDR[n]
    return f"[{a}]:{port}" if ":" in a else f"{a}:{port}"


subprocess.run(["ip", "-6", "addr", "add", "2001:db8::26/128", "dev", "lo", "nodad"], check=True)
workers = {n: L.Worker(env, n, hostport(n, 8000), hostport(n, 30000)) for n in ADDR}
for w in workers.values():
    w.start()


def write_hosts(names, extra=()):
    """workers.test -> the names' addresses, plus wL's (also a literal backend)
    and the VIP's (which must never become a backend); extra: (name, host) pairs."""
    lines = [f"{ADDR[n]} {NAME[:-1]}" for n in names + ["wL"]] + [f"127.0.0.100 {NAME[:-1]}"]
    lines += [f"{ADDR[n]} {host.rstrip('.')}" for n, host in extra]
    tmp = HOSTS + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, HOSTS)


def write_config(extra_names=()):
    lines = ["load-check-interval: 250ms", "dns-interval: 200ms", f"dns-server: {DNS}:5353",
             "log-level: debug", "services:",
             f"  - vip: {VIP}",
             "    backends:",
             f"      - {hostport('wL', 8000)},loads=grpc://{hostport('wL', 30000)}",
             "    backend-dns:",
             f"      - name: {NAME}:8000",
             "        loads: grpc://:30000"]
    lines += [f"      - {n}:8000,loads=grpc://:30000" for n in extra_names]
    lines += [f"  - vip: '{VIP6}'", "    backend-dns:", f"      - {NAME}:8000,loads=grpc://:30000"]
    with open(CONFIG, "w") as f:
        f.write("\n".join(lines) + "\n")


class Client(threading.Thread):
    """Connects to the VIP in a loop; log: (monotonic start, name or errno)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.log = []
        self.stopping = False

    def run(self):
        while not self.stopping:
            t0 = time.monotonic()
            self.log.append((t0, L.connect_name(VIP, timeout=3)))
            time.sleep(0.002)

    def since(self, t0):
        return [r for (ts, r) in list(self.log) if ts >= t0]

    def first(self, name, t0):
        for ts, r in list(self.log):
            if ts >= t0 and r == name:
                return ts
        return None


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if d.proc.poll() is not None:
            raise RuntimeError(f"daemon exited: {d.log_text()[-3000:]}")
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError(f"not within {timeout}s: {what}\n" + d.log_text()[-3000:])


def sample(metric, **labels):
    """The value of one series, or None (labels may include 'name', which
    Daemon.metric takes as the metric's)."""
    return scrape().get((metric, tuple(sorted(labels.items()))))


def scrape():
    """The metrics; a scrape that fails (the machine is busy) is tried again."""
    for _ in range(20):
        try:
            return d.metrics()
        except OSError:
            time.sleep(0.1)
    return {}


def dns_backends(vip=VIP, name=NAME):
    return sample("smg_steer_dns_backends", vip=vip, name=name, port="8000")


def dns_metric(metric, **labels):
    return sample(metric, name=NAME, **labels)


def backends_published():
    """The IPv4 service's backends as the metrics (written after each publish) list them."""
    return {dict(labels)["backend"] for (name, labels) in scrape()
            if name == "smg_steer_backend_healthy" and dict(labels)["vip"] == VIP}


def reach(names, t0):
    """Wait until the client's connects since t0 have reached every worker of names."""
    wait_for(lambda: names <= set(client.since(t0)), 20,
             f"connects reach {sorted(names)}")


def hold(name, n, vip=VIP):
    """n open connections through the VIP that landed on worker name."""
    held, tries = [], 0
    while len(held) < n and tries < 2000:
        tries += 1
        fam, sa = L.parse_addr(vip)
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(sa)
        got = s.recv(64).decode().strip()
        if got == name:
            held.append(s)
        else:
            s.close()
    if len(held) < n:
        raise RuntimeError(f"could not land {n} connections on {name}")
    return held


def still_open(s):
    """The connection takes data and has not been closed or reset."""
    try:
        s.sendall(b"ping\n")
        s.setblocking(False)
        try:
            return s.recv(64) != b""  # the worker never writes again: no data
        except BlockingIOError:
            return True
        finally:
            s.setblocking(True)
    except OSError:
        return False


def live(name):
    return d.metric("smg_steer_backend_live_connections", vip=VIP, backend=hostport(name, 8000))


figures = {}
dns = L.Dnsmasq(env, DNS, HOSTS)
write_hosts(["w1", "w2", "w6"])
dns.start()
write_config()
env.enter_cgroup()
d = L.Daemon(env, ["--config", CONFIG, "--keep-pinned"]).start()
client = Client()

with t.case("at start the service steers to the resolved workers and the literal one"):
    wait_for(lambda: dns_backends() == 2, 20, "2 DNS backends for the IPv4 VIP")
    seen = set()
    wait_for(lambda: seen.update(L.connect_name(VIP) for _ in range(20)) or
             {"w1", "w2", "wL"} <= seen, 20, "connects reach w1, w2 and wL")
    t.check(seen == {"w1", "w2", "wL"}, f"connects went to {seen}")
    # wL is also an A record of the name: the literal backend wins, once.
    t.check(dns_backends() == 2, f"DNS backends {dns_backends()} (wL counted?)")
    t.check(dns_metric("smg_steer_dns_addresses") == 5, "w1, w2, wL, w6 and the VIP resolve")
    # The record naming the VIP is left out, and said so once.
    t.check(d.log_text().count("1 address(es) cannot be backends") == 1, "no warning")

with t.case("the IPv6 VIP takes the name's AAAA record only (family decided per address)"):
    wait_for(lambda: dns_backends(VIP6) == 1, 20, "1 DNS backend for the IPv6 VIP")
    got = {L.connect_name(VIP6) for _ in range(10)}
    t.check(got == {"w6"}, f"IPv6 connects went to {got}")
    t.check(dns_metric("smg_steer_dns_resolutions_total", result="ok") >= 1, "no ok look-up")

client.start()

with t.case("a new record's worker gets nothing until its first good poll"):
    workers["w3"].set_state({"mode": "garbage"})
    t_add = time.monotonic()
    write_hosts(["w1", "w2", "w3", "w6"])
    dns.reload()
    wait_for(lambda: dns_backends() == 3, 15, "w3 discovered")
    w3 = hostport("w3", 8000)
    wait_for(lambda: (d.metric("smg_steer_polls_total", vip=VIP, backend=w3,
                               result="invalid") or 0) >= 3, 15, "w3 polled (invalid)")
    d.wait_publishes(2, timeout=15)
    got = client.since(t_add)
    t.check("w3" not in got, "w3 got a connect before any good poll")
    t_ok = time.monotonic()
    workers["w3"].set_state({"mode": "ok", "loads": [L.idle_rank()]})
    first = wait_for(lambda: client.first("w3", t_ok), 15, "w3 gets traffic once it answers")
    figures["w3: first connect after its load turned good"] = first - t_ok

with t.case("a new record with a healthy worker gets traffic within seconds"):
    t_add = time.monotonic()
    write_hosts(["w1", "w2", "w3", "w4", "w6"])
    dns.reload()
    first = wait_for(lambda: client.first("w4", t_add), 15, "w4 gets traffic")
    figures["w4: record added -> first connect"] = first - t_add
    # Two look-ups a second apart (TTL 1 s floors the 200 ms interval), a
    # poll of 250 ms period: well within 5 s.
    t.check(first - t_add < 5, f"took {first - t_add:.2f}s")
    # The metrics trail the publish that brought w4: the next case's wait for
    # 3 backends must start from 4, not meet the 3 of before w4.
    wait_for(lambda: dns_backends() == 4, 15, "the metrics show w4")

with t.case("a removed record's worker gets no new connect after the next publish; "
            "its open connections stay"):
    held1 = hold("w1", 3)
    held2 = hold("w2", 2)
    t_rm = time.monotonic()
    write_hosts(["w2", "w3", "w4", "w6"])
    dns.reload()
    # The metrics are written after each publish: once they show the
    # removal, the table without w1 is in effect.
    wait_for(lambda: dns_backends() == 3, 15, "w1 removed")
    t_gone = time.monotonic()
    figures["w1: record removed -> out of the published table"] = t_gone - t_rm
    d.wait_publishes(2, timeout=15)
    late = [r for r in client.since(t_gone) if r == "w1"]
    t.check(not late, f"{len(late)} connects went to w1 after its removal was published")
    t.check(all(still_open(s) for s in held1), "a connection to the removed w1 was cut")
    reach({"w2", "w3", "w4", "wL"}, t_gone)

with t.case("a dead DNS server keeps the last known set, warns once, and the metrics say so"):
    failed0 = dns_metric("smg_steer_dns_resolutions_total", result="failed") or 0
    dns.kill()
    wait_for(lambda: dns_metric("smg_steer_dns_stale") == 1, 15, "stale")
    wait_for(lambda: (dns_metric("smg_steer_dns_resolutions_total", result="failed") or 0)
             >= failed0 + 3, 20, "3 failed look-ups")
    t.check(dns_backends() == 3, f"DNS backends {dns_backends()} while the server is down")
    t.check(dns_backends(VIP6) == 1, "the IPv6 service lost its backend")
    t.check(dns_metric("smg_steer_dns_addresses") == 6, "the last known addresses are kept")
    warned = [ln for ln in d.log_text().splitlines() if f"dns: {NAME}: " in ln and
              "keeping the last known" in ln]
    t.check(len(warned) == 1, f"{len(warned)} warnings: {warned}")
    reach({"w2", "w3", "w4", "wL"}, time.monotonic())

with t.case("SIGHUP keeps the set of a name that stays (the server is still down)"):
    write_config(extra_names=[EXTRA])
    n_reloads = d.log_text().count("reloaded")
    d.send(signal.SIGHUP)
    wait_for(lambda: d.log_text().count("reloaded") > n_reloads, 15, "reload")
    d.wait_publishes(2, timeout=15)
    t.check(dns_backends() == 3, f"DNS backends {dns_backends()} after the reload")
    t.check(dns_backends(name=EXTRA) == 0, "extra.test has backends without a server")
    reach({"w2", "w3", "w4", "wL"}, time.monotonic())

with t.case("the server is back: the reload's new name finds its worker"):
    write_hosts(["w2", "w3", "w4", "w6"], extra=[("w5", EXTRA)])
    t_back = time.monotonic()
    dns.start()
    first = wait_for(lambda: client.first("w5", t_back), 20, "w5 gets traffic")
    figures["w5: server restarted -> first connect"] = first - t_back
    wait_for(lambda: dns_metric("smg_steer_dns_stale") == 0, 15, "no longer stale")
    # The metrics are written just after each publish (after the kernel's grace
    # period), so they may trail the first connect by a moment.
    wait_for(lambda: dns_backends(name=EXTRA) == 1, 15, "extra.test's backend in the metrics")

# Exact live counts need the client's own connections closed.
client.stopping = True
client.join(10)

with t.case("live counts follow closes, also of the removed backend's connections"):
    wait_for(lambda: live("w2") == 2, 15, "w2 has its 2 held connections")
    for s in held1:
        s.close()
    d.wait_publishes(2, timeout=15)
    counts = {n: live(n) for n in ("w2", "w3", "w4", "w5", "wL")}
    t.check(counts == {"w2": 2, "w3": 0, "w4": 0, "w5": 0, "wL": 0},
            f"after closing w1's connections: {counts}")
    for s in held2:
        s.close()
    wait_for(lambda: live("w2") == 0, 15, "w2 back to 0")

log_before = client.log
client = Client()
client.start()

with t.case("records flap: each round's removed worker gets nothing once published"):
    rounds = [["w1", "w3", "w4"], ["w1", "w2", "w4"], ["w1", "w3"], ["w2", "w3", "w4", "w1"]]
    for names in rounds:
        write_hosts(names + ["w6"], extra=[("w5", EXTRA)])
        dns.reload()
        want = {hostport(n, 8000) for n in names + ["wL", "w5"]}
        wait_for(lambda: backends_published() == want, 15, f"{names} published")
        t_pub = time.monotonic()
        reach(set(names), t_pub)
        gone = {n for n in ("w1", "w2", "w3", "w4") if n not in names}
        late = [r for r in client.since(t_pub) if r in gone]
        t.check(not late, f"round {names}: connects to removed workers {late}")

with t.case("a restart with --keep-pinned: the first publish already has the DNS backends"):
    want = backends_published()
    t_restart = time.monotonic()
    rc, _ = d.stop()
    t.check(rc == 0, f"exit {rc}")
    d = L.Daemon(env, ["--config", CONFIG, "--keep-pinned"]).start()
    t.check(backends_published() == want, f"first publish {backends_published()} != {want}")
    reach({"w1", "w2", "w3", "w4", "w5", "wL"}, time.monotonic())
    bad = [r for r in client.since(t_restart) if r not in ADDR]
    t.check(not bad, f"{len(bad)} failed connects across the restart: {sorted(set(bad))}")

client.stopping = True
client.join(10)
client.log = log_before + client.log

with t.case("0 failed connects through the whole churn"):
    results = [r for _, r in client.log]
    bad = [r for r in results if r not in ADDR]
    per = {n: results.count(n) for n in sorted(ADDR)}
    figures["client connects"] = len(results)
    t.check(len(results) > 500, f"only {len(results)} connects")
    t.check(not bad, f"{len(bad)} failed of {len(results)}: {sorted(set(bad))}")
    t.check(per["wL"] > 0 and per["w2"] > 0, f"per worker {per}")
    print(f"# connects per worker: {per}")

for k, v in figures.items():
    print(f"# {k}: {v:.3f}" if isinstance(v, float) else f"# {k}: {v}")
if os.environ.get("SHOW_LOG"):
    print("\n".join("# " + ln for ln in d.log_text().splitlines() if "debug" not in ln))
rc, _ = d.stop()
with t.case("the daemon exits cleanly"):
    t.check(rc == 0, f"exit {rc}")
t.done()
