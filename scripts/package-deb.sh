#!/usr/bin/env bash
# Builds .build/pinproxy_VERSION_ARCH.deb: the release binary with the Swift
# standard library linked in (the target needs no Swift), the systemd unit,
# a loopback-only configuration as a conffile, a man page, and maintainer
# scripts that create the `pinproxy` system user and /var/lib/pinproxy and
# enable (not start) the unit. No debhelper: dpkg-deb builds it.
#
#   scripts/package-deb.sh            # builds the release binary first
#   PINPROXY_RELEASE=BINARY scripts/package-deb.sh   # packages that binary
#
# Prints the .deb's path.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${PINPROXY_RELEASE:-}
if [ -z "$binary" ]; then
  swift build -c release --static-swift-stdlib --product pinproxy --build-path .build-release >&2
  binary=.build-release/release/pinproxy
fi
[ -x "$binary" ] || { echo "package-deb: no binary at $binary" >&2; exit 1; }
upstream=$(sed -n 's/.*static let current = "\([0-9.]*\)".*/\1/p' Sources/PinProxy/Background/PinFailureReport.swift)
[ -n "$upstream" ] || { echo "package-deb: no version in PinFailureReport.swift" >&2; exit 1; }
version="$upstream-1"
arch=$(dpkg --print-architecture)
deb=".build/pinproxy_${version}_${arch}.deb"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
src=packaging/debian

install -D -m 0755 "$binary" "$root/usr/bin/pinproxy"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/pinproxy"
install -D -m 0644 "$src/pinproxy.yaml" "$root/etc/pinproxy/pinproxy.yaml"
# The unit as shipped, with the packaged binary and the package's system
# user in place of systemd's dynamic one (postinst creates it).
install -d "$root/lib/systemd/system"
sed -e 's|/usr/local/bin/pinproxy|/usr/bin/pinproxy|g' -e 's|^DynamicUser=yes$|User=pinproxy\nGroup=pinproxy|' \
  -e '/^# pinproxy under systemd. Install:/,/^#   systemctl daemon-reload/d' \
  systemd/pinproxy.service > "$root/lib/systemd/system/pinproxy.service"
chmod 0644 "$root/lib/systemd/system/pinproxy.service"
doc="$root/usr/share/doc/pinproxy"
install -D -m 0644 "$src/copyright" "$doc/copyright"
sed -e "s/VERSION/$version/" -e "s/DATE/$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")/" \
  "$src/changelog" | gzip -9n > "$doc/changelog.Debian.gz"
chmod 0644 "$doc/changelog.Debian.gz"
install -D -m 0644 config/pinproxy.yaml "$doc/examples/pinproxy.yaml"
install -m 0644 config/examples/national-root.pem config/examples/ct-log-list.json "$doc/examples/"
# Yams (the YAML reader) carries libyaml's C sources; Swift links packages
# statically, so the binary holds its copy: said, not hidden.
install -D -m 0644 "$src/lintian-overrides" "$root/usr/share/lintian/overrides/pinproxy"
install -d "$root/usr/share/man/man1"
gzip -9n < "$src/pinproxy.1" > "$root/usr/share/man/man1/pinproxy.1.gz"
chmod 0644 "$root/usr/share/man/man1/pinproxy.1.gz"

# Depends: the packages of the shared libraries the binary loads.
depends=$(objdump -p "$root/usr/bin/pinproxy" | awk '/NEEDED/ {print $2}' | while read -r lib; do
  path=$(ldconfig -p | awk -v lib="$lib" '$1 == lib {print $NF; exit}')
  [ -n "$path" ] || { echo "package-deb: $lib not found by ldconfig" >&2; continue; }
  # dpkg knows a library by the path its package ships (/lib or /usr/lib).
  { dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null || true; } | cut -d: -f1 | head -1
done | sort -u | paste -sd, | sed 's/,/, /g')
[ -n "$depends" ] || { echo "package-deb: no package provides the libraries the binary loads" >&2; exit 1; }
install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: pinproxy
Version: $version
Architecture: $arch
Maintainer: pinproxy developers <pinproxy@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends, adduser, init-system-helpers (>= 1.54~)
Section: net
Priority: optional
Homepage: https://github.com/pinproxy/pinproxy
Description: pinning-aware HTTPS forwarding proxy
 pinproxy lets clients that cannot be updated (legacy apps, devices,
 scripts, payment terminals) reach HTTPS services under per-domain trust
 policies: anchor sets, certificate and public-key pins with AFNetworking's
 semantics, App Transport Security rules, client certificates, signed
 dynamic pin lists and revocation checks.
 .
 The package installs a loopback-only forward proxy as a systemd service,
 enabled but not started.
CONTROL
echo "/etc/pinproxy/pinproxy.yaml" > "$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do install -m 0755 "$src/$script" "$root/DEBIAN/$script"; done
# Conffiles are checksummed by dpkg itself, as dh_md5sums leaves them out.
(cd "$root" && find . \( -path ./DEBIAN -o -path ./etc \) -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs md5sum) \
  > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
mkdir -p .build
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
