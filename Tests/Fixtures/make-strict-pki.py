#!/usr/bin/env python3
"""Regenerates Tests/Fixtures/pki/strict: one certificate chain per case of the
certificate-profile checks (RFC 5280, CA/Browser Forum, ATS key rules, name
constraints, path building, anchors). The output is committed; tests read it.

For every case NAME it writes NAME.chain.pem (what the server sends, leaf
first), NAME.anchors.pem (the anchor set the case is evaluated against) and
NAME.key (the leaf's key, so an origin can serve the chain), and it lists the
case in manifest.json with the host it is for. The expected verdicts live in
the tests (Tests/PinTLSTests/StrictProfileTests.swift), not here.

Dates: valid 2025-01-01 .. 2035-01-01 unless a case says otherwise, so the
chains work both at the tests' fixed clock (2026-06-01) and today, for the
daemon, which runs on the wall clock.

Usage: python3 Tests/Fixtures/make-strict-pki.py   (needs `cryptography`)
"""
import datetime
import ipaddress
import json
import os
import shutil

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID, NameOID

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pki", "strict")
UTC = datetime.timezone.utc
VALID_FROM = datetime.datetime(2025, 1, 1, tzinfo=UTC)
VALID_TO = datetime.datetime(2035, 1, 1, tzinfo=UTC)
serial = [5000]
CASES = []


def rsa_key(bits=2048):
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def name(cn, org="pinproxy strict tests"):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def der_length(n):
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def tlv(tag, content):
    return bytes([tag]) + der_length(len(content)) + content


class Cert:
    """A certificate being built: sensible RFC 5280 defaults that each case overrides."""

    def __init__(self, subject, key, issuer=None, *, ca=False):
        self.subject, self.key, self.issuer = subject, key, issuer
        self.ca = ca
        self.bc = "critical"          # "critical" | "noncritical" | None
        self.bc_ca = ca
        self.ski = ca
        self.aki = "keyid"            # "keyid" | "issuer-only" | None
        self.ku = "default"           # "default" | "certsign" | None
        self.eku = not ca
        self.sans = None              # list of str / ip / raw bytes
        self.san_critical = False
        self.extra = []               # (extension, critical)
        self.start, self.end = VALID_FROM, VALID_TO
        self.hash = hashes.SHA256()

    def build(self):
        serial[0] += 1
        issuer = self.issuer or self
        b = (x509.CertificateBuilder().subject_name(self.subject).issuer_name(issuer.subject)
             .public_key(self.key.public_key()).serial_number(serial[0])
             .not_valid_before(self.start).not_valid_after(self.end))
        if self.bc:
            b = b.add_extension(x509.BasicConstraints(ca=self.bc_ca, path_length=None), critical=self.bc == "critical")
        if self.ski:
            b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
        if self.aki == "keyid":
            b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
                                critical=False)
        elif self.aki == "issuer-only":
            b = b.add_extension(x509.AuthorityKeyIdentifier(None, [x509.DirectoryName(issuer.subject)], 1),
                                critical=False)
        if self.ku == "default":
            if self.ca:
                b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                    critical=True)
            else:
                b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                                    critical=True)
        elif self.ku == "certsign":
            b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, False, False, False),
                                critical=True)
        if self.eku:
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        if self.sans is not None:
            if any(isinstance(s, bytes) for s in self.sans):
                body = b"".join(tlv(0x82, s if isinstance(s, bytes) else s.encode()) for s in self.sans)
                b = b.add_extension(x509.UnrecognizedExtension(ExtensionOID.SUBJECT_ALTERNATIVE_NAME, tlv(0x30, body)),
                                    critical=self.san_critical)
            else:
                entries = []
                for s in self.sans:
                    try:
                        entries.append(x509.IPAddress(ipaddress.ip_address(s)))
                    except ValueError:
                        entries.append(x509.DNSName(s))
                b = b.add_extension(x509.SubjectAlternativeName(entries), critical=self.san_critical)
        for extension, critical in self.extra:
            b = b.add_extension(extension, critical=critical)
        signer = (self.issuer or self).key
        algorithm = None if isinstance(signer, ed25519.Ed25519PrivateKey) else hashes.SHA256()
        self.cert = b.sign(signer, algorithm)
        if isinstance(self.hash, hashes.SHA1):
            self.cert = resign_sha1(self.cert, signer)
        return self.cert


SHA256_RSA = bytes.fromhex("06092a864886f70d01010b")
SHA1_RSA = bytes.fromhex("06092a864886f70d010105")


def resign_sha1(cert, signer):
    """cryptography no longer signs with SHA-1: rewrite the TBS's algorithm
    identifier and sign it ourselves, as a CA from 2010 would have."""
    tbs = cert.tbs_certificate_bytes.replace(SHA256_RSA, SHA1_RSA, 1)
    signature = signer.sign(tbs, padding.PKCS1v15(), hashes.SHA1())
    algorithm = tlv(0x30, SHA1_RSA + b"\x05\x00")
    return x509.load_der_x509_certificate(tlv(0x30, tbs + algorithm + tlv(0x03, b"\x00" + signature)))


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def case(case_name, host, chain, anchors, leaf_key):
    with open(os.path.join(OUT, case_name + ".chain.pem"), "wb") as f:
        f.write(b"".join(pem(c.cert) for c in chain))
    with open(os.path.join(OUT, case_name + ".anchors.pem"), "wb") as f:
        f.write(b"".join(pem(c.cert) for c in anchors))
    with open(os.path.join(OUT, case_name + ".key"), "wb") as f:
        f.write(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    CASES.append({"name": case_name, "host": host})


def root(cn="Strict Root", key=None, **overrides):
    r = Cert(name(cn), overrides.pop("key", None) or key or rsa_key(), ca=True)
    r.aki = None
    for k, v in overrides.items():
        setattr(r, k, v)
    r.build()
    return r


def intermediate(parent, cn="Strict Intermediate", key=None, **overrides):
    i = Cert(name(cn), key or rsa_key(), parent, ca=True)
    for k, v in overrides.items():
        setattr(i, k, v)
    i.build()
    return i


def leaf(parent, host, key=None, cn=None, **overrides):
    l = Cert(name(cn if cn is not None else host), key or rsa_key(), parent)
    l.sans = [host]
    for k, v in overrides.items():
        setattr(l, k, v)
    l.build()
    return l


def standard(case_name, host=None, *, root_overrides=None, int_overrides=None, leaf_key=None, **leaf_overrides):
    """root -> intermediate -> leaf, with overrides on any of the three; the root is the anchor."""
    host = host or case_name + ".strict.test"
    r = root(**(root_overrides or {}))
    i = intermediate(r, **(int_overrides or {}))
    l = leaf(i, host, key=leaf_key, **leaf_overrides)
    case(case_name, host, [l, i], [r], l.key)
    return r, i, l


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    standard("baseline")

    # 1. RFC 5280 profile (OpenSSL checks these only under X509_V_FLAG_X509_STRICT, or not at all).
    standard("root-no-basic-constraints", root_overrides={"bc": None})
    standard("root-basic-constraints-noncritical", root_overrides={"bc": "noncritical"})
    standard("intermediate-basic-constraints-noncritical", int_overrides={"bc": "noncritical"})
    standard("intermediate-no-basic-constraints", int_overrides={"bc": None})
    standard("leaf-no-authority-key-id", aki=None)
    standard("intermediate-no-authority-key-id", int_overrides={"aki": None})
    standard("intermediate-no-subject-key-id", int_overrides={"ski": False})
    standard("leaf-keycertsign-not-ca", ku="certsign")
    standard("leaf-empty-subject-san-noncritical", cn=None, subject=x509.Name([]))
    standard("intermediate-policy-constraints-noncritical",
             int_overrides={"extra": [(x509.PolicyConstraints(None, 0), False)]})
    standard("leaf-name-constraints-critical",
             extra=[(x509.NameConstraints([x509.DNSName("strict.test")], None), True)])
    standard("leaf-name-constraints-noncritical",
             extra=[(x509.NameConstraints([x509.DNSName("strict.test")], None), False)])
    # 2. Key and signature strength, in the whole chain.
    standard("leaf-rsa-1024", leaf_key=rsa_key(1024))
    standard("root-rsa-1024", root_overrides={"key": rsa_key(1024)})
    standard("leaf-rsa-2052", leaf_key=rsa_key(2052))
    standard("leaf-dsa", leaf_key=dsa.generate_private_key(2048))
    standard("leaf-p192", leaf_key=ec.generate_private_key(ec.SECP192R1()))
    standard("leaf-secp256k1", leaf_key=ec.generate_private_key(ec.SECP256K1()))
    standard("leaf-ed25519", leaf_key=ed25519.Ed25519PrivateKey.generate())
    standard("leaf-p384", leaf_key=ec.generate_private_key(ec.SECP384R1()))
    standard("leaf-sha1-signature", hash=hashes.SHA1())
    standard("root-sha1-self-signature", root_overrides={"hash": hashes.SHA1()})
    # 3. A CA certificate as the server's leaf.
    standard("leaf-is-ca", bc_ca=True, ku="certsign", ski=True)
    # 4. Name constraints.
    r = root()
    i = intermediate(r, extra=[(x509.NameConstraints(None, [x509.DNSName("bar.example.com")]), True)])
    l = leaf(i, "*.example.com", cn="www.example.com", sans=["*.example.com", "www.example.com"])
    case("nc-excluded-wildcard-bar", "bar.example.com", [l, i], [r], l.key)
    case("nc-excluded-wildcard-foo", "foo.example.com", [l, i], [r], l.key)
    r = root()
    i = intermediate(r, extra=[(x509.NameConstraints([x509.DNSName("example.com")], None), True)])
    l = leaf(i, "www.example.com", sans=[b".example.com", b"www.example.com"])
    case("nc-permitted-dot-san", "www.example.com", [l, i], [r], l.key)
    r = root()
    i = intermediate(r, extra=[(x509.UnrecognizedExtension(
        ExtensionOID.NAME_CONSTRAINTS, tlv(0x30, tlv(0xA0, tlv(0x30, tlv(0x82, b".example.net"))))), True)])
    l = leaf(i, "www.example.net")
    case("nc-leading-period", "www.example.net", [l, i], [r], l.key)
    r = root()
    i = intermediate(r, extra=[(x509.UnrecognizedExtension(ExtensionOID.NAME_CONSTRAINTS, tlv(0x30, b"")), True)])
    l = leaf(i, "nc-empty.strict.test")
    case("nc-empty", "nc-empty.strict.test", [l, i], [r], l.key)
    r = root()
    i = intermediate(r, extra=[(x509.UnrecognizedExtension(
        ExtensionOID.NAME_CONSTRAINTS, tlv(0x30, tlv(0xA0, b"") + tlv(0xA1, b""))), True)])
    l = leaf(i, "nc-empty-subtrees.strict.test")
    case("nc-empty-subtrees", "nc-empty-subtrees.strict.test", [l, i], [r], l.key)
    # 5. subjectAltName syntax.
    standard("san-emoji", "xn--ls8h.strict.test", cn=None, sans=["\U0001F600.strict.test".encode()])
    standard("san-underscore", "a_b.strict.test", cn=None, sans=[b"a_b.strict.test"])
    # 6. Subject CN consistency.
    standard("cn-not-in-san", cn="other.strict.test")
    standard("cn-case-differs", "cn-case-differs.strict.test", cn="CN-CASE-DIFFERS.strict.test")
    standard("cn-u-label", "xn--bcher-kva.strict.test", cn="b\u00fccher.strict.test")
    standard("cn-ip-text-form", "127.0.0.1", cn="127.000.000.001", sans=["127.0.0.1"])
    standard("cn-ip-consistent", "127.0.0.1", cn="127.0.0.1", sans=["127.0.0.1"])
    standard("cn-display-name", cn="Strict Test Server")
    # 7. Malformed extensions.
    standard("leaf-aia-malformed",
             extra=[(x509.UnrecognizedExtension(ExtensionOID.AUTHORITY_INFORMATION_ACCESS,
                                                tlv(0x30, tlv(0x02, b"\x05"))), False)])
    standard("leaf-san-critical-with-subject", san_critical=True)
    standard("root-aki-without-key-id", root_overrides={"aki": "issuer-only"})
    # 8. Validity is inclusive: notAfter 2030-06-01T12:00:00Z exactly.
    standard("validity-edge", end=datetime.datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    # 9. Path building with alternatives.
    r = root()
    i1 = intermediate(r, "Strict Intermediate One")
    i2 = intermediate(i1, "Strict Intermediate Two")
    l = leaf(i2, "order.strict.test")
    case("path-intermediates-reversed", "order.strict.test", [l, i1, i2], [r], l.key)
    r = root()
    i = intermediate(r)
    l = leaf(i, "swapped.strict.test")
    case("path-root-and-intermediate-swapped", "swapped.strict.test", [l, r, i], [r], l.key)
    # Two certificates for one intermediate (same name, same key): one constrained
    # away from the leaf's name, presented first; the other unconstrained.
    r = root()
    shared = rsa_key()
    constrained = intermediate(r, key=shared,
                               extra=[(x509.NameConstraints(None, [x509.DNSName("alt.strict.test")]), True)])
    free = intermediate(r, key=shared)
    l = leaf(constrained, "alt.strict.test")
    case("path-constrained-then-free", "alt.strict.test", [l, constrained, free], [r], l.key)
    # The same intermediate cross-signed by an old root (expired) and by the new one.
    old_root, new_root = root("Strict Old Root"), root("Strict New Root")
    shared = rsa_key()
    old = intermediate(old_root, key=shared, start=datetime.datetime(2015, 1, 1, tzinfo=UTC),
                       end=datetime.datetime(2024, 1, 1, tzinfo=UTC))
    new = intermediate(new_root, key=shared)
    l = leaf(new, "cross.strict.test")
    case("path-expired-cross-then-valid", "cross.strict.test", [l, old, new], [old_root, new_root], l.key)
    # A bag of 24 look-alike intermediates, none of which signed the leaf.
    r = root()
    real = intermediate(r)
    l = leaf(real, "bag.strict.test")
    decoys = [intermediate(r, key=ec.generate_private_key(ec.SECP256R1())) for _ in range(24)]
    case("path-hostile-bag", "bag.strict.test", [l] + decoys, [r], l.key)
    # 10. An anchor set holding only the sub-CA.
    r = root()
    i = intermediate(r)
    l = leaf(i, "subca.strict.test")
    case("anchor-sub-ca-only", "subca.strict.test", [l, i], [i], l.key)
    # A pinned self-signed leaf without authorityKeyIdentifier (as iOS accepts).
    s = Cert(name("selfsigned.strict.test"), rsa_key())
    s.aki = None
    s.sans = ["selfsigned.strict.test"]
    s.build()
    case("self-signed-leaf-no-aki", "selfsigned.strict.test", [s], [s], s.key)

    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(CASES, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
