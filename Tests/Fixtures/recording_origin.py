#!/usr/bin/env python3
"""A TLS origin with its own strict HTTP/1.1 request parser, for the
request-smuggling corpus (smuggling_corpus.py).

Unlike origin.py it does not use http.server: it reads bytes and frames each
request itself, strictly by RFC 9112 §6 (chunked alone, else identical
Content-Length values, else no body), so the log says exactly what a strict
origin behind the proxy parsed. Every request, and every framing error, is
appended to --log as one JSON line:

  {"conn": N, "seq": k, "method", "target", "version",
   "headers": [[name, value], ...], "body_len", "body_sha256", "body_head",
   "trailers": [[name, value], ...]}

Names, values and body_head are latin-1 decoded, so every byte survives.
A request with a body is announced first by {"conn", "seq", "phase": "head",
"method", "target"} (before its body is read), so a request left hanging
mid-body is visible as a head without a final entry of the same conn/seq.
An error entry carries "error" (and whatever of the request was parsed); the
origin then answers 400 and closes.

The answer is 200 with Content-Length, the body `ok <conn>-<seq> <METHOD>
<target>\\n` and the header X-Request-Target. A target containing
`/resp/<shape>` selects an unusual response shape (see RESPONSE_SHAPES).
Prints "READY <port>" once listening.
"""
import argparse
import hashlib
import json
import re
import socket
import ssl
import threading
import time

MAX_HEAD = 1 << 20
MAX_BODY = 16 << 20
MAX_CHUNK_LINE = 4096

TOKEN_CHARS = frozenset(b"!#$%&'*+-.^_`|~0123456789"
                        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
HEX_CHARS = frozenset(b"0123456789abcdefABCDEF")

LOG_LOCK = threading.Lock()
COUNTER_LOCK = threading.Lock()
COUNTERS = {"conn": 0}


class FramingError(Exception):
    """The request cannot be framed unambiguously: answer 400 and close."""


class PeerClosed(Exception):
    """The peer closed; `partial` says whether it was inside a message."""

    def __init__(self, partial):
        super().__init__("peer closed")
        self.partial = partial


class Reader:
    """Buffered reads from a (TLS) socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.in_message = False

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except (ConnectionError, ssl.SSLError, OSError):
            data = b""
        if not data:
            raise PeerClosed(self.in_message or bool(self.buf))
        self.buf += data

    def until(self, marker, cap, what):
        start = 0
        while True:
            found = self.buf.find(marker, start)
            if found >= 0:
                end = found + len(marker)
                out = bytes(self.buf[:end])
                del self.buf[:end]
                return out
            if len(self.buf) > cap:
                raise FramingError(f"{what} exceeds {cap} bytes")
            start = max(0, len(self.buf) - len(marker) + 1)
            self._fill()

    def exact(self, count):
        while len(self.buf) < count:
            self._fill()
        out = bytes(self.buf[:count])
        del self.buf[:count]
        return out

    def peek_startswith(self, prefix):
        while len(self.buf) < len(prefix):
            if self.buf != prefix[:len(self.buf)]:
                return False
            self._fill()
        return self.buf.startswith(prefix)


def latin(data):
    return data.decode("latin-1")


def check_line_bytes(line, what):
    """No bare CR, bare LF or NUL inside one line (its CRLF already removed)."""
    if b"\r" in line:
        raise FramingError(f"bare CR in {what}")
    if b"\n" in line:
        raise FramingError(f"bare LF in {what}")
    if b"\x00" in line:
        raise FramingError(f"NUL in {what}")


def parse_fields(lines, what):
    """`field-name ":" OWS field-value OWS` lines into [(name, value)] as bytes."""
    fields = []
    for line in lines:
        check_line_bytes(line, what)
        if not line:
            raise FramingError(f"empty line inside {what}")
        if line[:1] in (b" ", b"\t"):
            raise FramingError(f"obs-fold in {what}")
        colon = line.find(b":")
        if colon <= 0:
            raise FramingError(f"no field name in {what} line {line[:60]!r}")
        name = line[:colon]
        if not all(byte in TOKEN_CHARS for byte in name):
            raise FramingError(f"invalid field name {name[:60]!r} in {what}")
        value = line[colon + 1:].strip(b" \t")
        for byte in value:
            if byte != 0x09 and (byte < 0x20 or byte == 0x7F):
                raise FramingError(f"control character 0x{byte:02x} in field {latin(name)}")
        fields.append((name, value))
    return fields


def values_of(fields, name):
    lowered = name.lower()
    return [value for field, value in fields if field.lower() == lowered]


def list_elements(values):
    out = []
    for value in values:
        for element in value.split(b","):
            element = element.strip(b" \t")
            if element:
                out.append(element.lower())
    return out


def parse_request_line(line):
    check_line_bytes(line, "request line")
    parts = line.split(b" ")
    if len(parts) != 3:
        raise FramingError(f"request line has {len(parts)} space-separated parts")
    method, target, version = parts
    if not method or not all(byte in TOKEN_CHARS for byte in method):
        raise FramingError("invalid method")
    if not target or not all(0x21 <= byte <= 0x7E for byte in target):
        raise FramingError("invalid request target")
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise FramingError(f"unsupported version {version[:20]!r}")
    return latin(method), latin(target), latin(version)


def body_framing(fields):
    """RFC 9112 §6.3, refusing every ambiguous shape: ('chunked'|'length'|'none', n)."""
    te_values = values_of(fields, b"Transfer-Encoding")
    cl_values = values_of(fields, b"Content-Length")
    if te_values:
        if cl_values:
            raise FramingError("both Transfer-Encoding and Content-Length")
        codings = list_elements(te_values)
        if codings != [b"chunked"]:
            raise FramingError(f"Transfer-Encoding is not exactly chunked: {b', '.join(codings)!r}")
        return "chunked", 0
    if cl_values:
        elements = []
        for value in cl_values:
            elements += [element.strip(b" \t") for element in value.split(b",")]
        first = elements[0]
        if any(element != first for element in elements):
            raise FramingError("differing Content-Length values")
        if not first or not first.isdigit() or len(first) > 18:
            raise FramingError(f"invalid Content-Length {first[:30]!r}")
        length = int(first)
        if length > MAX_BODY:
            raise FramingError("body too large")
        return "length", length
    return "none", 0


def read_chunked(reader, on_first_chunk_line=None):
    body = bytearray()
    while True:
        line = reader.until(b"\r\n", MAX_CHUNK_LINE, "chunk size line")[:-2]
        check_line_bytes(line, "chunk size line")
        digits = bytearray()
        for byte in line:
            if byte in HEX_CHARS:
                digits.append(byte)
            else:
                break
        rest = line[len(digits):]
        if not digits or len(digits) > 16:
            raise FramingError(f"bad chunk size {line[:40]!r}")
        if rest and not rest.lstrip(b" \t").startswith(b";"):
            raise FramingError(f"bad chunk size {line[:40]!r}")
        size = int(digits, 16)
        if len(body) + size > MAX_BODY:
            raise FramingError("body too large")
        if size == 0:
            break
        body += reader.exact(size)
        if reader.exact(2) != b"\r\n":
            raise FramingError("chunk data not followed by CRLF")
    trailer_lines = []
    while True:
        line = reader.until(b"\r\n", MAX_HEAD, "trailer section")[:-2]
        if line == b"":
            break
        trailer_lines.append(line)
    return bytes(body), parse_fields(trailer_lines, "trailer section")


class Connection:
    def __init__(self, sock, number, log_path):
        self.sock = sock
        self.number = number
        self.log_path = log_path
        self.reader = Reader(sock)
        self.seq = 0

    def log(self, entry):
        if not self.log_path:
            return
        line = json.dumps(entry, ensure_ascii=True)
        with LOG_LOCK:
            with open(self.log_path, "a", encoding="ascii") as handle:
                handle.write(line + "\n")
                handle.flush()

    def send(self, data):
        self.sock.sendall(data)

    def serve(self):
        try:
            while True:
                if not self.handle_one():
                    break
        except PeerClosed:
            pass
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    def handle_one(self):
        """One request and its response; False when the connection must end."""
        entry = {"conn": self.number, "seq": self.seq}
        reader = self.reader
        reader.in_message = False
        try:
            # RFC 9112 §2.2: a few empty lines before the request line are tolerated.
            for _ in range(4):
                if reader.peek_startswith(b"\r\n"):
                    reader.exact(2)
                else:
                    break
            reader.in_message = True
            head = reader.until(b"\r\n\r\n", MAX_HEAD, "header section")[:-4]
            if b"\n" in head.replace(b"\r\n", b""):
                raise FramingError("bare LF in header section")
            if b"\r" in head.replace(b"\r\n", b""):
                raise FramingError("bare CR in header section")
            lines = head.split(b"\r\n")
            method, target, version = parse_request_line(lines[0])
            entry.update(method=method, target=target, version=version)
            fields = parse_fields(lines[1:], "header section")
            entry["headers"] = [[latin(name), latin(value)] for name, value in fields]
            framing, length = body_framing(fields)
            expects = list_elements(values_of(fields, b"Expect"))
            if b"100-continue" in expects and version == "HTTP/1.1" and (
                    framing == "chunked" or length > 0):
                self.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            if framing == "chunked" or length > 0:
                # A marker before the body: a request whose body never completes
                # (the proxy left the connection open mid-message) shows up as a
                # head without a matching final entry.
                self.log({"conn": self.number, "seq": self.seq, "phase": "head",
                          "method": method, "target": target})
            trailers = []
            if framing == "chunked":
                body, trailer_fields = read_chunked(reader)
                trailers = [[latin(name), latin(value)] for name, value in trailer_fields]
            elif framing == "length":
                body = reader.exact(length)
            else:
                body = b""
        except FramingError as error:
            entry["error"] = str(error)
            self.log(entry)
            self.answer_error(str(error))
            return False
        except PeerClosed as closed:
            if closed.partial:
                entry["error"] = "truncated: peer closed inside a request"
                self.log(entry)
            return False
        reader.in_message = False
        entry.update(body_len=len(body), body_sha256=hashlib.sha256(body).hexdigest(),
                     body_head=latin(body[:200]), trailers=trailers)
        self.log(entry)
        self.seq += 1
        connection_tokens = list_elements(values_of(fields, b"Connection"))
        keep = (b"close" not in connection_tokens) and (
            version == "HTTP/1.1" or b"keep-alive" in connection_tokens)
        return self.respond(entry, keep)

    def answer_error(self, reason):
        body = f"bad request: {reason}\n".encode("latin-1", "replace")
        try:
            self.send(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                      b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass

    def respond(self, entry, keep):
        method, target = entry["method"], entry["target"]
        body = f"ok {entry['conn']}-{entry['seq']} {method} {target}\n".encode("latin-1")
        target_bytes = target.encode("latin-1")
        base = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Request-Target: " +
                target_bytes + b"\r\n")
        if not keep:
            base += b"Connection: close\r\n"
        send_body = method != "HEAD"
        match = re.search(r"/resp/([a-z0-9-]+)", target)
        shape = match.group(1) if match else ""
        handler = RESPONSE_SHAPES.get(shape, Connection.shape_default)
        keep_after = handler(self, base, body, send_body, keep)
        return keep and keep_after

    # Response shapes: each writes one response, returns whether the
    # connection may carry another request.

    def shape_default(self, base, body, send_body, keep):
        self.send(base + b"Content-Length: %d\r\n\r\n" % len(body) + (body if send_body else b""))
        return True

    def shape_connection_cl(self, base, body, send_body, keep):
        self.send(base + b"Connection: Content-Length\r\nContent-Length: %d\r\n\r\n" % len(body) +
                  (body if send_body else b""))
        return True

    def shape_dup_cl(self, base, body, send_body, keep):
        self.send(base + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body)) +
                  (body if send_body else b""))
        return True

    def shape_cl_list(self, base, body, send_body, keep):
        self.send(base + b"Content-Length: %d, %d\r\n\r\n" % (len(body), len(body)) +
                  (body if send_body else b""))
        return True

    @staticmethod
    def chunked(body, trailers=b""):
        half = len(body) // 2
        out = b""
        for piece in (body[:half], body[half:]):
            if piece:
                out += b"%x\r\n%s\r\n" % (len(piece), piece)
        return out + b"0\r\n" + trailers + b"\r\n"

    def shape_chunked_trailers(self, base, body, send_body, keep):
        trailers = (b"X-Trailer: yes\r\nContent-Length: 999\r\nHost: evil.example\r\n"
                    b"Transfer-Encoding: chunked\r\n")
        head = base + b"Transfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\r\n"
        self.send(head + (self.chunked(body, trailers) if send_body else b""))
        return True

    def shape_obs_text(self, base, body, send_body, keep):
        self.send(base + b"X-Obs: caf\xe9 \xff\r\nContent-Length: %d\r\n\r\n" % len(body) +
                  (body if send_body else b""))
        return True

    def shape_unsolicited(self, base, body, send_body, keep):
        self.send(base + b"Content-Length: %d\r\n\r\n" % len(body) + (body if send_body else b""))
        if keep:
            # Written by this connection's own thread: nothing else touches the socket.
            time.sleep(0.15)
            extra = b"UNSOLICITED\n"
            self.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Request-Target: unsolicited\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(extra), extra))
        return True

    def shape_close_delimited(self, base, body, send_body, keep):
        self.send(base + b"\r\n" + (body if send_body else b""))
        return False

    def shape_connection_te(self, base, body, send_body, keep):
        head = base + b"Connection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n"
        self.send(head + (self.chunked(body) if send_body else b""))
        return True

    def shape_http10_te(self, base, body, send_body, keep):
        head = base.replace(b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", 1)
        head += b"Transfer-Encoding: chunked\r\n\r\n"
        self.send(head + (self.chunked(body) if send_body else b""))
        return False


RESPONSE_SHAPES = {
    "connection-cl": Connection.shape_connection_cl,
    "dup-cl": Connection.shape_dup_cl,
    "cl-list": Connection.shape_cl_list,
    "chunked-trailers": Connection.shape_chunked_trailers,
    "obs-text": Connection.shape_obs_text,
    "unsolicited": Connection.shape_unsolicited,
    "close-delimited": Connection.shape_close_delimited,
    "connection-te": Connection.shape_connection_te,
    "http10-te": Connection.shape_http10_te,
}


def handle_client(raw, context, log_path):
    raw.settimeout(30)
    try:
        sock = context.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        raw.close()
        return
    with COUNTER_LOCK:
        COUNTERS["conn"] += 1
        number = COUNTERS["conn"]
    sock.settimeout(None)
    Connection(sock, number, log_path).serve()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    if args.log:
        open(args.log, "a").close()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"READY {listener.getsockname()[1]}", flush=True)
    while True:
        raw, _ = listener.accept()
        threading.Thread(target=handle_client, args=(raw, context, args.log), daemon=True).start()


if __name__ == "__main__":
    main()
