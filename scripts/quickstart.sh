#!/usr/bin/env bash
# Offline demo of the proxy: a local TLS origin (openssl s_server) plays the
# bank; pinproxy runs config/quickstart.yaml; curl sends one request that the
# policy allows and one it refuses. Uses ports 3128 and 9443 on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PINPROXY:-.build/release/pinproxy}
[ -x "$bin" ] || swift build -c release --product pinproxy
examples=$PWD/config/examples
(cd "$examples" && exec openssl s_server -accept 127.0.0.1:9443 -cert api.bank.example.pem \
  -cert_chain intermediate.pem -key api.bank.example.key -WWW -quiet) >/dev/null 2>&1 &
origin=$!
"$bin" run --config config/quickstart.yaml 2>/tmp/pinproxy-quickstart.log &
proxy=$!
trap 'kill $origin $proxy 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listener=forward" /tmp/pinproxy-quickstart.log 2>/dev/null && (: </dev/tcp/127.0.0.1/9443) 2>/dev/null && break
  sleep 0.1
done
echo "\$ curl -x http://127.0.0.1:3128 http://api.bank.example/hello.txt"
curl -s -i -x http://127.0.0.1:3128 http://api.bank.example/hello.txt | grep -v -i '^date:'
echo
echo "\$ curl -x http://127.0.0.1:3128 http://pay.bank.example/hello.txt"
curl -s -i -x http://127.0.0.1:3128 http://pay.bank.example/hello.txt
echo
echo "proxy log:"
grep -E "refused" /tmp/pinproxy-quickstart.log | cut -c1-300
