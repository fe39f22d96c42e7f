#!/usr/bin/python3
"""Fake inference engines for every load source smg reads, for the tests.

One process is one worker. Everything is served on its traffic port, as a
real engine does (smg-steerd's auto-detection probes the traffic port):

    /usr/bin/python3 tests/lib/fake_engines.py --kind KIND --name w1 \\
        --traffic 127.0.0.11:8000 --state /tmp/dir/w1.json \\
        [--grpc 127.0.0.11:30000] [--variant V] [--pb2-dir build/san/py]

KIND           load endpoint on the traffic port
sglang-grpc    gRPC /sglang.grpc.scheduler.SglangScheduler/GetLoads
vllm-grpc      gRPC /vllm.grpc.engine.VllmEngine/GetLoads (fields 1-11)
tokenspeed-grpc  gRPC /tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads
http-loads     HTTP GET /v1/loads (JSON); 404 on /metrics
vllm-metrics   HTTP GET /metrics, vLLM names (--variant v1: kv_cache_usage_perc,
               v0: gpu_cache_usage_perc); 404 on /v1/loads
sglang-metrics HTTP GET /metrics, SGLang names (--variant sglang: up to 0.5.3,
               sglang_ from 0.5.4); 404 on /v1/loads
sglang-http    both /v1/loads and /metrics (SGLang with the custom endpoint)
plain          an HTTP server with no load endpoint: 404 on both

A gRPC kind's port speaks gRPC (HTTP/2, proxied to a grpcio server on a
private unix socket) and answers nothing else but the traffic request below.
An HTTP kind's port speaks HTTP/1.1 (Python's http.server); an HTTP/2
preface gets uvicorn's 400, as from a real vLLM or SGLang HTTP server.
--grpc adds a plain grpcio listener, for the old separate
`loads=ADDR:PORT` (gRPC kinds only).

Traffic: `GET /whoami` answers the worker's name as the body (any kind), so a
test can tell which backend a steered connection reached.

The state file is read again whenever it changes (write a temporary file,
then rename), so each answer follows what it says now:

    {"mode": "ok", "hang_seconds": 10, "token": null,
     "loads": [{"dp_rank": 0, "num_waiting_uncached_tokens": 4000,
                "num_waiting_reqs": 3, "num_running_reqs": 8,
                "token_usage": 0.42, "gen_throughput": 1800.0}, ...]}

  ok            the loads in the kind's format (one rank or label set each)
  unimplemented gRPC UNIMPLEMENTED; HTTP 404 on the load endpoints
  hang          answer after hang_seconds (the client's deadline fires first)
  garbage       gRPC status OK with bytes that are no protobuf; HTTP 200, binary
  truncated     the answer cut in half (a partial protobuf, JSON or exposition)
  empty         no ranks: an empty loads list; /metrics without the engine's names
  invalid       the ranks as given, or one rank with NaN KV and -5 queued tokens
  nan_kv        rank 0's KV usage is NaN (NaN in the exposition, NaN in JSON)
  no_kv         /metrics with the engine's names but without the KV usage gauge
  http_500      HTTP 500 (gRPC: INTERNAL)
  http_401      HTTP 401 (gRPC: UNAUTHENTICATED)
  slow_body     HTTP 200 whose body dribbles in over hang_seconds (gRPC: hang)
  http_on_grpc  gRPC kinds: HTTP/2 connections get an HTTP/1.1 answer instead
  grpc_on_http  HTTP kinds: load requests reach a gRPC server instead
  oversized     gRPC kinds: the answer padded past 256 KiB with an unknown field

"token": when set, the load endpoints require `Authorization: Bearer TOKEN`
(HTTP header, or gRPC metadata `authorization`); otherwise 401 or
UNAUTHENTICATED. A switch between transports closes the open connections.

Counters go to "<state>.stats" (JSON, at most every 100 ms): "whoami" (traffic
connections answered), "getloads" (gRPC GetLoads answered), "grpc_other"
(other gRPC methods, answered UNIMPLEMENTED), "GET /v1/loads", "GET /metrics"
(and any other path), "auth_ok", "auth_bad", "silent" (connections closed
before sending a byte: TCP liveness probes), "h2" and "http1" connections,
"proxied_to_grpc", "http_on_grpc", "h2_refused". "READY <name>" goes to
stdout once every listener is bound; SIGTERM and SIGINT stop it.
"""
import argparse
import http.server
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_payloads as P  # noqa: E402
from fake_worker import default_pb2_dir, raise_fd_limit, split_addr  # noqa: E402

KINDS = {
    # kind: (gRPC engine or None, serves /v1/loads, metrics names or None)
    "sglang-grpc": ("sglang", False, None),
    "vllm-grpc": ("vllm", False, None),
    "tokenspeed-grpc": ("tokenspeed", False, None),
    "http-loads": (None, True, None),
    "vllm-metrics": (None, False, "vllm"),
    "sglang-metrics": (None, False, "sglang"),
    "sglang-http": (None, True, "sglang"),
    "plain": (None, False, None),
}
VARIANTS = {"vllm": ("v1", "v0"), "sglang": ("sglang:", "sglang_")}
MODES = ("ok", "unimplemented", "hang", "garbage", "truncated", "empty", "invalid", "nan_kv",
         "no_kv", "http_500", "http_401", "slow_body", "http_on_grpc", "grpc_on_http",
         "oversized")
H2_PREFACE_START = b"PRI "
WHOAMI = b"GET /whoami "
GARBAGE = b"\xff\xff\xff\xff\x00\x1f\x8b\x08"
INVALID_RANK = {"dp_rank": 0, "num_waiting_uncached_tokens": -5, "token_usage": float("nan")}
SNIFF_TIMEOUT_S = 10
IDLE_TIMEOUT_S = 60
TICK_S = 0.1


class State:
    """The state file, parsed again only when it changed. A file that does
    not parse keeps the previous state (and says so on stderr)."""

    def __init__(self, path):
        self.path = path
        self.key = None
        self.value = {"mode": "ok", "hang_seconds": 10.0, "token": None,
                      "loads": [P.normalize_rank({})]}
        self.lock = threading.Lock()

    @staticmethod
    def parse(text):
        raw = json.loads(text)
        mode = raw.get("mode", "ok")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        token = raw.get("token")
        if token is not None and not isinstance(token, str):
            raise ValueError("token must be a string or null")
        loads = raw.get("loads")
        if loads is None:
            loads = [INVALID_RANK] if mode == "invalid" else [{}]
        return {"mode": mode, "hang_seconds": float(raw.get("hang_seconds", 10.0)),
                "token": token,
                "loads": [P.normalize_rank(e, i) for i, e in enumerate(loads)]}

    def get(self):
        try:
            s = os.stat(self.path)
            key = (s.st_dev, s.st_ino, s.st_mtime_ns, s.st_size)
        except OSError:
            key = None
        with self.lock:
            if key is not None and key != self.key:
                self.key = key
                try:
                    with open(self.path) as f:
                        self.value = self.parse(f.read())
                except (OSError, ValueError, TypeError, AttributeError) as e:
                    print(f"fake_engines: {self.path}: {e}; keeping the previous state",
                          file=sys.stderr, flush=True)
            return self.value


class Stats:
    """Named counters, written atomically to <state>.stats by a thread."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.counts = {}
        self.dirty = True
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def bump(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            self.dirty = True

    def flush(self):
        with self.lock:
            if not self.dirty:
                return
            text = json.dumps(self.counts, sort_keys=True)
            self.dirty = False
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, self.path)
        except OSError as e:
            print(f"fake_engines: cannot write {self.path}: {e}", file=sys.stderr, flush=True)

    def loop(self):
        while not self.stop.wait(TICK_S):
            self.flush()

    def start(self):
        self.flush()
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.flush()


def client_gone(sock):
    """True when the peer closed (or reset) the connection."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
        return bool(r) and not sock.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def wait_unless_gone(seconds, gone):
    """Sleep up to `seconds`; False as soon as gone() says the client left."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if gone():
            return False
        time.sleep(min(TICK_S / 2, max(0.0, end - time.monotonic())))
    return True


# ---- gRPC ------------------------------------------------------------------------

class GrpcSide:
    """The worker's GetLoads, served by grpcio on a private unix socket (the
    traffic port proxies HTTP/2 to it) and optionally on --grpc."""

    def __init__(self, worker, engine, pb2_dir, sock_path, extra_addr):
        self.worker = worker
        self.engine = engine
        sys.path.insert(0, os.path.abspath(pb2_dir))
        mod, self.method = P.GRPC_ENGINES[engine]
        try:
            self.pb2 = __import__(mod)
        except ImportError as e:
            sys.exit(f"fake_engines: cannot import {mod} from {pb2_dir}: {e}")
        self.sock_path = sock_path
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  handlers=[self], options=[("grpc.so_reuseport", 0)])
        for addr in [f"unix:{sock_path}"] + ([extra_addr] if extra_addr else []):
            try:
                port = self.server.add_insecure_port(addr)
            except RuntimeError as e:
                sys.exit(f"fake_engines: cannot bind {addr}: {e}")
            if port == 0:
                sys.exit(f"fake_engines: cannot bind {addr}")

    # grpc.GenericRpcHandler
    def service(self, details):
        if details.method != self.method:
            self.worker.stats.bump("grpc_other")
            return None  # grpcio answers UNIMPLEMENTED, as an engine without the method
        return grpc.unary_unary_rpc_method_handler(self.get_loads,
                                                   request_deserializer=lambda b: b,
                                                   response_serializer=lambda b: b)

    def get_loads(self, request, context):
        w = self.worker
        st = w.state.get()
        md = dict(context.invocation_metadata())
        if not w.authorized(st, md.get("authorization")):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        w.stats.bump("getloads")
        mode = st["mode"]
        ranks = st["loads"]
        if mode == "unimplemented":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "GetLoads is not implemented (fake)")
        if mode == "http_500":
            context.abort(grpc.StatusCode.INTERNAL, "internal error (fake)")
        if mode == "http_401":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unauthenticated (fake)")
        if mode == "garbage":
            return GARBAGE
        if mode in ("hang", "slow_body"):
            if not wait_unless_gone(st["hang_seconds"], lambda: not context.is_active()):
                context.abort(grpc.StatusCode.CANCELLED, "client went away")
        if mode == "empty":
            ranks = []
        if mode == "nan_kv":
            ranks = P.nan_kv(ranks)
        body = P.grpc_response(self.engine, self.pb2, ranks)
        if mode == "truncated":
            body = body[: max(1, len(body) // 2)]
        if mode == "oversized":  # field 99, length-delimited, 300 KiB: 0x9a 0x06 LEN
            pad = 300 << 10
            body += b"\x9a\x06" + bytes([0x80 | (pad & 0x7f), 0x80 | ((pad >> 7) & 0x7f),
                                         pad >> 14]) + b"\0" * pad
        return body

    def start(self):
        self.server.start()

    def stop(self):
        self.server.stop(grace=0).wait()


# ---- HTTP ------------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as engines' servers speak it."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def log_message(self, fmt, *args):
        pass

    def send_body(self, status, body, ctype="application/json", headers=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        w = self.server.worker
        path = self.path.split("?", 1)[0]
        if path == "/whoami":
            w.stats.bump("whoami")
            self.send_body(200, f"{w.name}\n", "text/plain; charset=utf-8",
                           [("X-Worker", w.name)])
            return
        w.stats.bump(f"GET {path}")
        st = w.state.get()
        if w.engine:
            # A gRPC server does not speak HTTP/1: it drops the connection.
            self.close_connection = True
            return
        if st["mode"] == "grpc_on_http":
            # The port turned into a gRPC server: this connection dies, the
            # client's next one is proxied (see Worker.serve).
            self.close_connection = True
            return
        if path == "/health":
            self.send_body(200, "", "text/plain")
            return
        if path == "/v1/loads" and w.serves_loads:
            self.load_answer(st, "json")
        elif path == "/metrics" and w.metrics:
            self.load_answer(st, "metrics")
        else:
            self.send_body(404, '{"detail":"Not Found"}')

    def load_answer(self, st, fmt):
        w = self.server.worker
        if not w.authorized(st, self.headers.get("Authorization")):
            self.send_body(401, '{"error":"Unauthorized"}', headers=[("WWW-Authenticate",
                                                                      "Bearer")])
            return
        mode = st["mode"]
        if mode == "unimplemented":
            self.send_body(404, '{"detail":"Not Found"}')
            return
        if mode == "http_500":
            self.send_body(500, "Internal Server Error", "text/plain; charset=utf-8")
            return
        if mode == "http_401":
            self.send_body(401, '{"error":"Unauthorized"}', headers=[("WWW-Authenticate",
                                                                      "Bearer")])
            return
        if mode == "garbage":
            self.send_body(200, GARBAGE * 8, "application/octet-stream")
            return
        if mode == "hang" and not wait_unless_gone(st["hang_seconds"],
                                                   lambda: client_gone(self.connection)):
            self.close_connection = True
            return
        body, ctype = w.render(st, fmt)
        if mode == "truncated":
            body = body[: len(body) // 2]
        if mode == "slow_body":
            self.dribble(body, ctype, st["hang_seconds"])
        else:
            self.send_body(200, body, ctype)

    def dribble(self, body, ctype, seconds):
        """Headers now, then the body a few bytes per tick over `seconds`."""
        body = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        ticks = max(1, int(seconds / TICK_S))
        step = max(1, -(-len(body) // ticks))
        try:
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(TICK_S)
        except OSError:
            pass
        self.close_connection = True


class Worker:
    def __init__(self, args, stats):
        self.name = args.name
        self.kind = args.kind
        self.engine, self.serves_loads, self.metrics = KINDS[args.kind]
        self.variant = args.variant or (VARIANTS[self.metrics][0] if self.metrics else None)
        self.state = State(args.state)
        self.stats = stats
        self.worker = self  # Handler reads self.server.worker
        # Beside the state file, in the test's own directory: whoever removes
        # that removes the socket too, also after a SIGKILL.
        sock_path = os.path.abspath(args.state) + ".grpc.sock"
        # Every kind has a gRPC server: a gRPC kind's own engine, an HTTP kind
        # a SGLang one for grpc_on_http.
        self.grpc = GrpcSide(self, self.engine or "sglang", args.pb2_dir or default_pb2_dir(),
                             sock_path, args.grpc)
        fam, host, port = split_addr(args.traffic)
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            sys.exit(f"fake_engines: cannot bind {args.traffic}: {e}")
        self.sock.listen(1024)
        self.accepter = threading.Thread(target=self.accept_loop, daemon=True)

    def authorized(self, st, header):
        if not st["token"]:
            return True
        ok = header == f"Bearer {st['token']}"
        self.stats.bump("auth_ok" if ok else "auth_bad")
        return ok

    def render(self, st, fmt):
        """The body of a good answer of this kind, adjusted for the mode."""
        mode, ranks = st["mode"], st["loads"]
        if mode == "empty":
            ranks = []
        if fmt == "json":
            if mode == "nan_kv":
                ranks = P.nan_kv(ranks)
            return P.loads_json(ranks), "application/json"
        kv_override = float("nan") if mode == "nan_kv" else None
        with_kv = mode != "no_kv"
        if self.metrics == "vllm":
            text = P.vllm_metrics(ranks, self.variant, kv_override, with_kv)
        else:
            text = P.sglang_metrics(ranks, self.variant, kv_override, with_kv)
        return text, "text/plain; version=0.0.4; charset=utf-8"

    # ---- the traffic port --------------------------------------------------------

    def start(self):
        self.grpc.start()
        self.accepter.start()

    def accept_loop(self):
        while True:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return  # closed at shutdown
            threading.Thread(target=self.serve, args=(conn, addr), daemon=True).start()

    @staticmethod
    def sniff(conn):
        """The first bytes the client sent, without consuming them: enough to
        tell an HTTP/2 preface from an HTTP/1 request line. b'' on EOF."""
        conn.settimeout(SNIFF_TIMEOUT_S)
        deadline = time.monotonic() + SNIFF_TIMEOUT_S
        while True:
            data = conn.recv(256, socket.MSG_PEEK)
            decided = (not data or data.startswith(H2_PREFACE_START) or b"\n" in data
                       or len(data) >= 256)
            if decided or time.monotonic() > deadline:
                return data
            time.sleep(0.002)  # more is on its way: the first line is short

    def serve(self, conn, addr):
        try:
            with conn:
                data = self.sniff(conn)
                if not data:
                    self.stats.bump("silent")
                    return
                self.dispatch(conn, addr, data)
        except OSError:
            pass

    def dispatch(self, conn, addr, data):
        mode = self.state.get()["mode"]
        if data.startswith(H2_PREFACE_START):
            self.stats.bump("h2")
            if self.engine and mode == "http_on_grpc":
                self.answer_http_on_grpc(conn)
            elif self.engine or mode == "grpc_on_http":
                self.proxy(conn)
            else:
                self.answer_preface(conn)
            return
        self.stats.bump("http1")
        if not self.engine and mode == "grpc_on_http" and not data.startswith(WHOAMI):
            self.proxy(conn)
        else:
            self.http(conn, addr)

    def http(self, conn, addr):
        conn.settimeout(IDLE_TIMEOUT_S)
        Handler(conn, addr, self)

    def answer_preface(self, conn):
        """What uvicorn (h11), which vLLM and SGLang serve with, answers to
        an HTTP/2 preface: a 400 and close."""
        self.stats.bump("h2_refused")
        body = b"Invalid HTTP request received."
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
                     b"content-length: " + str(len(body)).encode() +
                     b"\r\nconnection: close\r\n\r\n" + body)

    def answer_http_on_grpc(self, conn):
        """What an HTTP/1 server says to an HTTP/2 preface: a full HTTP/1.1
        answer (here even a 200 with the loads as JSON), then close."""
        self.stats.bump("http_on_grpc")
        body = P.loads_json(self.state.get()["loads"]).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() +
                     b"\r\nConnection: close\r\n\r\n" + body)

    def proxy_wanted(self):
        mode = self.state.get()["mode"]
        return mode != "http_on_grpc" if self.engine else mode == "grpc_on_http"

    def proxy(self, conn):
        """Pump bytes between the client and the grpcio server until either
        side closes or the mode moves this port to the other transport."""
        self.stats.bump("proxied_to_grpc")
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(self.grpc.sock_path)
            conn.settimeout(None)
            pair = {conn: up, up: conn}
            while self.proxy_wanted():
                r, _, _ = select.select(list(pair), [], [], TICK_S)
                for s in r:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    pair[s].sendall(chunk)
        finally:
            up.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.grpc.stop()
        try:
            os.unlink(self.grpc.sock_path)
        except OSError:
            pass


def parse_args(argv):
    ap = argparse.ArgumentParser(description="A fake inference engine for one load source.")
    ap.add_argument("--kind", required=True, choices=sorted(KINDS))
    ap.add_argument("--name", default="fake")
    ap.add_argument("--traffic", required=True,
                    help="host:port or [v6]:port: traffic and (as engines do) load endpoints")
    ap.add_argument("--state", required=True, help="JSON state file, read on every answer")
    ap.add_argument("--grpc", help="an extra plain gRPC listener (gRPC kinds)")
    ap.add_argument("--variant", help="vllm-metrics: v1|v0; sglang-*: 'sglang:'|'sglang_'")
    ap.add_argument("--pb2-dir", default=None, help="where the *_pb2.py modules are")
    args = ap.parse_args(argv)
    engine, _, metrics = KINDS[args.kind]
    if args.grpc and not engine:
        ap.error("--grpc is for the gRPC kinds")
    if args.variant and (not metrics or args.variant not in VARIANTS[metrics]):
        ap.error(f"--variant {args.variant!r} does not fit --kind {args.kind}")
    return args


def main(argv):
    args = parse_args(argv)
    raise_fd_limit()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stats = Stats(args.state + ".stats")
    worker = Worker(args, stats)
    stats.start()
    worker.start()
    print(f"READY {args.name}", flush=True)
    while not stop.wait(0.5):
        pass
    worker.close()
    stats.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
