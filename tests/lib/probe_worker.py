#!/usr/bin/python3
"""A fake inference worker's HTTP/1.1 port for the step probe tests: a POST is
answered as an OpenAI-style completion stream (server-sent events in chunked
encoding, as SGLang and vLLM send them), one event per engine "step".

    /usr/bin/python3 tests/lib/probe_worker.py --name a --traffic 127.0.0.11:8000 \
        --control DIR --step 0.5 --tokens 1000

- POST: "data: {...}" every --step seconds (the first after one step: a
  prefill), --tokens of them, then "data: [DONE]". The line
  {"path": ..., "body": ...} goes to DIR/NAME.probes first, and its
  time.monotonic() to DIR/NAME.probe_times. While the file
  DIR/NAME.status exists, its number is the answer's status instead (with a
  short JSON error body, as an engine that refuses answers).
- GET: "ok NAME", and a line to DIR/NAME.gets: a steered connection's mark.
- While the file DIR/NAME.tokens exists, its number replaces --tokens for
  the streams that start.
- DIR/NAME.open holds the number of streams being sent now; a stream ends
  when the client goes away.
- While the file DIR/NAME.token exists, each of its lines is a bearer token
  the worker takes (two during a rotation): a POST without
  `Authorization: Bearer` one of them is answered 401, as smg's workers
  answer a request without their API key. Each POST checked is counted in
  DIR/NAME.stats ({"auth_ok": N, "auth_bad": M}, as tests/lib/fake_engines.py
  counts its polls), and DIR/NAME.auth gets a line: "ok I" (I: the line
  of the token it carried, from 0) or "bad".
- When the number in DIR/NAME.gen differs from what it was when a stream
  started, the stream ends at its next event (an engine finishing the
  request): a test ends the stream under way without a new one ending too.

"READY <name>" goes to stdout once listening.
"""
import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from wire_worker import split_addr


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.open = 0
        self.counts = {"auth_ok": 0, "auth_bad": 0}
        self.write_open()

    def path(self, suffix):
        return os.path.join(self.args.control, f"{self.args.name}.{suffix}")

    def log(self, suffix, line):
        with self.lock, open(self.path(suffix), "a") as f:
            f.write(line + "\n")

    def write_open(self):
        tmp = self.path("open.tmp")
        with open(tmp, "w") as f:
            f.write(str(self.open))
        os.rename(tmp, self.path("open"))

    def streams(self, delta):
        with self.lock:
            self.open += delta
            self.write_open()

    def tokens(self):
        try:
            with open(self.path("tokens")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return self.args.tokens

    def read_file(self, suffix):
        try:
            with open(self.path(suffix)) as f:
                return f.read()
        except OSError:
            return None

    def gen(self):
        return (self.read_file("gen") or "").strip()

    def bump(self, what):
        with self.lock:
            self.counts[what] += 1
            tmp = self.path("stats.tmp")
            with open(tmp, "w") as f:
                json.dump(self.counts, f)
            os.rename(tmp, self.path("stats"))

    def authorized(self, header):
        """True when no token is required or the header carries one of them."""
        text = self.read_file("token")
        if text is None:
            return True
        tokens = [line.strip() for line in text.splitlines() if line.strip()]
        for i, token in enumerate(tokens):
            if header == f"Bearer {token}":
                self.bump("auth_ok")
                self.log("auth", f"ok {i}")
                return True
        self.bump("auth_bad")
        self.log("auth", "bad")
        return False

    def status(self):
        try:
            with open(self.path("status")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return 200


def handler(state):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            body = f"ok {args.name}\n".encode()
            state.log("gets", self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def refuse(self, status, err, headers=()):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(err)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(err)

        def chunk(self, data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            state.log("probes", json.dumps({"path": self.path, "body": body}))
            state.log("probe_times", repr(time.monotonic()))
            if not state.authorized(self.headers.get("Authorization")):
                self.refuse(401, b'{"error": "Unauthorized"}', [("WWW-Authenticate", "Bearer")])
                return
            status = state.status()
            if status != 200:
                self.refuse(status, b'{"error": "refused"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            state.streams(1)
            gen = state.gen()
            try:
                for i in range(state.tokens()):
                    time.sleep(args.step)  # never shorter than a step, however late
                    if state.gen() != gen:
                        break
                    ev = {"object": "text_completion", "choices": [{"index": 0, "text": "0"}]}
                    self.chunk(b"data: " + json.dumps(ev).encode() + b"\n\n")
                self.chunk(b"data: [DONE]\n\n")
                self.chunk(b"")
            except OSError:
                self.close_connection = True
            finally:
                state.streams(-1)

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--traffic", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--step", type=float, default=0.05)
    ap.add_argument("--tokens", type=int, default=1000)
    args = ap.parse_args()
    family, addr = split_addr(args.traffic)
    ThreadingHTTPServer.address_family = family
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(addr, handler(State(args)))
    print(f"READY {args.name}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
