#!/usr/bin/env python3
"""A dynamic pin list server and pin-failure report receiver for pinproxy's
end-to-end tests (real sockets, real OpenSSL through Python's ssl module).

  GET  /list     the file --list, re-read on every request (a test rotates or
                 tampers with it between requests). With --challenge-key, the
                 request's X-Cert-Pinning-Challenge is signed with the key:
                 X-Cert-Pinning-Signature = base64(ECDSA-SHA256(challenge "&" body)),
                 made by the openssl command line, as an operator's server would.
  POST /report   the body is appended as one line to --reports.
Every request line is appended to --log. Prints "READY <port>".
"""
import argparse
import base64
import http.server
import ssl
import subprocess
import threading

LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        with LOCK, open(self.server.args.log, "a") as f:
            challenge = self.headers.get("X-Cert-Pinning-Challenge")
            f.write(f"{self.command} {self.path}" + (f" challenge={challenge}" if challenge else "") + "\n")

    def answer(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.record()
        if self.path != "/list":
            return self.answer(404, b"{}")
        with open(self.server.args.list, "rb") as f:
            body = f.read()
        extra = []
        challenge = self.headers.get("X-Cert-Pinning-Challenge")
        if self.server.args.challenge_key and challenge:
            signed = challenge.encode() + b"&" + body
            signature = subprocess.run(
                ["openssl", "dgst", "-sha256", "-sign", self.server.args.challenge_key],
                input=signed, capture_output=True, check=True).stdout
            extra.append(("X-Cert-Pinning-Signature", base64.b64encode(signature).decode()))
        self.answer(200, body, extra)

    def do_POST(self):
        self.record()
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/report":
            with LOCK, open(self.server.args.reports, "ab") as f:
                f.write(body.replace(b"\n", b" ") + b"\n")
            return self.answer(200, b"{}")
        self.answer(404, b"{}")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, address = self.socket.accept()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--list", required=True)
    parser.add_argument("--reports", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--challenge-key", default=None)
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server = Server(("127.0.0.1", args.port), Handler)
    server.context = context
    server.args = args
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
