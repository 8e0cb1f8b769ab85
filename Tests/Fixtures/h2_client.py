#!/usr/bin/env python3
"""A raw HTTP/2 client through pinproxy's interception, for shapes no
well-behaved client sends: CONNECT to the proxy, TLS with ALPN h2 (trusting
the proxy's local CA), then streams built with the `h2` package with its own
outbound validation off. Prints one JSON object: per stream its status,
pinproxy-error, body length or reset code; and whether the proxy sent GOAWAY.

  h2_client.py --proxy PORT --ca CA.pem --host HOST \
      (--requests FILE.json | --flood N)

FILE.json: a list of header lists ([[name, value], ...]), optionally with
"body" (text) per request: {"headers": [...], "body": "..."}.
"""
import argparse
import json
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def open_tunnel(port, host, ca):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(4096)
        if not chunk:
            sys.exit("proxy closed the CONNECT")
        reply += chunk
    if b" 200 " not in reply.split(b"\r\n")[0]:
        sys.exit(f"CONNECT refused: {reply[:200]!r}")
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    tls = context.wrap_socket(sock, server_hostname=host)
    if tls.selected_alpn_protocol() != "h2":
        sys.exit(f"ALPN chose {tls.selected_alpn_protocol()}")
    return tls


def connection():
    config = h2.config.H2Configuration(
        client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False,
        validate_inbound_headers=False, header_encoding="utf-8")
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    return conn


def pump(tls, conn, results, until, timeout=10):
    deadline = time.time() + timeout
    goaway = None
    while time.time() < deadline and not until(results) and goaway is None:
        tls.settimeout(max(0.05, deadline - time.time()))
        try:
            data = tls.recv(65536)
        except socket.timeout:
            break
        except (ConnectionError, ssl.SSLError):
            break
        if not data:
            break
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            results["protocol_error"] = str(error)
            break
        for event in events:
            stream = getattr(event, "stream_id", None)
            entry = results["streams"].setdefault(str(stream), {}) if stream else None
            if isinstance(event, h2.events.ResponseReceived):
                headers = dict(event.headers)
                entry["status"] = int(headers[":status"])
                entry["error"] = headers.get("pinproxy-error")
                entry["body"] = 0
            elif isinstance(event, h2.events.DataReceived):
                entry["body"] = entry.get("body", 0) + len(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.TrailersReceived):
                entry["trailers"] = {
                    (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                    for k, v in event.headers}
            elif isinstance(event, h2.events.StreamEnded):
                entry["ended"] = True
            elif isinstance(event, h2.events.StreamReset):
                entry["reset"] = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                goaway = int(event.error_code)
                results["goaway"] = goaway
        try:
            tls.sendall(conn.data_to_send())
        except (ConnectionError, ssl.SSLError, OSError):
            break
    return results


def requests(tls, conn, items):
    results = {"streams": {}, "goaway": None}
    ids = []
    for item in items:
        headers = item["headers"] if isinstance(item, dict) else item
        body = item.get("body") if isinstance(item, dict) else None
        stream = conn.get_next_available_stream_id()
        ids.append(stream)
        conn.send_headers(stream, [(n, v) for n, v in headers], end_stream=body is None)
        if body is not None:
            conn.send_data(stream, body.encode(), end_stream=True)
    tls.sendall(conn.data_to_send())

    def done(results):
        streams = results["streams"]
        return all(
            str(s) in streams and (streams[str(s)].get("ended") or "reset" in streams[str(s)]) for s in ids)

    pump(tls, conn, results, done)
    results["order"] = [str(s) for s in ids]
    return results


def flood(tls, conn, host, count):
    """CVE-2023-44487: streams opened and reset at once, as fast as possible."""
    results = {"streams": {}, "goaway": None, "sent": 0}
    headers = [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", "/small")]
    try:
        for _ in range(count):
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, headers, end_stream=True)
            conn.reset_stream(stream, error_code=8)
            results["sent"] += 1
            if results["sent"] % 50 == 0:
                tls.sendall(conn.data_to_send())
        tls.sendall(conn.data_to_send())
    except (ConnectionError, ssl.SSLError, h2.exceptions.ProtocolError) as error:
        results["send_error"] = str(error)
    pump(tls, conn, results, lambda r: False, timeout=5)
    # After a GOAWAY the proxy closes: a read ends.
    try:
        tls.settimeout(5)
        results["closed"] = tls.recv(65536) == b""
    except (ConnectionError, ssl.SSLError, socket.timeout, OSError):
        results["closed"] = True
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--requests")
    parser.add_argument("--flood", type=int)
    args = parser.parse_args()
    tls = open_tunnel(args.proxy, args.host, args.ca)
    conn = connection()
    tls.sendall(conn.data_to_send())
    if args.flood:
        print(json.dumps(flood(tls, conn, args.host, args.flood)))
    else:
        with open(args.requests) as handle:
            print(json.dumps(requests(tls, conn, json.load(handle))))


if __name__ == "__main__":
    main()
