#!/usr/bin/env bash
# Checks systemd/pinproxy.service with systemd-analyze verify. verify insists
# that ExecStart's binary exists, so a copy pointing at the built binary is
# checked; everything else is the unit as shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v systemd-analyze >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null; }
binary=${1:-$PWD/.build/debug/pinproxy}
[ -x "$binary" ] || { echo "no pinproxy binary at $binary (build first)" >&2; exit 1; }
binary=$(realpath "$binary")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|/usr/local/bin/pinproxy|$binary|g" systemd/pinproxy.service > "$work/pinproxy.service"
output=$(systemd-analyze verify "$work/pinproxy.service" 2>&1 || true)
# Only report problems with this unit, not with unrelated units on the machine.
problems=$(echo "$output" | grep -i "pinproxy.service" || true)
if [ -n "$problems" ]; then
  echo "$problems" >&2
  echo "systemd-analyze verify: FAILED" >&2
  exit 1
fi
echo "systemd-analyze verify systemd/pinproxy.service: ok"
