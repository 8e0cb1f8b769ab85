#!/usr/bin/env python3
"""User-space instructions per request, counted by valgrind's callgrind:
pinproxy and nginx doing the same job, one worker each, per object (the
program itself with its static Swift runtime, libssl, libcrypto, libc).

The job is Benchmarks/cpu-per-request.sh's: small GETs on loopback,
forwarded over verified TLS (pinproxy: a publicKey pin on the test
intermediate; nginx: proxy_ssl_verify) to an nginx TLS origin, the upstream
connection pooled. Two loads: one keep-alive client connection, and a new
client connection per request. Each: WARMUP requests, the counters zeroed,
REQUESTS requests one at a time, the counters dumped. Then the idle rate:
two windows of IDLE seconds with nothing asked, reported per second (work
bound to time, not to requests: timers, file polling); both are printed,
and the table shows the quieter. pinproxy's idle window starts once
its thread count has held still for 8 s (printed): Dispatch's worker threads
left from the loads exit a few seconds after them, each running OpenSSL's
per-thread clean-up (about 30k instructions), which is the loads' tail,
not idle work. A worker can still exit later (one kept alive by a
background tick a while): the window that meets it shows it in libcrypto,
and the other window does not.

Counts are exact, so two runs of the same binaries agree within about 1%
however busy the machine is; instructions are not cycles (cache misses and
the kernel are not counted): report CPU time from Benchmarks/compare beside
them. pinproxy's rows also count its calls into the Swift runtime's
reference counting per request ("refcounts": swift_retain, swift_release
and their _n forms), each an atomic read-modify-write that costs tens of
cycles, far more than its instructions say: on this job they are a larger
share of pinproxy's CPU time than of its instructions. valgrind 3.19 cannot read the DWARF 5 Swift writes, so pinproxy runs
as a copy with `objcopy --strip-debug` (symbols kept).

Usage: Benchmarks/instructions-per-request.py PINPROXY [--requests N]
       [--warmup N] [--idle SECONDS] [--json]
       Benchmarks/instructions-per-request.py PINPROXY --ceiling FILE
The second form is the ratchet the test run keeps (Benchmarks/smoke.sh):
pinproxy alone, the keep-alive load only, a short window (the requests and
warm-up FILE names), no idle window; it fails when pinproxy's own code
spends more instructions per request than FILE's ceiling. The ceiling is
lowered as each step of the data path lands; a count, not a time.
"""
import argparse
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKI = os.path.join(ROOT, "Tests", "Fixtures", "pki")
REQUEST_ABSOLUTE = b"GET http://httpbin.org/small HTTP/1.1\r\nHost: httpbin.org\r\n\r\n"
REQUEST_ORIGIN = b"GET /small HTTP/1.1\r\nHost: httpbin.org\r\n\r\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, what, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"instructions: {what} did not listen on {port}")


def exchange(client, request, pending):
    """One request and its whole response; returns bytes read past it."""
    client.sendall(request)
    while b"\r\n\r\n" not in pending:
        data = client.recv(65536)
        if not data:
            sys.exit("instructions: the proxy closed the connection")
        pending += data
    head, _, rest = pending.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"instructions: answered {head[:80]!r}")
    length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head + b"\r\n").group(1))
    while len(rest) < length:
        rest += client.recv(65536)
    return rest[length:]


def run_requests(port, request, count, keep_alive):
    if keep_alive:
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = b""
        for _ in range(count):
            pending = exchange(client, request, pending)
        client.close()
    else:
        for _ in range(count):
            client = socket.create_connection(("127.0.0.1", port))
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            exchange(client, request, b"")
            client.close()


def wait_for_served_chain(path, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if b'"chain"' in open(path, "rb").read():
                time.sleep(0.5)
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"instructions: {path} was not written within {seconds} s")


def wait_for_threads_to_settle(pid, quiet=8, limit=60):
    """Waits until the process's thread count has not changed for `quiet`
    seconds (at most `limit`); returns (threads, seconds waited)."""
    started = time.monotonic()
    last, since = None, time.monotonic()
    while time.monotonic() - started < limit:
        try:
            count = len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            break
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        time.sleep(0.5)
    return last, time.monotonic() - started


# The Swift runtime's reference counting: each call is an atomic
# read-modify-write (tens of cycles, far more than its instructions say).
# Retains and releases of strings and arrays (swift_bridgeObject*) end in
# these, so they are not counted twice.
REFCOUNTING = {"swift_retain", "swift_release", "swift_retain_n", "swift_release_n"}


def named(line, table):
    """A `key=(id) name` line of callgrind's compressed names: its key and
    the name, learning it when given and looking it up by id when not."""
    key, _, value = line.strip().partition("=")
    m = re.match(r"\((\d+)\)(?: (.*))?$", value)
    if not m:
        return key, value
    if m.group(2):
        table[m.group(1)] = m.group(2)
    return key, table.get(m.group(1), "?")


def per_object(path):
    """Self cost (Ir) by object from a callgrind output file, and the calls
    into the runtime's reference counting (under "refcounts"). A cost line
    after `calls=` is the call's inclusive cost, not self cost: skipped.
    A `cob=` only names the callee's object for the next call."""
    names, functions, totals = {}, {}, collections.Counter()
    current, skip_next, callee = "?", False, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if skip_next:
                skip_next = False
                continue
            if line.startswith(("fn=", "cfn=")):
                # Functions share one name table, as objects do.
                key, name = named(line, functions)
                callee = name if key == "cfn" else None
            elif line.startswith(("ob=", "cob=")):
                # Objects share one name table: a name may first appear in
                # a call's `cob=` and be used by number in `ob=` later.
                key, name = named(line, names)
                if key == "ob":
                    current = name
            elif line.startswith("calls="):
                skip_next = True
                if callee in REFCOUNTING:
                    totals["refcounts"] += int(line[6:].split()[0])
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2:
                    totals[current] += int(parts[1])
    return totals


def group(totals, program):
    out = collections.Counter()
    for name, cost in totals.items():
        base = os.path.basename(name)
        if name == "refcounts":
            continue
        if base == program:
            out["own"] += cost
        elif base.startswith("libssl"):
            out["libssl"] += cost
        elif base.startswith("libcrypto"):
            out["libcrypto"] += cost
        elif base.startswith("libc.so") or base.startswith("libc-"):
            out["libc"] += cost
        else:
            out["other"] += cost
    out["total"] = sum(v for k, v in out.items())
    out["refcounts"] = totals["refcounts"]
    return out


class Measured:
    """A program run under callgrind with counting on from the start; the
    windows are bracketed from outside with callgrind_control."""

    def __init__(self, name, argv, work, program):
        self.name, self.work, self.program = name, work, program
        self.out = os.path.join(work, f"{name}.callgrind")
        self.log = open(os.path.join(work, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}", "--dump-line=no"] + argv,
            stdout=self.log, stderr=subprocess.STDOUT, cwd=work)
        self.dumps = 0

    def control(self, flag):
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.work)

    def window(self, work):
        """Zeroes the counters, runs `work`, dumps: the objects' self costs."""
        self.control("-z")
        work()
        before = set(os.listdir(self.work))
        self.control("-d")
        self.dumps += 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            new = [n for n in os.listdir(self.work) if n.startswith(f"{self.name}.callgrind.") and n not in before]
            if new:
                time.sleep(0.5)  # written whole before it is read
                return group(per_object(os.path.join(self.work, sorted(new)[-1])), self.program)
            time.sleep(0.2)
        sys.exit(f"instructions: no dump from {self.name}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def read_ceiling(path):
    """`key: value` lines (own, requests, warmup); `#` starts a comment."""
    values = {}
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in ("own", "requests", "warmup") or not value.strip().isdigit():
            sys.exit(f"instructions: {path}:{number}: expected `own|requests|warmup: NUMBER`")
        values[key.strip()] = int(value.strip())
    missing = {"own", "requests", "warmup"} - values.keys()
    if missing:
        sys.exit(f"instructions: {path}: missing {', '.join(sorted(missing))}")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pinproxy")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory and its callgrind files (for callgrind_annotate)")
    parser.add_argument("--ceiling", metavar="FILE",
                        help="the ratchet: keep-alive only, pinproxy only; fail above FILE's ceiling")
    args = parser.parse_args()
    ceiling = None
    if args.ceiling:
        ceiling = read_ceiling(args.ceiling)
        args.requests, args.warmup, args.idle = ceiling["requests"], ceiling["warmup"], 0
    for tool in ("valgrind", "callgrind_control", "nginx", "objcopy"):
        if not shutil.which(tool):
            sys.exit(f"instructions: {tool} is not installed (scripts/install-deps.sh installs it)")
    work = tempfile.mkdtemp(prefix="pinproxy-instructions-")
    origin_port, proxy_port, nginx_port = free_port(), free_port(), free_port()
    with open(f"{work}/chain.pem", "w") as f:
        f.write(open(f"{PKI}/httpbin.pem").read() + open(f"{PKI}/int-a.pem").read())
    with open(f"{work}/origin.conf", "w") as f:
        f.write(f"worker_processes 1;\npid {work}/origin.pid;\nerror_log {work}/origin-error.log;\n"
                f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; keepalive_requests 1000000;\n"
                f"  server {{ listen 127.0.0.1:{origin_port} ssl; ssl_certificate {work}/chain.pem; "
                f"ssl_certificate_key {PKI}/httpbin.key; location /small {{ return 200 \"{'0' * 100}\"; }} }} }}\n")
    # The peer: nginx forwarding the same GETs over verified TLS to the same
    # origin, its upstream pooled; one worker, no master, in the foreground.
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(f"master_process off;\nworker_processes 1;\ndaemon off;\npid {work}/nginx.pid;\n"
                f"error_log {work}/nginx-error.log;\nevents {{ worker_connections 1024; }}\n"
                f"http {{ access_log off; keepalive_requests 1000000;\n"
                f"  upstream origin {{ server 127.0.0.1:{origin_port}; keepalive 16; }}\n"
                f"  server {{ listen 127.0.0.1:{nginx_port}; location / {{ proxy_pass https://origin; "
                f"proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_ssl_verify on; "
                f"proxy_ssl_trusted_certificate {PKI}/root-a.pem; proxy_ssl_name httpbin.org; "
                f"proxy_ssl_server_name on; proxy_ssl_session_reuse on; }} }} }}\n")
    with open(f"{work}/proxy.yaml", "w") as f:
        f.write(f"stateDirectory: \"{work}/state\"\neventLoops: 1\n"
                f"listeners:\n  - {{name: forward, address: \"127.0.0.1:{proxy_port}\", mode: forward}}\n"
                f"connectTo: [\"httpbin.org:443:127.0.0.1:{origin_port}\"]\n"
                f"anchorSets:\n  test: {{files: [{PKI}/root-a.pem]}}\ndefaults: {{action: deny}}\n"
                f"limits: {{maxIdlePerUpstream: 64}}\nlogging: {{access: false}}\n"
                f"domains:\n  - {{domain: httpbin.org, anchors: [test], pinningMode: publicKey, "
                f"pinnedCertificates: [{PKI}/int-a.pem]}}\n")
    binary = os.path.join(work, "pinproxy")
    subprocess.run(["objcopy", "--strip-debug", args.pinproxy, binary], check=True)
    subprocess.run(["nginx", "-c", f"{work}/origin.conf"], check=True)
    measured = []
    results = {}
    try:
        wait_listening(origin_port, "the origin")
        peers = [
            ("nginx", ["nginx", "-c", f"{work}/nginx.conf"], "nginx", nginx_port, REQUEST_ORIGIN),
            ("pinproxy", [binary, "run", "--config", f"{work}/proxy.yaml"], "pinproxy", proxy_port,
             REQUEST_ABSOLUTE),
        ]
        if ceiling:
            peers = peers[1:]
        loads = (("keep-alive", True),) if ceiling else (("keep-alive", True), ("new connection", False))
        for name, argv, program, port, request in peers:
            peer = Measured(name, argv, work, program)
            measured.append(peer)
            wait_listening(port, name)
            for load, keep_alive in loads:
                run_requests(port, request, args.warmup, keep_alive)
                costs = peer.window(lambda: run_requests(port, request, args.requests, keep_alive))
                results[(name, load)] = {k: v / args.requests for k, v in costs.items()}
            if not args.idle:
                peer.stop()
                continue
            if name == "pinproxy":
                # The chain the rule accepted is written to served-chains.json
                # at the recorder's next tick (once, real work): idle starts
                # after it.
                wait_for_served_chain(f"{work}/state/served-chains.json")
                # Dispatch's worker threads left over from the loads exit
                # once idle for a few seconds, each running OpenSSL's
                # per-thread clean-up: the tail of the loads, not work an
                # idle daemon repeats. Idle starts once the threads settle
                # (printed, so the wait is seen, not hidden).
                settled = wait_for_threads_to_settle(peer.proc.pid)
                print(f"instructions: pinproxy's threads settled at {settled[0]} after {settled[1]:.0f} s",
                      file=sys.stderr)
            # Two windows, the quieter in the table and both printed: a
            # worker thread that exits late (the loads' tail, once) lands in
            # one of them, not in the rate an idle daemon keeps up.
            rates = []
            for _ in range(2):
                costs = peer.window(lambda: time.sleep(args.idle))
                rates.append({k: v / args.idle for k, v in costs.items()})
            results[(name, "idle")] = min(rates, key=lambda rate: rate["total"])
            print(f"instructions: {name} idle, two windows of {args.idle:g} s: "
                  + ", ".join(f"{rate['total'] / 1000:.1f}k" for rate in rates)
                  + " a second (the table shows the quieter)", file=sys.stderr)
            peer.stop()
    finally:
        for peer in measured:
            if peer.proc.poll() is None:
                peer.stop()
        subprocess.run(["nginx", "-c", f"{work}/origin.conf", "-s", "stop"], stderr=subprocess.DEVNULL)
    if ceiling:
        own = results[("pinproxy", "keep-alive")]["own"]
        verdict = "within" if own <= ceiling["own"] else "ABOVE"
        print(f"instructions: pinproxy's own code, {own / 1000:.1f}k per keep-alive request "
              f"({args.requests} after {args.warmup}), {verdict} the ceiling of {ceiling['own'] / 1000:.1f}k "
              f"({args.ceiling})")
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(0 if own <= ceiling["own"] else 1)
    if args.json:
        print(json.dumps({f"{n}/{l}": v for (n, l), v in results.items()}, indent=1))
    else:
        print(f"instructions per request ({args.requests} requests after {args.warmup}; idle: per second over "
              f"{args.idle:g} s)")
        print(f"{'':28} {'own':>9} {'libssl':>9} {'libcrypto':>9} {'libc':>9} {'other':>9} {'total':>9} {'× nginx':>8}"
              f" {'refcounts':>9}")
        for load in ("keep-alive", "new connection", "idle"):
            for name in ("nginx", "pinproxy"):
                row = results.get((name, load))
                if row is None:
                    continue
                ratio = row["total"] / results[("nginx", load)]["total"] if results[("nginx", load)]["total"] else 0
                print(f"{name + ', ' + load:28} " + " ".join(f"{row.get(k, 0) / 1000:8.1f}k" for k in
                      ("own", "libssl", "libcrypto", "libc", "other", "total"))
                      + (f" {ratio:7.2f}× {row.get('refcounts', 0):9.0f}" if name == "pinproxy" else ""))
    if args.keep:
        print(f"callgrind files kept in {work} (NAME.callgrind.N: keep-alive, new connection, then the two idle windows)")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
