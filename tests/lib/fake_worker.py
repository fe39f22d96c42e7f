#!/usr/bin/python3
"""A fake SGLang worker for the tests, the demo and the benchmarks.

It serves the real gRPC method /sglang.grpc.scheduler.SglangScheduler/GetLoads
with grpcio (an implementation independent of smg-steer's C code) and a plain
TCP "traffic" port that tells each client its name:

    /usr/bin/python3 tests/lib/fake_worker.py --name b1 --traffic 127.0.0.11:8000 \\
        --grpc 127.0.0.11:30000 --state /tmp/dir/b1.json [--pb2-dir build/san/py]

    /usr/bin/python3 tests/lib/fake_worker.py --many 100 --base 127.1.0.1 --port 30000 \\
        --state /tmp/dir/all.json

The state file is read again whenever it changes (tests rewrite it atomically:
write a temporary file, then rename), so every GetLoads call answers what it
says now:

    {"mode": "ok" | "unimplemented" | "hang" | "garbage" | "empty" | "invalid",
     "traffic": "ok" | "refuse" | "reset" | "reset-on-request",
     "hang_seconds": 10,
     "loads": [{"dp_rank": 0, "num_waiting_uncached_tokens": 4000,
                "num_waiting_reqs": 3, "num_running_reqs": 8,
                "token_usage": 0.42, "gen_throughput": 1800.0}, ...]}

  ok             one SchedulerLoad per entry of "loads"
  unimplemented  status UNIMPLEMENTED (an engine without GetLoads)
  hang           answer "ok" after hang_seconds (so the client's deadline fires)
  garbage        status OK with bytes that are no protobuf message
  empty          a valid response without loads
  invalid        the entries of "loads" as given (NaN and -Infinity are valid
                 JSON for Python), or one rank with token_usage NaN and
                 num_waiting_uncached_tokens -5 when "loads" is absent

"traffic" is how the traffic port behaves (GetLoads answers as "mode" says
all the same), followed within 50 ms of a change:

  ok             each client gets "<name>\\n" (the default)
  refuse         no listener: connects are refused
  reset          each connection is accepted, then reset at once (SO_LINGER 0),
                 before any byte
  reset-on-request  each connection is reset (SO_LINGER 0) as soon as its first
                 bytes arrive, before any answer; one that sends nothing is
                 held until the client closes it
  http           an HTTP/1.1 server: each request (up to its blank line) gets
                 "HTTP/1.1 <http_status>" with "Retry-After: <retry_after>"
                 when the state has it, and the body "<name>\n"; the
                 connection then closes

A missing or unparsable state file means "ok" with one idle rank. Counters
are written to "<state>.stats" as {"getloads": N, "accepted": M}, at most
every 100 ms. "READY <name>" goes to stdout once every listener is bound.
SIGTERM and SIGINT stop the worker cleanly.
"""
import argparse
import datetime
import ipaddress
import json
import os
import resource
import signal
import socket
import struct
import sys
import threading
import time
from concurrent import futures

import grpc

SERVICE = "sglang.grpc.scheduler.SglangScheduler"
GARBAGE = b"\xff\xff\xff\xff"  # a truncated varint: no protobuf parser accepts it
IDLE_RANK = {"dp_rank": 0, "num_waiting_uncached_tokens": 0, "num_waiting_reqs": 0,
             "num_running_reqs": 0, "token_usage": 0.0, "gen_throughput": 0.0}
INVALID_RANK = {"dp_rank": 0, "num_waiting_uncached_tokens": -5, "num_waiting_reqs": 0,
                "num_running_reqs": 0, "token_usage": float("nan"), "gen_throughput": 0.0}
MODES = ("ok", "unimplemented", "hang", "garbage", "empty", "invalid")
TRAFFIC_MODES = ("ok", "refuse", "reset", "reset-on-request", "http")
INT_FIELDS = ("dp_rank", "num_waiting_uncached_tokens", "num_waiting_reqs", "num_running_reqs")
FLOAT_FIELDS = ("token_usage", "gen_throughput")
TRAFFIC_IDLE_TIMEOUT_S = 60


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_pb2_dir():
    build = os.environ.get("STEER_BUILD")
    if build:
        return os.path.join(build, "py")
    for sub in ("build/san/py", "build/py"):
        d = os.path.join(repo_root(), sub)
        if os.path.exists(os.path.join(d, "sglang_scheduler_pb2.py")):
            return d
    return os.path.join(repo_root(), "build/san/py")


def split_addr(addr):
    """'127.0.0.1:8000' or '[::1]:8000' -> (family, host, port)."""
    if addr.startswith("["):
        host, sep, port = addr[1:].partition("]:")
        if not sep:
            raise ValueError(f"bad address {addr!r}, expected [v6]:port")
        return socket.AF_INET6, host, int(port)
    host, sep, port = addr.rpartition(":")
    if not sep:
        raise ValueError(f"bad address {addr!r}, expected host:port")
    return socket.AF_INET, host, int(port)


class State:
    """The state file, parsed again only when it changed (cheap per call)."""

    def __init__(self, path):
        self.path = path
        self.key = None
        self.value = self.default()
        self.lock = threading.Lock()

    @staticmethod
    def default():
        return {"mode": "ok", "traffic": "ok", "hang_seconds": 10.0, "http_status": 200,
                "retry_after": None, "loads": [dict(IDLE_RANK)]}

    def parse(self, text):
        raw = json.loads(text)
        mode = raw.get("mode", "ok")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        traffic = raw.get("traffic", "ok")
        if traffic not in TRAFFIC_MODES:
            raise ValueError(f"unknown traffic {traffic!r}")
        st = {"mode": mode, "traffic": traffic,
              "hang_seconds": float(raw.get("hang_seconds", 10.0)),
              "http_status": int(raw.get("http_status", 200)),
              "retry_after": raw.get("retry_after")}
        loads = raw.get("loads")
        if loads is None:
            st["loads"] = [dict(INVALID_RANK)] if mode == "invalid" else [dict(IDLE_RANK)]
        else:
            st["loads"] = [self.rank(entry) for entry in loads]
        return st

    @staticmethod
    def rank(entry):
        r = {}
        for f in INT_FIELDS:
            r[f] = int(entry.get(f, 0))
        for f in FLOAT_FIELDS:
            r[f] = float(entry.get(f, 0.0))
        return r

    def get(self):
        try:
            s = os.stat(self.path)
            key = (s.st_dev, s.st_ino, s.st_mtime_ns, s.st_size)
        except OSError:
            key = None
        with self.lock:
            if key != self.key:
                self.key = key
                try:
                    with open(self.path) as f:
                        self.value = self.parse(f.read())
                except (OSError, ValueError, TypeError, AttributeError, OverflowError):
                    self.value = self.default()
            return self.value


class Stats:
    """Counters, written atomically to <state>.stats by a background thread."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.counts = {"getloads": 0, "accepted": 0}
        self.dirty = True
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def bump(self, what):
        with self.lock:
            self.counts[what] += 1
            self.dirty = True

    def flush(self):
        with self.lock:
            if not self.dirty:
                return
            text = json.dumps(self.counts)
            self.dirty = False
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, self.path)
        except OSError as e:
            print(f"fake_worker: cannot write {self.path}: {e}", file=sys.stderr, flush=True)

    def loop(self):
        while not self.stop.wait(0.1):
            self.flush()

    def start(self):
        self.flush()
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.flush()


class Worker:
    def __init__(self, pb2, state, stats):
        self.pb2 = pb2
        self.state = state
        self.stats = stats

    def response(self, loads):
        pb2 = self.pb2
        resp = pb2.GetLoadsResponse(
            timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(),
            version="fake", dp_rank_count=len(loads))
        for r in loads:
            resp.loads.append(pb2.SchedulerLoad(
                dp_rank=r["dp_rank"], num_running_reqs=r["num_running_reqs"],
                num_waiting_reqs=r["num_waiting_reqs"],
                num_total_reqs=r["num_running_reqs"] + r["num_waiting_reqs"],
                num_waiting_uncached_tokens=r["num_waiting_uncached_tokens"],
                token_usage=r["token_usage"], gen_throughput=r["gen_throughput"]))
        if loads:
            agg = resp.aggregate
            agg.total_running_reqs = sum(r["num_running_reqs"] for r in loads)
            agg.total_waiting_reqs = sum(r["num_waiting_reqs"] for r in loads)
            agg.total_reqs = agg.total_running_reqs + agg.total_waiting_reqs
            agg.avg_token_usage = sum(r["token_usage"] for r in loads) / len(loads)
            agg.avg_throughput = sum(r["gen_throughput"] for r in loads) / len(loads)
        return resp.SerializeToString()

    @staticmethod
    def hang(context, seconds):
        """Sleep, but give the thread back as soon as the client gave up."""
        end = time.monotonic() + seconds
        while context.is_active():
            left = end - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.05))
        return False

    def get_loads(self, request, context):
        self.stats.bump("getloads")
        st = self.state.get()
        mode = st["mode"]
        if mode == "unimplemented":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "GetLoads is not implemented (fake)")
        if mode == "garbage":
            return GARBAGE
        if mode == "empty":
            return self.response([])
        if mode == "hang" and not self.hang(context, st["hang_seconds"]):
            context.abort(grpc.StatusCode.CANCELLED, "client went away")
        return self.response(st["loads"])

    def handler(self):
        def parse_request(data):
            # The client must send a well-formed GetLoadsRequest.
            return self.pb2.GetLoadsRequest.FromString(data)

        method = grpc.unary_unary_rpc_method_handler(
            self.get_loads, request_deserializer=parse_request,
            response_serializer=lambda b: b)  # bytes pass through, garbage included
        return grpc.method_handlers_generic_handler(SERVICE, {"GetLoads": method})


def reset(conn):
    """Close with SO_LINGER 0: the peer gets a reset, not a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class Traffic:
    """A TCP listener: each client gets "<name>\\n", then the worker waits
    for the client to close, like a server holding a connection open. How
    it behaves follows the state's "traffic" (follow): "refuse" closes the
    listener, "reset" resets each connection as soon as it is accepted,
    "reset-on-request" as soon as it has a request."""

    def __init__(self, addr, name, stats):
        self.family, self.host, self.port = split_addr(addr)
        self.name = name
        self.stats = stats
        self.sock = None
        self.error = None  # why the last listen() failed
        self.mode = "ok"
        self.http_status, self.retry_after = 200, None

    def listen(self):
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((self.host, self.port))
            sock.listen(1024)
        except OSError as e:
            sock.close()
            self.error = e  # the next follow tries again
            return
        self.sock, self.error = sock, None
        threading.Thread(target=self.accept_loop, args=(sock,), daemon=True).start()

    def follow(self, mode, http_status=200, retry_after=None):
        """Behave as the state's "traffic" says now."""
        self.mode = mode
        self.http_status, self.retry_after = http_status, retry_after
        if mode == "refuse" and self.sock:
            self.close()
        elif mode != "refuse" and not self.sock:
            self.listen()

    def accept_loop(self, sock):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed: shutdown, or "refuse"
            self.stats.bump("accepted")
            if self.mode == "reset":
                reset(conn)
                continue
            serve = {"reset-on-request": self.reset_on_request,
                     "http": self.serve_http}.get(self.mode, self.serve)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    @staticmethod
    def reset_on_request(conn):
        try:
            conn.settimeout(TRAFFIC_IDLE_TIMEOUT_S)
            if conn.recv(4096):
                reset(conn)
                return
        except OSError:
            pass
        conn.close()

    def serve(self, conn):
        with conn:
            try:
                conn.sendall(f"{self.name}\n".encode())
                conn.settimeout(TRAFFIC_IDLE_TIMEOUT_S)
                while conn.recv(4096):
                    pass
            except OSError:
                pass

    def serve_http(self, conn):
        """One HTTP/1.1 request, answered with the state's status, then closed."""
        with conn:
            try:
                conn.settimeout(TRAFFIC_IDLE_TIMEOUT_S)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                body = f"{self.name}\n".encode()
                head = f"HTTP/1.1 {self.http_status} Status\r\ncontent-type: text/plain\r\n"
                if self.retry_after is not None:
                    head += f"Retry-After: {self.retry_after}\r\n"
                head += f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
                conn.sendall(head.encode() + body)
            except OSError:
                pass

    def close(self):
        sock, self.sock = self.sock, None
        if not sock:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def traffic_of(st):
    """Traffic.follow's arguments from a state."""
    return st["traffic"], st["http_status"], st["retry_after"]


def load_pb2(pb2_dir):
    sys.path.insert(0, os.path.abspath(pb2_dir))
    try:
        import sglang_scheduler_pb2
    except ImportError as e:
        sys.exit(f"fake_worker: cannot import sglang_scheduler_pb2 from {pb2_dir}: {e}")
    return sglang_scheduler_pb2


def raise_fd_limit():
    """--many holds a listener and a connection per address."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def grpc_addresses(args):
    if args.many:
        base = ipaddress.IPv4Address(args.base)
        return [f"{base + i}:{args.port}" for i in range(args.many)]
    return [args.grpc] if args.grpc else []


def start_grpc(addresses, worker, threads):
    if not addresses:
        return None
    # No SO_REUSEPORT: a second worker on the same port must fail loudly
    # (gRPC sets SO_REUSEADDR on its listeners itself).
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads),
                         handlers=[worker.handler()], options=[("grpc.so_reuseport", 0)])
    for addr in addresses:
        try:
            port = server.add_insecure_port(addr)
        except RuntimeError as e:
            sys.exit(f"fake_worker: cannot bind {addr}: {e}")
        if port == 0:
            sys.exit(f"fake_worker: cannot bind {addr}")
    server.start()
    return server


def parse_args(argv):
    ap = argparse.ArgumentParser(description="A fake SGLang worker (GetLoads over gRPC).")
    ap.add_argument("--name", default="fake")
    ap.add_argument("--traffic", help="host:port or [v6]:port answering '<name>\\n'")
    ap.add_argument("--grpc", help="host:port or [v6]:port serving GetLoads (absent: none)")
    ap.add_argument("--state", required=True, help="JSON state file, read on every call")
    ap.add_argument("--pb2-dir", default=None, help="where sglang_scheduler_pb2.py is")
    ap.add_argument("--many", type=int, default=0,
                    help="serve GetLoads on N consecutive IPv4 addresses from --base")
    ap.add_argument("--base", default="127.1.0.1")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--threads", type=int, default=16, help="gRPC handler threads")
    args = ap.parse_args(argv)
    if args.many < 0:
        ap.error("--many must be >= 0")
    if args.many and args.grpc:
        ap.error("--many and --grpc exclude each other")
    if not args.many and not args.grpc and not args.traffic:
        ap.error("nothing to serve: give --traffic, --grpc or --many")
    return args


def main(argv):
    args = parse_args(argv)
    raise_fd_limit()
    pb2 = load_pb2(args.pb2_dir or default_pb2_dir())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    stats = Stats(args.state + ".stats")
    state = State(args.state)
    worker = Worker(pb2, state, stats)
    traffic = Traffic(args.traffic, args.name, stats) if args.traffic else None
    server = start_grpc(grpc_addresses(args), worker, args.threads)
    stats.start()
    if traffic:
        traffic.follow(*traffic_of(state.get()))
        if traffic.error:
            sys.exit(f"fake_worker: cannot bind {args.traffic}: {traffic.error}")
    print(f"READY {args.name}", flush=True)

    while not stop.wait(0.05):
        if traffic:
            traffic.follow(*traffic_of(state.get()))
    if server:
        server.stop(grace=0).wait()
    if traffic:
        traffic.close()
    stats.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
