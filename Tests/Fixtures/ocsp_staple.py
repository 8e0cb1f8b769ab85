#!/usr/bin/env python3
"""Writes a DER OCSP response (RFC 6960) for a certificate, "good", signed
by its issuer's key through the openssl command, carrying a list of SCTs in
the single response's extension 1.3.6.1.4.1.11129.2.4.5 (RFC 6962 section
3.3), for `openssl s_server -status_file` to staple.

Usage: ocsp_staple.py CERT.der ISSUER.der ISSUER.key SCT_LIST.bin OUT.der
"""
import datetime
import hashlib
import subprocess
import sys


def length(n):
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def tlv(tag, content):
    return bytes([tag]) + length(len(content)) + content


def seq(*items):
    return tlv(0x30, b"".join(items))


def oid(text):
    parts = [int(p) for p in text.split(".")]
    body = bytes([40 * parts[0] + parts[1]])
    for part in parts[2:]:
        chunk = [part & 0x7F]
        part >>= 7
        while part:
            chunk.insert(0, 0x80 | (part & 0x7F))
            part >>= 7
        body += bytes(chunk)
    return tlv(0x06, body)


def read_tlv(data, offset):
    """(tag, content start, end) of the element at offset."""
    tag = data[offset]
    first = data[offset + 1]
    if first < 0x80:
        return tag, offset + 2, offset + 2 + first
    count = first & 0x7F
    size = int.from_bytes(data[offset + 2:offset + 2 + count], "big")
    start = offset + 2 + count
    return tag, start, start + size


def children(data, start, end):
    out = []
    while start < end:
        tag, content, stop = read_tlv(data, start)
        out.append((tag, start, content, stop))
        start = stop
    return out


def main():
    cert_path, issuer_path, key_path, scts_path, out_path = sys.argv[1:6]
    cert = open(cert_path, "rb").read()
    issuer = open(issuer_path, "rb").read()
    sct_list = open(scts_path, "rb").read()
    # Certificate → TBSCertificate → serial; issuer's subject and SPKI key bits.
    _, c0, c1 = read_tlv(cert, 0)
    tbs = children(cert, *read_tlv(cert, c0)[1:])
    has_version = tbs[0][0] == 0xA0
    serial = cert[tbs[1 if has_version else 0][1]:tbs[1 if has_version else 0][3]]
    _, i0, _ = read_tlv(issuer, 0)
    itbs = children(issuer, *read_tlv(issuer, i0)[1:])
    base = 1 if itbs[0][0] == 0xA0 else 0
    subject = issuer[itbs[base + 4][1]:itbs[base + 4][3]]
    spki = itbs[base + 5]
    spki_fields = children(issuer, spki[2], spki[3])
    key_bits = issuer[spki_fields[1][2] + 1:spki_fields[1][3]]  # BIT STRING without the unused-bits byte
    sha1 = seq(oid("1.3.14.3.2.26"), b"\x05\x00")
    cert_id = seq(sha1, tlv(0x04, hashlib.sha1(subject).digest()), tlv(0x04, hashlib.sha1(key_bits).digest()), serial)
    now = datetime.datetime.now(datetime.timezone.utc)
    gt = lambda t: tlv(0x18, t.strftime("%Y%m%d%H%M%SZ").encode())
    sct_extension = seq(oid("1.3.6.1.4.1.11129.2.4.5"), tlv(0x04, tlv(0x04, sct_list)))
    single = seq(cert_id, b"\x80\x00", gt(now - datetime.timedelta(hours=1)),
                 tlv(0xA0, gt(now + datetime.timedelta(days=7))), tlv(0xA1, seq(sct_extension)))
    responder = tlv(0xA2, tlv(0x04, hashlib.sha1(key_bits).digest()))
    tbs_response = seq(responder, gt(now), seq(single))
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_path], input=tbs_response,
                               capture_output=True, check=True).stdout
    basic = seq(tbs_response, seq(oid("1.2.840.113549.1.1.11"), b"\x05\x00"), tlv(0x03, b"\x00" + signature))
    response = seq(tlv(0x0A, b"\x00"), tlv(0xA0, seq(oid("1.3.6.1.5.5.7.48.1.1"), tlv(0x04, basic))))
    open(out_path, "wb").write(response)


if __name__ == "__main__":
    main()
