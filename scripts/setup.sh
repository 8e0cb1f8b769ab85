#!/usr/bin/env bash
# One command from a fresh clone: install what is missing, build a release
# binary, and run the main job (evaluate the bundled example chain with the
# example configuration: one allowed host, one refused).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product pinproxy --static-swift-stdlib
bin=.build/release/pinproxy
"$bin" version
"$bin" check --config config/pinproxy.yaml
PINPROXY="$bin" scripts/quickstart.sh
echo "\$ pinproxy evaluate --config config/pinproxy.yaml --host api.bank.example --chain config/examples/api.bank.example-chain.pem"
"$bin" evaluate --config config/pinproxy.yaml --host api.bank.example --chain config/examples/api.bank.example-chain.pem
echo "\$ pinproxy evaluate --config config/pinproxy.yaml --host www.example.com --chain config/examples/api.bank.example-chain.pem"
"$bin" evaluate --config config/pinproxy.yaml --host www.example.com --chain config/examples/api.bank.example-chain.pem || true
