#!/usr/bin/env bash
# Installs the Debian packages pinproxy needs to build and test, if missing.
# Idempotent: does nothing (and needs no network) when all are present.
set -euo pipefail
packages=(libssl-dev libnghttp2-dev libcrypt-dev openssl curl pkg-config ca-certificates)
# The end-to-end tests' origin is a Python script (standard library only).
command -v python3 >/dev/null || packages+=(python3)
# Clients the end-to-end tests drive as people run them: Java's HttpClient
# (`java File.java`), wget, and headless Chromium (the refusal page, rendered).
command -v java >/dev/null || packages+=(openjdk-17-jdk-headless)
packages+=(chromium fonts-liberation wget)
# HTTP/2 end to end: nginx as an h2 origin (stub_status counts connections),
# nghttp2's client, server and h2load.
packages+=(nginx nghttp2-client nghttp2-server)
# Who may use the proxy: htpasswd (bcrypt files for proxyAuth) and ip (the
# network-namespace test of a listener on a non-loopback address).
packages+=(apache2-utils iproute2)
# The benchmarks' smoke run (Benchmarks/smoke.sh): Benchmarks/compare's peers
# and load (HAProxy, stunnel, wrk, socat), strace for system calls per
# request, gcc for its malloc counter.
packages+=(haproxy stunnel4 wrk socat strace gcc)
# Instructions per request (Benchmarks/instructions-per-request.py):
# valgrind's callgrind, and objcopy to strip the DWARF 5 it cannot read.
packages+=(valgrind binutils)
# Parent proxies the tests reach origins through: Squid (with TLS, for
# ssl-bump) and microsocks (SOCKS5).
packages+=(squid-openssl microsocks)
# The operator's view: promtool (Debian's prometheus package) checks a live
# /metrics scrape and the alert rules of config/monitoring.
packages+=(prometheus)
# Fitting into a fleet: a real PAC engine (Mozilla's, for the system Python)
# evaluates the PAC file pinproxy writes.
packages+=(python3-pacparser)
# SOCKS5 listener clients: Python's PySocks (curl's socks5h is already here).
packages+=(python3-socks)
# The Debian package (scripts/package-deb.sh): built with dpkg-deb, checked
# by lintian.
packages+=(lintian dpkg-dev binutils)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The prometheus package may start its own server where systemd runs; only
# promtool is wanted.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
# Nor the squid package's own daemon (it would hold port 3128, the embedded
# default listener's): the tests start Squid themselves.
if command -v systemctl >/dev/null && systemctl is-active --quiet squid 2>/dev/null; then
  systemctl disable --now squid >/dev/null 2>&1 || true
fi
# The admin tests parse /metrics with Prometheus' own Python parser.
python3 -c "import prometheus_client" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check prometheus-client
# Python's requests is one of the clients the end-to-end tests drive.
python3 -c "import requests" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check requests
# A raw HTTP/2 client for the malformed-request tests: Python's h2.
python3 -c "import h2" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check h2
command -v swift >/dev/null || { echo "swift 6.x is required on PATH (https://swift.org/install)" >&2; exit 1; }
