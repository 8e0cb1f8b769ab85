#!/usr/bin/env python3
"""A plain-HTTP CRL distribution point and OCSP responder for pinproxy's
end-to-end revocation tests. Listens on 127.0.0.1 only; standard library plus
the openssl command.

  GET  /NAME             with --crl-dir: the file DIR/NAME as application/pkix-crl, or 404.
  POST /                 with the --ocsp-* options: the body is a DER OCSPRequest (RFC 6960);
                         answered by `openssl ocsp -index ...` as application/ocsp-response.
  GET  /<base64>         the same request by GET (RFC 6960 appendix A.1), the base64 of the
                         DER request, URL-encoded (%2B %2F %3D) or not.
  GET  /_mode/<mode>     switches the mode for the requests that follow.

Modes (--mode, default ok) apply to every request except /_mode:
  ok       answer as above;
  slow     sleep 30 s, then answer as above;
  garbage  200 with 4 KiB of random bytes;
  huge     200 with a declared and actual body of 64 MiB of zeros, streamed
           (abandoned when the client goes away).

The OCSP index is read by a fresh openssl process on every request, so a test
may rewrite it between requests. An undecodable request gets the
malformedRequest response (RFC 6960 section 4.2.1). Every request is appended
to --log as one line "METHOD PATH MODE" (mode when it arrived). Prints
"READY <port>" once listening; exits cleanly on SIGTERM.

Usage:
  revocation_server.py [--port 0] [--crl-dir DIR]
      [--ocsp-index index.txt --ocsp-ca CA.pem --ocsp-signer SIGNER.pem --ocsp-key SIGNER.key]
      [--mode ok|slow|garbage|huge] [--log FILE]
"""
import argparse
import base64
import binascii
import http.server
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

MODES = ("ok", "slow", "garbage", "huge", "chunked-huge")
SLOW_SECONDS = 30
GARBAGE_BYTES = 4 * 1024
HUGE_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024
CRL_TYPE = "application/pkix-crl"
OCSP_TYPE = "application/ocsp-response"
# OCSPResponse { responseStatus malformedRequest (1) }
MALFORMED_REQUEST = bytes.fromhex("30030a0101")

LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, mode):
        log = self.server.args.log
        if log:
            with LOCK, open(log, "a") as f:
                f.write(f"{self.command} {self.path} {mode}\n")
                f.flush()

    def answer(self, status, content_type, body):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def stream_zeros(self, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(HUGE_BYTES))
        self.end_headers()
        zeros = bytes(CHUNK)
        remaining = HUGE_BYTES
        while remaining:
            n = min(CHUNK, remaining)
            self.wfile.write(zeros[:n])
            remaining -= n

    def stream_chunked_zeros(self, content_type):
        """HUGE_BYTES of zeros with no declared length: chunked."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        zeros = bytes(CHUNK)
        for _ in range(HUGE_BYTES // CHUNK):
            self.wfile.write(b"%x\r\n" % CHUNK + zeros + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    # --- what a request asks for ----------------------------------------

    def crl_file(self):
        """DIR/NAME for GET /NAME when it names a file of --crl-dir, else None."""
        directory = self.server.args.crl_dir
        if not directory:
            return None
        filename = urllib.parse.unquote(self.path.split("?", 1)[0][1:])
        if not filename or "/" in filename or "\\" in filename or filename.startswith("."):
            return None
        path = os.path.join(directory, filename)
        return path if os.path.isfile(path) else None

    def ocsp_enabled(self):
        return self.server.args.ocsp_index is not None

    def ocsp(self, request):
        """The DER OCSPResponse to `request` from `openssl ocsp`."""
        args = self.server.args
        with tempfile.TemporaryDirectory(prefix="revocation-ocsp-") as work:
            request_path = os.path.join(work, "request.der")
            response_path = os.path.join(work, "response.der")
            with open(request_path, "wb") as f:
                f.write(request)
            result = subprocess.run(
                ["openssl", "ocsp", "-index", args.ocsp_index, "-CA", args.ocsp_ca,
                 "-rsigner", args.ocsp_signer, "-rkey", args.ocsp_key,
                 "-reqin", request_path, "-respout", response_path, "-ndays", "1"],
                capture_output=True)
            if result.returncode != 0 or not os.path.exists(response_path):
                return MALFORMED_REQUEST
            with open(response_path, "rb") as f:
                return f.read()

    def get_request_body(self):
        """The DER request carried in a GET path, or None."""
        encoded = urllib.parse.unquote(self.path.split("?", 1)[0][1:])
        if not encoded:
            return None
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None

    # --- dispatch ---------------------------------------------------------

    def serve(self, content_type, respond):
        """Applies the mode, then `respond()` when the mode is ok or slow."""
        mode = self.server.mode
        self.record(mode)
        try:
            if mode == "garbage":
                return self.answer(200, content_type, os.urandom(GARBAGE_BYTES))
            if mode == "huge":
                return self.stream_zeros(content_type)
            if mode == "chunked-huge":
                return self.stream_chunked_zeros(content_type)
            if mode == "slow":
                time.sleep(SLOW_SECONDS)
            respond()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def do_GET(self):
        if self.path.startswith("/_mode/"):
            self.record(self.server.mode)
            mode = self.path[len("/_mode/"):]
            if mode not in MODES:
                return self.answer(400, "text/plain", f"unknown mode {mode}\n".encode())
            self.server.mode = mode
            return self.answer(200, "text/plain", f"mode {mode}\n".encode())
        crl = self.crl_file()
        if crl is not None:
            def respond():
                with open(crl, "rb") as f:
                    self.answer(200, CRL_TYPE, f.read())
            return self.serve(CRL_TYPE, respond)
        if self.ocsp_enabled():
            def respond():
                request = self.get_request_body()
                if request is None:
                    return self.answer(404, "text/plain", b"not found\n")
                self.answer(200, OCSP_TYPE, self.ocsp(request))
            return self.serve(OCSP_TYPE, respond)
        self.serve(CRL_TYPE, lambda: self.answer(404, "text/plain", b"not found\n"))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or "0"))
        if not self.ocsp_enabled():
            self.record(self.server.mode)
            return self.answer(404, "text/plain", b"not found\n")
        self.serve(OCSP_TYPE, lambda: self.answer(200, OCSP_TYPE, self.ocsp(body)))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--crl-dir")
    parser.add_argument("--ocsp-index")
    parser.add_argument("--ocsp-ca")
    parser.add_argument("--ocsp-signer")
    parser.add_argument("--ocsp-key")
    parser.add_argument("--mode", choices=MODES, default="ok")
    parser.add_argument("--log")
    args = parser.parse_args()
    ocsp_options = [args.ocsp_index, args.ocsp_ca, args.ocsp_signer, args.ocsp_key]
    if any(o is not None for o in ocsp_options) and not all(o is not None for o in ocsp_options):
        parser.error("--ocsp-index, --ocsp-ca, --ocsp-signer and --ocsp-key go together")
    if args.crl_dir is None and args.ocsp_index is None:
        parser.error("give --crl-dir, the --ocsp-* options, or both")

    server = Server(("127.0.0.1", args.port), Handler)
    server.args = args
    server.mode = args.mode

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
