#!/usr/bin/env python3
"""Memory per idle client connection: pinproxy's RSS with N keep-alive
client connections open and idle, each having made one request through a
forward listener to an nginx TLS origin (so each holds a session, a parser
and its buffers, not just an accepted socket), against its RSS before them.

Usage: Benchmarks/idle-connections.py [--connections 10000] [BINARY]
Prints idle RSS, RSS with the connections, and KiB per connection (RSS is
what the proxy owns in user space; the kernel's socket buffers are not in it).
127.0.0.1 only; raises its own descriptor limit; bounded by --connections.
"""

import argparse
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKI = f"{ROOT}/Tests/Fixtures/pki"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def wait_listening(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("binary", nargs="?", default=f"{ROOT}/.build/release/pinproxy")
    args = parser.parse_args()
    # This process and pinproxy (which inherits the limit) each hold one fd
    # per connection, plus a few hundred.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.connections + 500
    if hard != resource.RLIM_INFINITY and hard < want:
        raise SystemExit(f"the descriptor limit ({hard}) is below {want}: raise it (ulimit -Hn) or ask for fewer")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else hard, hard))

    work = tempfile.mkdtemp(prefix="pinproxy-idle-")
    origin, listen = free_port(), free_port()
    with open(f"{work}/chain.pem", "w") as f:
        f.write(open(f"{PKI}/httpbin.pem").read() + open(f"{PKI}/int-a.pem").read())
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(f"worker_processes 1;\npid {work}/nginx.pid;\nerror_log {work}/nginx-error.log;\n"
                f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; keepalive_requests 1000000;\n"
                f"  server {{ listen 127.0.0.1:{origin} ssl; ssl_certificate {work}/chain.pem; "
                f"ssl_certificate_key {PKI}/httpbin.key; location /small {{ return 200 \"{'0' * 100}\"; }} }} }}\n")
    with open(f"{work}/proxy.yaml", "w") as f:
        f.write(f"stateDirectory: {work}/state\nlogging: {{access: false}}\n"
                f"limits: {{maxConnections: {args.connections + 100}, maxConnectionsPerClient: {args.connections + 100}}}\n"
                f"timeouts: {{idleKeepAlive: 600}}\n"
                f"listeners:\n  - {{name: forward, address: \"127.0.0.1:{listen}\", mode: forward}}\n"
                f"connectTo: [\"httpbin.org:443:127.0.0.1:{origin}\"]\n"
                f"anchorSets:\n  test: {{files: [{PKI}/root-a.pem]}}\ndefaults: {{action: deny}}\n"
                f"domains:\n  - {{domain: httpbin.org, anchors: [test], pinningMode: publicKey, "
                f"pinnedCertificates: [{PKI}/int-a.pem]}}\n")
    subprocess.run(["nginx", "-c", f"{work}/nginx.conf"], check=True)
    proxy = subprocess.Popen([args.binary, "run", "--config", f"{work}/proxy.yaml"],
                             stderr=open(f"{work}/proxy.log", "w"))
    sockets = []
    try:
        wait_listening(listen)
        request = b"GET http://httpbin.org/small HTTP/1.1\r\nHost: httpbin.org\r\n\r\n"

        def one_request(sock):
            sock.sendall(request)
            data = b""
            while not data.endswith(b"0" * 100):
                chunk = sock.recv(4096)
                if not chunk:
                    raise SystemExit("the proxy closed a connection: " + data[:200].decode(errors="replace"))
                data += chunk
            if not data.startswith(b"HTTP/1.1 200"):
                raise SystemExit("unexpected answer: " + data[:200].decode(errors="replace"))

        # Warm up: the upstream pool, the trust cache, the loops' buffers.
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", listen)) as s:
                one_request(s)
        time.sleep(1)
        before = rss_kb(proxy.pid)
        started = time.time()
        for index in range(args.connections):
            s = socket.create_connection(("127.0.0.1", listen))
            one_request(s)
            sockets.append(s)
        time.sleep(2)
        after = rss_kb(proxy.pid)
        if proxy.poll() is not None:
            raise SystemExit("pinproxy exited")
        # Every connection must still be open (not closed by a limit or a timer).
        selector = selectors.DefaultSelector()
        for s in sockets:
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
        closed = len(selector.select(timeout=0.5))
        print(f"connections: {args.connections} (opened in {time.time() - started:.1f} s; "
              f"{closed} closed or readable by the proxy's side)")
        print(f"pinproxy RSS idle: {before / 1024:.1f} MB")
        print(f"pinproxy RSS with {args.connections} idle connections: {after / 1024:.1f} MB")
        print(f"per idle connection: {(after - before) / args.connections:.2f} KiB")
    finally:
        for s in sockets:
            s.close()
        proxy.send_signal(signal.SIGTERM)
        try:
            proxy.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proxy.kill()
        subprocess.run(["nginx", "-c", f"{work}/nginx.conf", "-s", "stop"], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
