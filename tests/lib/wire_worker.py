#!/usr/bin/python3
"""A fake inference worker's HTTP/1.1 traffic port, for the request-bytes tests
keep-alive, with plain JSON and with streamed (SSE) answers, whose
timing the test controls.

    /usr/bin/python3 tests/lib/wire_worker.py --name a --traffic 127.0.0.11:8000 --control DIR

Each request is read whole (Content-Length). Its headers say how to answer:

  X-Hold: TAG      wait until the file DIR/TAG exists before answering
  X-Stream: TAG2   answer as a server-sent-event stream: the first event at
                   once (after X-Hold), the rest once DIR/TAG2 exists; without
                   it, one JSON body

Every answer names the worker ({"worker": NAME, ...} or "data: NAME"). A line
"REQ <peer> <bytes>" goes to DIR/NAME.log when a request has been read in full
(bytes: request line, headers and body as received), so that a test can wait
until the worker holds it. "READY <name>" goes to stdout once listening.
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time

HOLD_LIMIT_S = 120  # a test that never releases must not leave a thread forever


def split_addr(addr):
    if addr.startswith("["):
        host, port = addr[1:].split("]:")
        return socket.AF_INET6, (host, int(port))
    host, port = addr.rsplit(":", 1)
    return socket.AF_INET, (host, int(port))


def wait_file(path):
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.005)


class Conn:
    def __init__(self, sock, args, log_lock):
        self.sock, self.args, self.log_lock = sock, args, log_lock
        self.buf = b""

    def read_until(self, sep):
        while sep not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        head, self.buf = self.buf.split(sep, 1)
        return head

    def read_n(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def log(self, nbytes):
        peer = "%s:%d" % self.sock.getpeername()[:2]
        with self.log_lock:
            with open(os.path.join(self.args.control, self.args.name + ".log"), "a") as f:
                f.write(f"REQ {peer} {nbytes}\n")

    def answer(self, headers):
        name = self.args.name.encode()
        hold = headers.get("x-hold")
        if hold:
            wait_file(os.path.join(self.args.control, hold))
        rest = headers.get("x-stream")
        if not rest:
            body = b'{"worker": "' + name + b'", "text": "ok"}'
            self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            return
        event = b"data: " + name + b"\n\n"
        chunk = b"%x\r\n%s\r\n" % (len(event), event)
        self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n" + chunk)
        wait_file(os.path.join(self.args.control, rest))
        self.sock.sendall(chunk + chunk + b"0\r\n\r\n")

    def serve(self):
        try:
            while True:
                head = self.read_until(b"\r\n\r\n")
                if head is None:
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                body = self.read_n(n)
                if body is None:
                    return
                self.log(len(head) + 4 + n)
                self.answer(headers)
        except OSError:
            pass
        finally:
            self.sock.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--traffic", required=True)
    ap.add_argument("--control", required=True, help="directory of release files and the log")
    args = ap.parse_args()
    fam, sa = split_addr(args.traffic)
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(sa)
    ls.listen(256)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log_lock = threading.Lock()
    print(f"READY {args.name}", flush=True)
    while True:
        s, _ = ls.accept()
        threading.Thread(target=Conn(s, args, log_lock).serve, daemon=True).start()


if __name__ == "__main__":
    main()
