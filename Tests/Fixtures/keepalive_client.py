#!/usr/bin/env python3
"""One client connection that sends a request, waits for a signal, and sends
another on the same connection: for proving that a reload between the two
governs the second. HTTP/1.1 absolute-form to a forward listener,
or (--h2) an HTTP/2 stream inside an intercepted CONNECT.

  keepalive_client.py --proxy PORT --host HOST --path /hello --go FILE [--h2 --ca CA.pem]

Prints "1 STATUS CODE" after the first response (CODE is Pinproxy-Error or
-), then waits until FILE exists, sends the second request and prints
"2 STATUS CODE". A closed connection prints "2 closed".
"""
import argparse
import os
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events


def read_http1_response(sock, buffer):
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buffer
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return (status, headers.get("pinproxy-error", "-")), rest[length:]


def wait_for(path):
    deadline = time.time() + 60
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.05)


def http1(args):
    sock = socket.create_connection(("127.0.0.1", args.proxy), timeout=30)
    request = f"GET http://{args.host}{args.path} HTTP/1.1\r\nHost: {args.host}\r\n\r\n".encode()
    buffer = b""
    for number in (1, 2):
        if number == 2:
            wait_for(args.go)
        try:
            sock.sendall(request)
            result, buffer = read_http1_response(sock, buffer)
        except OSError:
            result = None
        print(f"{number} {result[0]} {result[1]}" if result else f"{number} closed", flush=True)


def http2(args):
    sock = socket.create_connection(("127.0.0.1", args.proxy), timeout=30)
    sock.sendall(f"CONNECT {args.host}:443 HTTP/1.1\r\nHost: {args.host}:443\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(4096)
    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])
    tls = context.wrap_socket(sock, server_hostname=args.host)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    tls.sendall(conn.data_to_send())
    for number in (1, 2):
        if number == 2:
            wait_for(args.go)
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [(":method", "GET"), (":scheme", "https"), (":authority", args.host), (":path", args.path)],
            end_stream=True)
        tls.sendall(conn.data_to_send())
        status, code, done = None, "-", False
        while not done:
            data = tls.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    headers = {k.decode(): v.decode() for k, v in event.headers}
                    status, code = int(headers[":status"]), headers.get("pinproxy-error", "-")
                if isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and event.stream_id == stream:
                    done = True
                if isinstance(event, h2.events.ConnectionTerminated):
                    done = True
            tls.sendall(conn.data_to_send())
        print(f"{number} {status} {code}" if status else f"{number} closed", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", type=int, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--path", default="/hello")
    parser.add_argument("--go", required=True)
    parser.add_argument("--h2", action="store_true")
    parser.add_argument("--ca")
    args = parser.parse_args()
    (http2 if args.h2 else http1)(args)


if __name__ == "__main__":
    sys.exit(main())
