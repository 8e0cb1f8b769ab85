#!/usr/bin/env python3
"""A TLS HTTP/2 origin (Python's `h2`) that behaves as told on its first
connection, to exercise the proxy's GOAWAY handling:

  /trailers        answered without a length, with a trailer (x-checksum)
  /reset           answered with RST_STREAM (INTERNAL_ERROR), the connection kept
  --silent-after-first  after its first response a connection sends nothing
                   more (PINGs go unanswered) while staying open
  --goaway-first   the first connection answers nothing: it reads the
                   requests, sends GOAWAY naming last stream 0 (none was
                   processed, RFC 9113 §6.8) and closes. Later connections
                   answer every request 200 "served on connection N".

Prints "READY PORT" once listening; appends one line per connection and per
request to --log.
"""
import argparse
import socket
import ssl
import threading

import h2.config
import h2.connection
import h2.events

LOCK = threading.Lock()
COUNT = [0]


def log(path, line):
    with LOCK, open(path, "a") as handle:
        handle.write(line + "\n")


def serve(sock, args):
    with LOCK:
        COUNT[0] += 1
        number = COUNT[0]
    log(args.log, f"connection {number}")
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    answered = False
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            events = conn.receive_data(data)
            for event in events:
                if isinstance(event, h2.events.RequestReceived):
                    headers = dict(event.headers)
                    log(args.log, f"request {number} {headers.get(':path')}")
                    if args.goaway_first and number == 1:
                        conn.close_connection(last_stream_id=0)
                        sock.sendall(conn.data_to_send())
                        # Close only after the peer did, as a server that
                        # drains would: closing with its bytes unread would
                        # reset the connection before the GOAWAY is read.
                        sock.settimeout(5)
                        while sock.recv(65536):
                            pass
                        return
                    body = f"served on connection {number}\n".encode()
                    if headers.get(":path") == "/reset":
                        conn.reset_stream(event.stream_id, error_code=2)
                    elif headers.get(":path") == "/trailers":
                        # No length, then trailers: the proxy must frame it
                        # (chunked for HTTP/1.1 clients) and keep the trailer.
                        conn.send_headers(event.stream_id, [(":status", "200")])
                        conn.send_data(event.stream_id, body)
                        conn.send_headers(event.stream_id, [("x-checksum", "abc123")], end_stream=True)
                    else:
                        conn.send_headers(event.stream_id, [(":status", "200"), ("content-length", str(len(body)))])
                        conn.send_data(event.stream_id, body, end_stream=True)
            if args.silent_after_first and answered:
                conn.data_to_send()  # discarded: the peer hears nothing more
                continue
            sock.sendall(conn.data_to_send())
            answered = any(isinstance(e, h2.events.RequestReceived) for e in events) or answered
    except (ConnectionError, ssl.SSLError, OSError):
        return
    finally:
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--goaway-first", action="store_true")
    parser.add_argument("--silent-after-first", action="store_true")
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"READY {listener.getsockname()[1]}", flush=True)
    while True:
        raw, _ = listener.accept()
        try:
            tls = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(tls, args), daemon=True).start()


if __name__ == "__main__":
    main()
