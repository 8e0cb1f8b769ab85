#!/usr/bin/env python3
"""CPU the proxy spends on a request head that arrives one byte per write.

  Benchmarks/head-bytes.py BINARY [BINARY ...] [--bytes 4096] [--runs 5]

For each binary: starts `pinproxy run` (forward listener, loopback only),
opens a connection and sends a GET whose head is --bytes long one byte per
send() (TCP_NODELAY, a short pause every 64 bytes so segments stay
separate), then reads the 400/403 it gets (the target is denied, so no
upstream is involved). The proxy's user+system CPU over the send, from
/proc/PID/stat, divided by the bytes, is the cost per byte; the median of
--runs runs is printed, with the ratio to the first binary.
"""
import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(binary, size):
    work = tempfile.mkdtemp(prefix="head-bytes-")
    port = free_port()
    config = os.path.join(work, "pinproxy.yaml")
    with open(config, "w") as f:
        f.write(f'stateDirectory: "{work}/state"\nlisteners:\n'
                f'  - {{name: forward, address: "127.0.0.1:{port}", mode: forward}}\n'
                "defaults: {action: deny}\nlogging: {access: false, level: error}\n")
    proxy = subprocess.Popen([binary, "run", "--config", config], stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        pad = size - len("GET http://denied.example/ HTTP/1.1\r\nHost: denied.example\r\nX-Pad: \r\n\r\n")
        head = ("GET http://denied.example/ HTTP/1.1\r\nHost: denied.example\r\nX-Pad: " + "p" * pad
                + "\r\n\r\n").encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        before = cpu_seconds(proxy.pid)
        for index in range(len(head)):
            s.send(head[index:index + 1])
            if index % 64 == 63:
                time.sleep(0.0005)
        answer = s.recv(100)
        after = cpu_seconds(proxy.pid)
        s.close()
        assert answer.startswith(b"HTTP/1.1 4"), answer
        return (after - before) / len(head) * 1e6
    finally:
        proxy.terminate()
        proxy.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    medians = []
    for binary in args.binaries:
        samples = [one_run(binary, args.bytes) for _ in range(args.runs)]
        medians.append(statistics.median(samples))
        ratio = medians[-1] / medians[0] if medians[0] else float("nan")
        print(f"{binary}: {medians[-1]:.2f} µs CPU per byte (median of {args.runs}: "
              f"{', '.join(f'{x:.2f}' for x in samples)}) ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
