#!/usr/bin/env python3
"""Certificate transparency fixtures under Tests/Fixtures/pki/ct, made from the
committed test PKI (run make-pki.py first if that is regenerated). The output
is committed; tests never run this script.

- log-a.key, log-b.key: two test CT logs in log-list.json (usable, qualified);
  log-retired.key: a log retired on 2026-03-01; log-unknown.key: a log that
  is in no list.
- httpbin-<log>.sct: one serialized SCT v1 per log over the committed
  httpbin leaf (x509_entry, as sent in the TLS extension), issued
  2026-01-15; httpbin-retired-late.sct is issued after its log retired.
- embedded-a.pem / embedded-ab.pem / embedded-a-retired.pem (+ -chain.pem,
  .key): a *.httpbin.org leaf issued by intermediate A with SCTs from log A
  (and B, or the retired log before it retired) embedded, signed over the
  precertificate (precert_entry) as RFC 6962 section 3.2 describes.

Usage: python3 Tests/Fixtures/make-ct-fixtures.py   (needs `cryptography`)
"""
import base64
import datetime
import hashlib
import json
import os
import struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

HERE = os.path.dirname(os.path.abspath(__file__))
PKI = os.path.join(HERE, "pki")
OUT = os.path.join(PKI, "ct")
SCT_LIST_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
ISSUED = datetime.datetime(2026, 1, 15, tzinfo=datetime.timezone.utc)
RETIRED = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)


def read(name):
    with open(os.path.join(PKI, name), "rb") as f:
        return f.read()


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def spki(key):
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def millis(when):
    return int(when.timestamp() * 1000)


def u24(data):
    return struct.pack(">I", len(data))[1:] + data


def sct(log_key, when, entry_type, signed_entry):
    """An SCT v1 (RFC 6962 section 3.2) by `log_key` over `signed_entry`."""
    timestamp = struct.pack(">Q", millis(when))
    signed = b"\x00\x00" + timestamp + struct.pack(">H", entry_type) + signed_entry + b"\x00\x00"
    signature = log_key.sign(signed, ec.ECDSA(hashes.SHA256()))
    log_id = hashlib.sha256(spki(log_key)).digest()
    return (b"\x00" + log_id + timestamp + b"\x00\x00" + b"\x04\x03"
            + struct.pack(">H", len(signature)) + signature)


def sct_list(scts):
    body = b"".join(struct.pack(">H", len(s)) + s for s in scts)
    return struct.pack(">H", len(body)) + body


def der_octet_string(data):
    length = len(data)
    if length < 0x80:
        header = bytes([length])
    elif length < 0x100:
        header = bytes([0x81, length])
    else:
        header = bytes([0x82]) + struct.pack(">H", length)
    return b"\x04" + header + data


def log_entry(description, key, state):
    key_der = spki(key)
    return {
        "description": description,
        "log_id": base64.b64encode(hashlib.sha256(key_der).digest()).decode(),
        "key": base64.b64encode(key_der).decode(),
        "url": "https://ct.invalid/" + description.split()[-1].lower() + "/",
        "mmd": 86400,
        "state": state,
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    keys = {name: ec.generate_private_key(ec.SECP256R1()) for name in ("a", "b", "retired", "unknown", "pending")}
    for name, key in keys.items():
        write(f"log-{name}.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    listed = datetime.datetime(2025, 6, 1, tzinfo=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    log_list = {
        "version": "1.0",
        "log_list_timestamp": "2026-05-01T00:00:00Z",
        "operators": [
            {"name": "Pinproxy Test Operator A", "email": ["ct-a@example.invalid"], "logs": [
                log_entry("Pinproxy Test Log A", keys["a"], {"usable": {"timestamp": listed}}),
                log_entry("Pinproxy Test Log Retired", keys["retired"],
                          {"retired": {"timestamp": RETIRED.strftime("%Y-%m-%dT%H:%M:%SZ")}}),
            ]},
            {"name": "Pinproxy Test Operator B", "email": ["ct-b@example.invalid"], "logs": [
                log_entry("Pinproxy Test Log B", keys["b"], {"qualified": {"timestamp": listed}}),
                log_entry("Pinproxy Test Log Pending", keys["pending"], {"pending": {"timestamp": listed}}),
            ]},
        ],
    }
    write("log-list.json", (json.dumps(log_list, indent=2) + "\n").encode())

    # SCTs over the committed httpbin leaf, as a server sends them in the TLS extension.
    leaf = read("httpbin.der")
    for name in ("a", "b", "unknown", "pending"):
        write(f"httpbin-{name}.sct", sct(keys[name], ISSUED, 0, u24(leaf)))
    write("httpbin-retired-early.sct", sct(keys["retired"], ISSUED, 0, u24(leaf)))
    write("httpbin-retired-late.sct",
          sct(keys["retired"], datetime.datetime(2026, 4, 1, tzinfo=datetime.timezone.utc), 0, u24(leaf)))

    # Leaves with embedded SCTs: each SCT signs the issuer's key hash and the
    # TBSCertificate without the SCT list extension (the precertificate's).
    int_a = x509.load_der_x509_certificate(read("int-a.der"))
    int_a_key = serialization.load_pem_private_key(read("int-a.key"), password=None)
    issuer_key_hash = hashlib.sha256(int_a.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).digest()
    for suffix, logs, serial in (("a", ["a"], 7001), ("ab", ["a", "b"], 7002), ("a-retired", ["a", "retired"], 7003)):
        leaf_key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pinproxy tests"),
                x509.NameAttribute(NameOID.COMMON_NAME, "ct.httpbin.org")]))
            .issuer_name(int_a.subject)
            .public_key(leaf_key.public_key())
            .serial_number(serial)
            .not_valid_before(datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc))
            .not_valid_after(datetime.datetime(2027, 1, 1, tzinfo=datetime.timezone.utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(int_a_key.public_key()),
                           critical=False)
            .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("ct.httpbin.org"), x509.DNSName("*.httpbin.org")]), critical=False)
        )
        precert_tbs = builder.sign(int_a_key, hashes.SHA256()).tbs_certificate_bytes
        scts = [sct(keys[name], ISSUED, 1, issuer_key_hash + u24(precert_tbs)) for name in logs]
        final = builder.add_extension(
            x509.UnrecognizedExtension(SCT_LIST_OID, der_octet_string(sct_list(scts))), critical=False,
        ).sign(int_a_key, hashes.SHA256())
        assert final.tbs_precertificate_bytes == precert_tbs, "the SCT extension must be the last one"
        pem = final.public_bytes(serialization.Encoding.PEM)
        write(f"embedded-{suffix}.pem", pem)
        write(f"embedded-{suffix}-chain.pem", pem + int_a.public_bytes(serialization.Encoding.PEM))
        write(f"embedded-{suffix}.key", leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


if __name__ == "__main__":
    main()
