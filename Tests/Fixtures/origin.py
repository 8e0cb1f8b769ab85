#!/usr/bin/env python3
"""A small HTTPS origin for pinproxy's end-to-end tests (real sockets, real
OpenSSL through Python's ssl module).

Endpoints:
  GET  /hello          "hello from origin" with Content-Length
  GET  /bytes/N        N pseudo-random bytes, chunked (seeded by N, so the test can recompute them)
  POST /echo           reads the body (Content-Length or chunked) and answers "LENGTH SHA256HEX"
  GET  /slow/SECONDS   waits, then answers (for timeouts)
  GET  /headers        the request's header fields, one per line
  GET  /stats          "handshakes=N requests=M"
Every request line is appended to --log, so a test can prove a request never arrived.
Prints "READY <port>" once listening.
"""
import argparse
import hashlib
import http.server
import random
import socket
import ssl
import struct
import sys
import threading
import time

STATS = {"handshakes": 0, "requests": 0}
LOCK = threading.Lock()


def payload(n):
    rng = random.Random(n)
    return bytes(rng.getrandbits(8) for _ in range(n)) if n <= 1 << 16 else rng.randbytes(n)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle(self):
        if self.server.reset_anonymous:
            self.request.do_handshake()
            if not self.request.getpeercert(binary_form=True):
                # A reset with no alert: a refusal whose alert the wire lost.
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.request.close()
                return
        super().handle()

    def record(self):
        with LOCK:
            STATS["requests"] += 1
        if self.server.request_log:
            with open(self.server.request_log, "a") as f:
                f.write(f"{self.command} {self.path}\n")

    def send_body(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_GET(self):
        self.record()
        if self.path == "/hello":
            return self.send_body(b"hello from origin\n")
        if self.path == "/headers":
            return self.send_body("".join(f"{k}: {v}\n" for k, v in self.headers.items()).encode())
        if self.path == "/stats":
            with LOCK:
                text = f"handshakes={STATS['handshakes']} requests={STATS['requests']}\n"
            return self.send_body(text.encode())
        if self.path.startswith("/bytes/"):
            data = payload(int(self.path.split("/")[2]))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(data), 65536):
                piece = data[i:i + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/slow/"):
            time.sleep(float(self.path.split("/")[2]))
            return self.send_body(b"slow\n")
        self.send_body(b"not found\n", 404)

    def do_POST(self):
        self.record()
        body = self.read_body()
        self.send_body(f"{len(body)} {hashlib.sha256(body).hexdigest()}\n".encode())


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 drops connections when tests open
    # dozens at once (the kernel then retries SYNs after 1, 3, 7 s).
    request_queue_size = 1024

    def get_request(self):
        sock, address = self.socket.accept()
        with LOCK:
            STATS["handshakes"] += 1
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--min-tls", default="1.2")
    parser.add_argument("--max-tls", default=None)
    parser.add_argument("--ciphers", default=None)
    parser.add_argument("--client-ca", default=None)
    parser.add_argument("--reset-without-client-certificate", action="store_true",
                        help="with --client-ca: ask for a client certificate, and reset a client that sends none")
    parser.add_argument("--log", default=None)
    parser.add_argument("--sni", action="append", default=[], metavar="HOST=CHAIN:KEY",
                        help="serve CHAIN with KEY to clients that ask for HOST (repeatable)")
    args = parser.parse_args()

    versions = {"1.0": ssl.TLSVersion.TLSv1, "1.1": ssl.TLSVersion.TLSv1_1,
                "1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if args.min_tls in ("1.0", "1.1"):
        context.set_ciphers("DEFAULT@SECLEVEL=0")
    context.minimum_version = versions[args.min_tls]
    if args.max_tls:
        context.maximum_version = versions[args.max_tls]
    if args.ciphers:
        context.set_ciphers(args.ciphers)
    context.load_cert_chain(args.cert, args.key)
    if args.client_ca:
        context.load_verify_locations(args.client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL if args.reset_without_client_certificate else ssl.CERT_REQUIRED

    # One origin for many hosts: the certificate is chosen by the SNI name;
    # a client that sends none (an IP host) gets --cert.
    by_name = {}
    for entry in args.sni:
        host, files = entry.split("=", 1)
        chain, key = files.split(":", 1)
        named = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        named.set_ciphers("DEFAULT@SECLEVEL=0")
        named.minimum_version = context.minimum_version
        named.load_cert_chain(chain, key)
        by_name[host] = named
    if by_name:
        def choose(connection, server_name, _):
            if server_name in by_name:
                connection.context = by_name[server_name]
        context.sni_callback = choose

    if ":" in args.bind:
        Server.address_family = socket.AF_INET6
    server = Server((args.bind, args.port), Handler, bind_and_activate=True)
    server.context = context
    server.request_log = args.log
    server.reset_anonymous = args.reset_without_client_certificate
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
