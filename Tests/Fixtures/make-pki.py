#!/usr/bin/env python3
"""Regenerates the test PKI under Tests/Fixtures/pki (and the example chain in
config/examples). The output is committed: tests never run this script, they
read its files with a fixed, injected clock (2026-06-01T00:00:00Z).

Every certificate has fixed dates so a verdict never depends on the day the
tests run. Keys are fresh on each regeneration; nothing depends on them being
stable except the committed files themselves.

Usage: python3 Tests/Fixtures/make-pki.py   (needs the `cryptography` package)
"""
import datetime
import ipaddress
import os
import shutil

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "pki")
EXAMPLES = os.path.join(HERE, "..", "..", "config", "examples")

VALID_FROM = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
VALID_TO = datetime.datetime(2035, 1, 1, tzinfo=datetime.timezone.utc)


def rsa_key(bits=2048):
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def ec_key():
    return ec.generate_private_key(ec.SECP256R1())


def name(cn, org="pinproxy tests"):
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


serial = [1000]


def issue(subject, key, issuer_name, issuer_key, *, ca=False, pathlen=None, sans=None,
          eku=(ExtendedKeyUsageOID.SERVER_AUTH,), start=VALID_FROM, end=VALID_TO, claimed_issuer_key=None):
    serial[0] += 1
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(serial[0])
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=pathlen), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key((claimed_issuer_key or issuer_key).public_key()),
            critical=False,
        )
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        if eku:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    if sans:
        entries = []
        for s in sans:
            try:
                entries.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                entries.append(x509.DNSName(s))
        builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def write(filename, data):
    with open(os.path.join(OUT, filename), "wb") as f:
        f.write(data)


def write_chain(filename, certs):
    write(filename, b"".join(pem(c) for c in certs))


def write_key(filename, key):
    write(filename, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    root_a_key, root_b_key = rsa_key(), rsa_key()
    root_a_name, root_b_name = name("Pinproxy Test Root A"), name("Pinproxy Test Root B")
    root_a = issue(root_a_name, root_a_key, root_a_name, root_a_key, ca=True)
    root_b = issue(root_b_name, root_b_key, root_b_name, root_b_key, ca=True)
    # Same subject and key as root A, issued by root B: another certificate hash, the same SPKI.
    root_a_cross = issue(root_a_name, root_a_key, root_b_name, root_b_key, ca=True)

    int_a_key, int_b_key = rsa_key(), rsa_key()
    int_a_name, int_b_name = name("Pinproxy Test Intermediate A"), name("Pinproxy Test Intermediate B")
    int_a = issue(int_a_name, int_a_key, root_a_name, root_a_key, ca=True, pathlen=0)
    int_b = issue(int_b_name, int_b_key, root_b_name, root_b_key, ca=True, pathlen=0)

    httpbin_key = rsa_key()
    httpbin = issue(name("httpbin.org"), httpbin_key, int_a_name, int_a_key,
                    sans=["httpbin.org", "*.httpbin.org", "127.0.0.1", "::1"])
    adn_key = rsa_key()
    adn = issue(name("alpha.net"), adn_key, int_b_name, int_b_key, sans=["alpha.net"])
    expired_key = rsa_key()
    expired = issue(name("expired.httpbin.org"), expired_key, int_a_name, int_a_key,
                    sans=["expired.httpbin.org"],
                    start=datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
                    end=datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc))
    future = issue(name("future.httpbin.org"), rsa_key(), int_a_name, int_a_key,
                   sans=["future.httpbin.org"],
                   start=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc))
    ecdsa_key = ec_key()
    ecdsa = issue(name("ecdsa.httpbin.org"), ecdsa_key, int_a_name, int_a_key, sans=["ecdsa.httpbin.org"])
    client_only = issue(name("client.httpbin.org"), rsa_key(), int_a_name, int_a_key,
                        sans=["client.httpbin.org"], eku=(ExtendedKeyUsageOID.CLIENT_AUTH,))
    weak_key = rsa_key(1024)
    weak = issue(name("weak.httpbin.org"), weak_key, int_a_name, int_a_key, sans=["weak.httpbin.org"])

    # Claims intermediate A as its issuer (name and key identifier) but is signed
    # by an unrelated key: a chain builder links it to int-a by name alone.
    forger_key = rsa_key()
    forged = issue(name("httpbin.org"), rsa_key(), int_a_name, forger_key, sans=["httpbin.org"],
                   claimed_issuer_key=int_a_key)

    # Self-signed leaves mirroring AFNetworking's fixtures: CN only, SAN only, neither.
    foobar_key, altname_key, nodomains_key = rsa_key(), rsa_key(), rsa_key()
    foobar = issue(name("foobar.com"), foobar_key, name("foobar.com"), foobar_key)
    altname = issue(name("AltName"), altname_key, name("AltName"), altname_key, sans=["foobar.com"])
    nodomains = issue(name(None, "NoDomains"), nodomains_key, name(None, "NoDomains"), nodomains_key)
    ec_self_key = ec_key()
    ec_self = issue(name("ec.foobar.com"), ec_self_key, name("ec.foobar.com"), ec_self_key,
                    sans=["ec.foobar.com"])

    for fname, cert in [
        ("root-a", root_a), ("root-b", root_b), ("root-a-cross", root_a_cross),
        ("int-a", int_a), ("int-b", int_b), ("httpbin", httpbin), ("adn", adn),
        ("expired", expired), ("future", future), ("ecdsa", ecdsa), ("client-only", client_only),
        ("weak", weak), ("foobar-cn", foobar), ("altname", altname), ("nodomains", nodomains),
        ("ec-selfsigned", ec_self), ("forged", forged),
    ]:
        write(fname + ".pem", pem(cert))
        write(fname + ".der", cert.public_bytes(serialization.Encoding.DER))

    # What servers send: the leaf and its intermediate, not the root.
    write_chain("httpbin-chain.pem", [httpbin, int_a])
    write_chain("httpbin-fullchain.pem", [httpbin, int_a, root_a])
    write_chain("httpbin-cross-chain.pem", [httpbin, int_a, root_a_cross])
    write_chain("adn-chain.pem", [adn, int_b])
    write_chain("expired-chain.pem", [expired, int_a])
    write_chain("future-chain.pem", [future, int_a])
    write_chain("ecdsa-chain.pem", [ecdsa, int_a])
    write_chain("client-only-chain.pem", [client_only, int_a])
    write_chain("weak-chain.pem", [weak, int_a])
    write_chain("roots.pem", [root_a, root_b])
    write_chain("forged-chain.pem", [forged, int_a])
    for fname, key in [("httpbin", httpbin_key), ("adn", adn_key), ("expired", expired_key), ("int-a", int_a_key),
                       ("ecdsa", ecdsa_key), ("weak", weak_key), ("foobar-cn", foobar_key),
                       ("altname", altname_key), ("ec-selfsigned", ec_self_key)]:
        write_key(fname + ".key", key)

    # A client identity for mutual TLS: PKCS#12 protected by a passphrase file.
    client_key = rsa_key()
    client = issue(name("pinproxy test client"), client_key, int_b_name, int_b_key, sans=None,
                   eku=(ExtendedKeyUsageOID.CLIENT_AUTH,))
    passphrase = b"correct horse battery staple"
    write("client.pass", passphrase + b"\n")
    write("client.p12", pkcs12.serialize_key_and_certificates(
        b"pinproxy test client", client_key, client, [int_b],
        serialization.BestAvailableEncryption(passphrase)))
    write_chain("client-ca.pem", [int_b, root_b])

    # The README's example: a "national" root beside the system store.
    os.makedirs(EXAMPLES, exist_ok=True)
    bank_key = rsa_key()
    bank = issue(name("api.bank.example"), bank_key, int_a_name, int_a_key, sans=["api.bank.example", "*.bank.example"])
    with open(os.path.join(EXAMPLES, "api.bank.example-chain.pem"), "wb") as f:
        f.write(pem(bank) + pem(int_a))
    # For the offline quick start's origin (openssl s_server): an example key, not a secret.
    with open(os.path.join(EXAMPLES, "api.bank.example.pem"), "wb") as f:
        f.write(pem(bank))
    with open(os.path.join(EXAMPLES, "intermediate.pem"), "wb") as f:
        f.write(pem(int_a))
    with open(os.path.join(EXAMPLES, "api.bank.example.key"), "wb") as f:
        f.write(bank_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(os.path.join(EXAMPLES, "hello.txt"), "w") as f:
        f.write("hello from api.bank.example\n")
    with open(os.path.join(EXAMPLES, "national-root.pem"), "wb") as f:
        f.write(pem(root_a))


if __name__ == "__main__":
    main()
