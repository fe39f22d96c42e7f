#!/usr/bin/python3
"""SIGHUP parses the configuration off the control loop: while a parse is
held (the configuration file is a FIFO nobody writes yet), the daemon keeps
publishing, connects keep being steered and the tables never expire. SIGHUPs
during a parse make one more parse, not one each. SIGTERM does not wait for
a parse that is held."""
import os
import signal
import threading
import time
import urllib.request

import e2e_lib as L
from taplib import Tap

L.enter_private_netns()

VIP1, VIP2 = "127.0.0.100:8000", "127.0.0.101:8000"
INTERVAL_S = 0.5  # tables expire 3 intervals (1.5 s) after their publish
HOLD_S = 4.0      # how long each parse is held: well past the expiry
t = Tap()
env = L.Env("reload")
w1 = L.Worker(env, "w1", "127.0.0.41:8000", "127.0.0.41:30000").start()
w2 = L.Worker(env, "w2", "127.0.0.42:8000", "127.0.0.42:30000").start()
cfg = os.path.join(env.tmp, "steer.yaml")


def config_text(services, level="info"):
    out = f"load-check-interval: {int(INTERVAL_S * 1000)}ms\nlog-level: {level}\nservices:\n"
    for vip, b in services:
        out += f"  - vip: {vip}\n    backends:\n      - address: {b}:8000\n        loads: {b}:30000\n"
    return out


def write_regular(text):
    tmp = cfg + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, cfg)


def make_fifo():
    tmp = cfg + ".fifo"
    os.mkfifo(tmp)
    os.rename(tmp, cfg)


def parse_running(d):
    """True while daemon d's parse thread (named smg-reload) exists: with
    the file a FIFO nobody writes, it is blocked opening it."""
    task = f"/proc/{d.proc.pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/comm") as f:
                if f.read().strip() == "smg-reload":
                    return True
        except OSError:
            pass  # the thread ended meanwhile
    return False


def feed_fifo(text):
    with open(cfg, "w") as f:  # blocks until the parse has opened it
        f.write(text)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


class Prober:
    """Connects to VIP1 in a loop, keeping every result."""

    def __init__(self):
        self.results, self.stop = [], threading.Event()
        self.th = threading.Thread(target=self.run)
        self.th.start()

    def run(self):
        while not self.stop.is_set():
            self.results.append(L.connect_name(VIP1))
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.th.join()
        return self.results


def fallbacks(d):
    return d.metric("smg_steer_fallback_connections_total", vip=VIP1)


def hold_parse(d, what):
    """With a parse blocked on the FIFO: publishing goes on, connects are
    steered, nothing falls back to the stale-table round robin."""
    wait_for(lambda: parse_running(d), 30, f"{what}: the parse starting")
    start, t0 = d.publishes(), time.monotonic()
    fb0 = fallbacks(d)
    probe = Prober()
    # Held for HOLD_S (past the 1.5 s expiry) and until a few publishes
    # happened, however slow the machine.
    wait_for(lambda: time.monotonic() - t0 >= HOLD_S and d.publishes() >= start + 3, 60,
             f"{what}: publishes during the parse")
    got = probe.finish()
    held = time.monotonic() - t0
    t.check(parse_running(d), f"{what}: the parse was not held")
    t.check(got and all(g == "w1" for g in got),
            f"{what}: {sum(g != 'w1' for g in got)} of {len(got)} connects not steered: "
            f"{sorted(set(got))}")
    t.check(fallbacks(d) == fb0, f"{what}: the table expired ({fallbacks(d) - fb0} fallbacks)")
    with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/healthz", timeout=10) as r:
        t.check(r.status == 200, f"{what}: /healthz {r.status}")
    print(f"# {what}: held {held:.1f} s, {d.publishes() - start} publishes, "
          f"{len(got)} connects all steered, no fallback")


env.enter_cgroup()
write_regular(config_text([(VIP1, "127.0.0.41")]))
d = L.Daemon(env, ["--config", cfg]).start()
d.wait_publishes(2, timeout=30)

with t.case("publishing and steering go on while a reload's parse is held"):
    make_fifo()
    d.send(signal.SIGHUP)
    hold_parse(d, "first parse")

with t.case("SIGHUPs during a parse make one more parse after it, not one each"):
    for i in range(1, 4):
        # One at a time: signals sent together merge into one before the
        # daemon sees them.
        d.send(signal.SIGHUP)
        wait_for(lambda: d.log_text().count("SIGHUP during a parse") >= i, 30,
                 f"SIGHUP {i} during the parse seen")
    feed_fifo(config_text([(VIP1, "127.0.0.41"), (VIP2, "127.0.0.42")]))
    # The first parse is applied (VIP2 appears), then the one more parse
    # opens the FIFO again and is held like the first.
    wait_for(lambda: L.connect_name(VIP2) == "w2", 30, "VIP2 steered after the first parse")
    hold_parse(d, "the parse after it")
    feed_fifo(config_text([(VIP1, "127.0.0.41"), (VIP2, "127.0.0.42")], level="debug"))
    wait_for(lambda: d.log_text().count("reloaded ") >= 2, 30, "the second reload applied")
    log = d.log_text()
    t.check(log.count("reload: parsing") == 2, f"{log.count('reload: parsing')} parses, want 2")
    t.check(log.count("reloaded ") == 2, f"{log.count('reloaded ')} reloads applied, want 2")
    t.check(L.connect_name(VIP1) == "w1" and L.connect_name(VIP2) == "w2", "steering after")

class PublishWatch:
    """Samples the publish count every 20 ms and keeps the longest time
    between two increases."""

    def __init__(self, d):
        self.d, self.stop, self.max_gap = d, threading.Event(), 0.0
        self.th = threading.Thread(target=self.run)
        self.th.start()

    def run(self):
        last, since = self.d.publishes(), time.monotonic()
        while not self.stop.is_set():
            now_count, now = self.d.publishes(), time.monotonic()
            if now_count != last:
                last, since = now_count, now
            self.max_gap = max(self.max_gap, now - since)
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.th.join()
        return self.max_gap


with t.case("a burst of SIGHUPs never delays the regular poll"):
    # Each applied reload runs one cycle at once. Those early cycles must
    # leave the regular tick where it was: were each to push it one interval
    # out, 40 SIGHUPs would hold polling off for many seconds and the
    # tables would expire into round robin.
    two = config_text([(VIP1, "127.0.0.41"), (VIP2, "127.0.0.42")])
    write_regular(two)
    wait_for(lambda: not parse_running(d), 30, "no parse running")
    reloads0, fb0 = d.log_text().count("reloaded "), fallbacks(d)
    watch, probe = PublishWatch(d), Prober()
    for _ in range(40):
        d.send(signal.SIGHUP)
        time.sleep(0.05)
    burst_end, pub_end = time.monotonic(), d.publishes()
    # Past the tables' expiry (1.5 s) after the burst, and until the regular
    # schedule has published a few times, however slow the machine.
    wait_for(lambda: time.monotonic() - burst_end >= 6 and d.publishes() >= pub_end + 4, 60,
             "publishes after the burst")
    max_gap, got = watch.finish(), probe.finish()
    applied = d.log_text().count("reloaded ") - reloads0
    t.check(applied >= 1, "no reload applied")
    t.check(fallbacks(d) == fb0, f"the table expired during the burst ({fallbacks(d) - fb0} fallbacks)")
    t.check(got and all(g == "w1" for g in got),
            f"{sum(g != 'w1' for g in got)} of {len(got)} connects not steered")
    print(f"# {applied} reloads applied; {d.publishes() - pub_end} publishes (2 VIPs) in "
          f"{time.monotonic() - burst_end:.1f} s after the burst; longest time without a "
          f"publish {max_gap:.2f} s (interval {INTERVAL_S} s); {len(got)} connects, no fallback")

with t.case("SIGTERM exits at once while a parse is held"):
    make_fifo()
    d.send(signal.SIGHUP)
    wait_for(lambda: parse_running(d), 30, "the parse starting")
    rc, took = d.stop(timeout=30)
    t.check(rc == 0, f"exit {rc}")
    print(f"# stopped in {took:.2f} s with the parse held")
    t.check(not os.path.exists(env.pin), "pins left behind")

env.cleanup()
t.done()
