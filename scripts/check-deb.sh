#!/usr/bin/env bash
# Checks the Debian package scripts/package-deb.sh built: lintian reports no
# error; it holds the binary, the unit, the conffile and the docs; the
# packaged binary needs no Swift and accepts the packaged configuration; and,
# run as root (on a machine made for the test, as CI's is), it installs with
# dpkg -i (system user, state directory, unit enabled but not started),
# removes keeping the configuration, and purges the configuration and state,
# all in a throwaway root that leaves the host's own files and pinproxy alone.
# Each check prints "package: NAME ok" or "package: NAME FAILED".
#
#   scripts/check-deb.sh .build/pinproxy_VERSION_ARCH.deb
set -uo pipefail
deb=${1:?usage: scripts/check-deb.sh PACKAGE.deb}
status=0
check() {
  local name=$1
  shift
  if "$@"; then echo "package: $name ok"; else echo "package: $name FAILED"; status=1; fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lintian_clean() {
  command -v lintian >/dev/null || { echo "lintian is not installed (scripts/install-deps.sh installs it)"; return 1; }
  lintian --tag-display-limit 0 "$deb" > "$work/lintian" 2>&1
  cat "$work/lintian"
  ! grep -q '^E: ' "$work/lintian"
}
check "lintian reports no error" lintian_clean

contents() {
  dpkg-deb -c "$deb" > "$work/contents" || return 1
  for path in ./usr/bin/pinproxy ./etc/pinproxy/pinproxy.yaml ./lib/systemd/system/pinproxy.service \
    ./usr/share/doc/pinproxy/copyright ./usr/share/man/man1/pinproxy.1.gz; do
    grep -q " $path\$" "$work/contents" || { echo "missing $path"; return 1; }
  done
  [ "$(dpkg-deb -f "$deb" Package)" = pinproxy ] &&
    dpkg-deb -e "$deb" "$work/control" && [ "$(cat "$work/control/conffiles")" = /etc/pinproxy/pinproxy.yaml ]
}
check "holds the binary, the unit, the conffile and the docs" contents

packaged_binary() {
  dpkg-deb -x "$deb" "$work/root" || return 1
  if ldd "$work/root/usr/bin/pinproxy" | grep -i swift; then echo "links a Swift library"; return 1; fi
  "$work/root/usr/bin/pinproxy" version &&
    "$work/root/usr/bin/pinproxy" check --config "$work/root/etc/pinproxy/pinproxy.yaml" &&
    grep -q '^ExecStart=/usr/bin/pinproxy run --config /etc/pinproxy/pinproxy.yaml$' \
      "$work/root/lib/systemd/system/pinproxy.service" &&
    grep -q '^User=pinproxy$' "$work/root/lib/systemd/system/pinproxy.service"
}
check "the packaged binary needs no Swift and checks the packaged config" packaged_binary

# Install, remove and purge happen in a throwaway root: new mount and PID
# namespaces in which /etc, /usr and /var are copy-on-write overlays on a
# tmpfs and /run is empty (no systemd to start or stop anything for). dpkg,
# adduser and the unit's enablement change only the overlays, which vanish
# with the namespaces: the host's files, users, units and its own pinproxy
# (installed or running, or not) are neither touched nor in the way.
in_throwaway_root() {
  command -v unshare >/dev/null || { echo "unshare (util-linux) is required"; return 1; }
  local layers
  layers=$(mktemp -d)
  unshare --mount --pid --fork --mount-proc --propagation private -- bash -c '
    set -e
    layers=$1; shift
    mount -t tmpfs throwaway "$layers"
    for dir in etc usr var; do
      mkdir -p "$layers/$dir/upper" "$layers/$dir/work"
      mount -t overlay throwaway -o "lowerdir=/$dir,upperdir=$layers/$dir/upper,workdir=$layers/$dir/work" "/$dir"
    done
    mount -t tmpfs throwaway /run
    "$@"' bash "$layers" "$@"
  local result=$?
  rmdir "$layers" 2>/dev/null
  return $result
}

install_remove_purge() {
  # A pinproxy of the host's own is purged from the throwaway root first.
  if dpkg -s pinproxy >/dev/null 2>&1; then dpkg -P pinproxy >/dev/null || return 1; fi
  dpkg -i "$deb" || return 1
  getent passwd pinproxy >/dev/null || { echo "no pinproxy user"; return 1; }
  [ "$(stat -c '%U %a' /var/lib/pinproxy)" = "pinproxy 700" ] || { echo "/var/lib/pinproxy: $(stat -c '%U %a' /var/lib/pinproxy)"; return 1; }
  [ -L /etc/systemd/system/multi-user.target.wants/pinproxy.service ] || { echo "the unit is not enabled"; return 1; }
  if pgrep -x pinproxy -u pinproxy >/dev/null; then echo "the service was started"; return 1; fi
  /usr/bin/pinproxy check --config /etc/pinproxy/pinproxy.yaml || return 1
  local verify
  verify=$(systemd-analyze verify /lib/systemd/system/pinproxy.service 2>&1 | grep -i "pinproxy.service" || true)
  [ -z "$verify" ] || { echo "systemd-analyze verify: $verify"; return 1; }
  echo "# an operator's edit" >> /etc/pinproxy/pinproxy.yaml
  dpkg -r pinproxy || return 1
  [ ! -e /usr/bin/pinproxy ] || { echo "remove left the binary"; return 1; }
  grep -q "an operator's edit" /etc/pinproxy/pinproxy.yaml || { echo "remove lost the configuration"; return 1; }
  [ -d /var/lib/pinproxy ] || { echo "remove took the state"; return 1; }
  dpkg -P pinproxy || return 1
  [ ! -e /etc/pinproxy ] || { echo "purge left /etc/pinproxy"; return 1; }
  [ ! -e /var/lib/pinproxy ] || { echo "purge left /var/lib/pinproxy"; return 1; }
  [ ! -e /etc/systemd/system/multi-user.target.wants/pinproxy.service ] || { echo "purge left the unit enabled"; return 1; }
}
if [ "$(id -u)" = 0 ]; then
  export deb
  export -f install_remove_purge
  check "dpkg -i, remove keeps the config, purge removes it and the state (in a throwaway root)" \
    in_throwaway_root install_remove_purge
else
  echo "package: install test needs root (run on a machine made for it, as CI does)"
fi
exit $status
