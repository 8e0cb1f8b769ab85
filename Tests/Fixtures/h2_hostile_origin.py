#!/usr/bin/env python3
"""A hostile TLS HTTP/2-only origin, to see what the proxy does with response
header blocks it should refuse. The server side is written by hand (the
preface, SETTINGS and their ACK, PING, flow control for its small bodies,
frames as raw bytes) and request blocks are read with `hpack.Decoder`, so the
HPACK state it shares with the client is only what it writes itself.

  h2_hostile_origin.py --cert CHAIN.pem --key KEY.pem [--log FILE] [--port 0]

The answer depends on the request's path:

  /many-fields      200 with 150 extra small fields (x-f1: 1, ...), body "ok\\n"
  /big-fields       200 with 50 fields of 4000-byte values, body "ok\\n"
  /hpack-bomb       a header block that inserts x-bomb: A*4000 into the
                    client's dynamic table and references it 13000 times
                    (0xBE), as HEADERS + CONTINUATION frames of <= 16,000
                    bytes; then DATA "x" with END_STREAM
  /length-mismatch  200 with content-length: 100 but 10 bytes of DATA, ended
  anything else     200 "ok\\n" with content-length

Prints "READY PORT" once listening (on 127.0.0.1, --port 0 = any free port),
as h2_origin.py does; appends "connection N" and "request N PATH" lines to
--log when given.
"""
import argparse
import socket
import ssl
import threading

import hpack

from h2frames import (  # the module beside this script
    ACK,
    CHUNK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    SETTINGS_HEADER_TABLE_SIZE,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_CONCURRENT_STREAMS,
    SETTINGS_MAX_FRAME_SIZE,
    WINDOW_UPDATE,
    frame,
    header_frames,
    integer,
    literal,
    string,
)

LOCK = threading.Lock()
COUNT = [0]


def log(path, line):
    if path:
        with LOCK, open(path, "a") as handle:
            handle.write(line + "\n")










STATUS_200 = b"\x88"  # static index 8


def content_length(n):
    return integer(28, 4, 0x00) + string(str(n))  # literal without indexing, name index 28


class Connection:
    def __init__(self, sock, number, args):
        self.sock = sock
        self.number = number
        self.args = args
        self.buffer = bytearray()
        self.decoder = hpack.Decoder(max_header_list_size=1 << 24)
        self.pending = None  # [stream, flags, block]
        self.max_frame = 16384
        self.initial_window = 65535
        self.connection_window = 65535
        self.windows = {}
        self.queued = {}  # stream -> [bytes, end_stream]
        self.table_size = None  # a size update owed at the next block

    def send(self, data):
        self.sock.sendall(data)

    def read(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("peer closed")
        self.buffer += data

    def run(self):
        while len(self.buffer) < len(PREFACE):
            self.read()
        if bytes(self.buffer[:len(PREFACE)]) != PREFACE:
            return
        del self.buffer[:len(PREFACE)]
        self.send(frame(SETTINGS, 0, 0, SETTINGS_MAX_CONCURRENT_STREAMS.to_bytes(2, "big") + (100).to_bytes(4, "big")))
        while True:
            while len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < 9 + length:
                    break
                head, payload = bytes(self.buffer[:9]), bytes(self.buffer[9:9 + length])
                del self.buffer[:9 + length]
                if self.handle(head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload) is False:
                    return
            self.read()

    def handle(self, kind, flags, stream, payload):
        if kind == SETTINGS:
            if flags & ACK:
                return
            for i in range(0, len(payload) - 5, 6):
                key, value = int.from_bytes(payload[i:i + 2], "big"), int.from_bytes(payload[i + 2:i + 6], "big")
                if key == SETTINGS_MAX_FRAME_SIZE:
                    self.max_frame = value
                elif key == SETTINGS_HEADER_TABLE_SIZE:
                    self.table_size = min(value, 4096)
                elif key == SETTINGS_INITIAL_WINDOW_SIZE:
                    for s in self.windows:
                        self.windows[s] += value - self.initial_window
                    self.initial_window = value
            self.send(frame(SETTINGS, ACK, 0))
            self.flush()
        elif kind == PING:
            if not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            return False
        elif kind == WINDOW_UPDATE:
            increment = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            if stream == 0:
                self.connection_window += increment
            elif stream in self.windows:
                self.windows[stream] += increment
            self.flush()
        elif kind == RST_STREAM:
            self.queued.pop(stream, None)
            self.windows.pop(stream, None)
        elif kind == DATA:
            if payload:  # give back what request bodies consumed
                self.send(frame(WINDOW_UPDATE, 0, 0, len(payload).to_bytes(4, "big"))
                          + frame(WINDOW_UPDATE, 0, stream, len(payload).to_bytes(4, "big")))
        elif kind == HEADERS:
            block = payload
            if flags & PADDED and block:
                block = block[1:len(block) - block[0]]
            if flags & PRIORITY_FLAG:
                block = block[5:]
            self.pending = [stream, flags, bytearray(block)]
            if flags & END_HEADERS:
                return self.request()
        elif kind == CONTINUATION and self.pending:
            self.pending[2] += payload
            if flags & END_HEADERS:
                return self.request()

    def request(self):
        stream, flags, block = self.pending
        self.pending = None
        try:
            headers = dict(self.decoder.decode(bytes(block)))
        except Exception:
            self.send(frame(GOAWAY, 0, 0, stream.to_bytes(4, "big") + (9).to_bytes(4, "big")))  # COMPRESSION_ERROR
            return False
        if ":status" in headers or ":path" not in headers:
            return  # trailers, or not a request
        path = headers[":path"]
        log(self.args.log, f"request {self.number} {path}")
        self.windows[stream] = self.initial_window
        self.respond(stream, path)

    def header_block(self, fields):
        prefix = b""
        if self.table_size is not None:  # acknowledge the client's table size
            prefix = integer(self.table_size, 5, 0x20)
            self.table_size = None
        return prefix + STATUS_200 + b"".join(fields)

    def write_headers(self, stream, block, end_stream=False):
        self.send(header_frames(stream, block, end_stream, min(CHUNK, self.max_frame)))

    def respond(self, stream, path):
        path = path.split("?")[0]
        body = b"ok\n"
        if path == "/many-fields":
            fields = [literal(f"x-f{i}", "1") for i in range(1, 151)] + [content_length(len(body))]
        elif path == "/big-fields":
            fields = [literal(f"x-big{i}", "B" * 4000) for i in range(1, 51)] + [content_length(len(body))]
        elif path == "/hpack-bomb":
            # Inserted first (index 62), then referenced 13000 times.
            fields = [literal("x-bomb", "A" * 4000, indexing=True), b"\xbe" * 13000]
            body = b"x"
        elif path == "/length-mismatch":
            fields = [content_length(100)]
            body = b"0123456789"
        else:
            fields = [content_length(len(body))]
        self.write_headers(stream, self.header_block(fields))
        self.queued[stream] = [body, True]
        self.flush()

    def flush(self):
        """Sends queued DATA as far as the windows and the frame size allow."""
        for stream in list(self.queued):
            data, end = self.queued[stream]
            while True:
                size = min(len(data), self.connection_window, self.windows.get(stream, 0), self.max_frame)
                if size <= 0 and data:
                    break
                piece, data = data[:size], data[size:]
                last = not data
                self.send(frame(DATA, END_STREAM if (last and end) else 0, stream, piece))
                self.connection_window -= size
                self.windows[stream] -= size
                if last:
                    del self.queued[stream]
                    self.windows.pop(stream, None)
                    break
            if stream in self.queued:
                self.queued[stream] = [data, end]


def serve(sock, args):
    with LOCK:
        COUNT[0] += 1
        number = COUNT[0]
    log(args.log, f"connection {number}")
    try:
        Connection(sock, number, args).run()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--log")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(64)
    print(f"READY {listener.getsockname()[1]}", flush=True)
    while True:
        raw, _ = listener.accept()
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small frames go out at once
        try:
            tls = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(tls, args), daemon=True).start()


if __name__ == "__main__":
    main()
