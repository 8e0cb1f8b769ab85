#!/usr/bin/env python3
"""Regenerates the revocation test PKI under Tests/Fixtures/pki/revocation:
certificates, CRLs, OCSP responses and an OpenSSL CA database for a live
`openssl ocsp` responder. The output is committed: tests never run this script.

Every date is fixed so a verdict never depends on the day the tests run:
certificates are valid 2025-01-01 .. 2035-01-01, CRLs have lastUpdate
2026-01-01 and nextUpdate 2035-01-01, OCSP responses thisUpdate/producedAt
2026-01-01 and nextUpdate 2035-01-01 (the "expired" CRL and response excepted:
2025-06-01 .. 2025-12-01). Revoked certificates are revoked at
2026-01-01T00:00:00Z for keyCompromise. Keys are fresh on each regeneration.

Hostnames are under revocation.test. CRL distribution points are
http://crl.revocation.test/NAME.crl and the OCSP AIA is
http://ocsp.revocation.test/; tests map these names to loopback ports where
revocation_server.py serves this directory.

How each kind of file is made:
  * certificates: the `cryptography` package;
  * CRLs: the real `openssl ca -gencrl`, one throw-away CA directory per CRL
    (`-revoke ... -crl_reason keyCompromise` marks revocations; the database's
    revocation time is then pinned to 2026-01-01 because `openssl ca` stamps
    the current time, and `-crl_lastupdate`/`-crl_nextupdate` fix the dates);
  * OCSP responses: cryptography's OCSPResponseBuilder (CertIDs hashed with
    SHA-1, signatures SHA-256). `openssl ocsp` cannot backdate, and the builder
    always stamps producedAt with the current time, so producedAt is rewritten
    in the DER afterwards and the response re-signed with the same key.
    Responses signed by an issuer name their responder by key hash; responses
    signed by a delegated (or pretended) responder name it by subject name and
    carry its certificate.
  * index.txt: built by `openssl ca -valid` / `-revoke` for the intermediate, as
    an `openssl ocsp -index` responder reads it.

Usage: python3 Tests/Fixtures/make-revocation-pki.py
       (needs the `cryptography` package and the `openssl` command, OpenSSL 3)
"""
import datetime
import os
import shutil
import sys
import subprocess
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "pki", "revocation")

UTC = datetime.timezone.utc
VALID_FROM = datetime.datetime(2025, 1, 1, tzinfo=UTC)
VALID_TO = datetime.datetime(2035, 1, 1, tzinfo=UTC)
ISSUED = datetime.datetime(2026, 1, 1, tzinfo=UTC)        # CRL lastUpdate, OCSP thisUpdate/producedAt
NEXT = datetime.datetime(2035, 1, 1, tzinfo=UTC)          # CRL and OCSP nextUpdate
REVOKED_AT = datetime.datetime(2026, 1, 1, tzinfo=UTC)    # revocation time of every revoked certificate
STALE_FROM = datetime.datetime(2025, 6, 1, tzinfo=UTC)    # the expired CRL and OCSP response
STALE_TO = datetime.datetime(2025, 12, 1, tzinfo=UTC)

CRL_URL = "http://crl.revocation.test/{}"
OCSP_URL = "http://ocsp.revocation.test/"


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def name(cn, org="pinproxy tests"):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def key_usage(*, digital_signature=False, key_encipherment=False, cert_sign=False, crl_sign=False):
    return x509.KeyUsage(digital_signature, False, key_encipherment, False, False, cert_sign, crl_sign,
                         False, False)


serial = [0x1000]


def issue(subject, key, issuer_name, issuer_key, *, ca=False, pathlen=None, usage, eku=None, host=None,
          crl=None, ocsp_url=False, must_staple=False, ski=None, crl_issuer=None):
    """A certificate for `key`, signed by `issuer_key`. `crl` is the file name
    its distribution point names, `crl_issuer` the name of that point's CRL
    issuer (an indirect CRL); `ski` overrides the subject key identifier."""
    serial[0] += 1
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(public)
        .serial_number(serial[0])
        .not_valid_before(VALID_FROM)
        .not_valid_after(VALID_TO)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=pathlen), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(ski or x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    if issuer_key is not key:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    if host:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
    if crl:
        builder = builder.add_extension(x509.CRLDistributionPoints([x509.DistributionPoint(
            full_name=[x509.UniformResourceIdentifier(CRL_URL.format(crl))],
            relative_name=None, reasons=None,
            crl_issuer=[x509.DirectoryName(crl_issuer)] if crl_issuer else None)]), critical=False)
    if ocsp_url:
        builder = builder.add_extension(x509.AuthorityInformationAccess([x509.AccessDescription(
            AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(OCSP_URL))]), critical=False)
    if must_staple:
        builder = builder.add_extension(x509.TLSFeature([x509.TLSFeatureType.status_request]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def write(filename, data):
    with open(os.path.join(OUT, filename), "wb") as f:
        f.write(data)


def write_cert(filename, cert):
    write(filename + ".pem", pem(cert))
    write(filename + ".der", cert.public_bytes(serialization.Encoding.DER))


def write_key(filename, key):
    write(filename + ".key", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def run(args, cwd=None):
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{result.stdout}{result.stderr}")
    return result.stdout


# --- CRLs: openssl ca -------------------------------------------------------

CA_CONFIG = """\
[ ca ]
default_ca = throwaway

[ throwaway ]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir
serial = $dir/serial
{crlnumber}certificate = {cert}
private_key = {key}
default_md = sha256
unique_subject = no
policy = any
crl_extensions = crl_ext

[ any ]
commonName = supplied

[ crl_ext ]
authorityKeyIdentifier = keyid:always
{extra}
"""


def openssl_time(when):
    return when.strftime("%Y%m%d%H%M%SZ")


def ca_database(work, label, ca, *, valid=(), revoked=(), revoked_at=REVOKED_AT, crl_number=None,
                extra_crl_extensions=""):
    """A throw-away `openssl ca` directory for the CA files `ca` (NAME of
    NAME.pem/NAME.key in OUT): `valid` and `revoked` are file names of
    certificates it issued. Returns the config path."""
    directory = os.path.join(work, label)
    os.makedirs(directory)
    open(os.path.join(directory, "index.txt"), "w").close()
    with open(os.path.join(directory, "index.txt.attr"), "w") as f:
        f.write("unique_subject = no\n")
    with open(os.path.join(directory, "serial"), "w") as f:
        f.write("01\n")
    crlnumber = ""
    if crl_number is not None:
        with open(os.path.join(directory, "crlnumber"), "w") as f:
            f.write(f"{crl_number:02X}\n")
        crlnumber = "crlnumber = $dir/crlnumber\n"
    config = os.path.join(directory, "ca.cnf")
    with open(config, "w") as f:
        f.write(CA_CONFIG.format(dir=directory, crlnumber=crlnumber, cert=os.path.join(OUT, ca + ".pem"),
                                 key=os.path.join(OUT, ca + ".key"), extra=extra_crl_extensions))
    for cert in valid:
        run(["openssl", "ca", "-config", config, "-valid", os.path.join(OUT, cert + ".pem")])
    for cert in revoked:
        run(["openssl", "ca", "-config", config, "-revoke", os.path.join(OUT, cert + ".pem"),
             "-crl_reason", "keyCompromise"])
    # `openssl ca -revoke` records the current time; pin it.
    index = os.path.join(directory, "index.txt")
    rows = []
    with open(index) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "R":
                reason = fields[2].split(",", 1)[1]
                fields[2] = revoked_at.strftime("%y%m%d%H%M%SZ") + "," + reason
            rows.append("\t".join(fields) + "\n")
    with open(index, "w") as f:
        f.writelines(rows)
    return config


def gencrl(config, out_name, *, last=ISSUED, next_=NEXT):
    pem_path = os.path.join(OUT, out_name + ".pem")
    run(["openssl", "ca", "-config", config, "-gencrl", "-crl_lastupdate", openssl_time(last),
         "-crl_nextupdate", openssl_time(next_), "-out", pem_path])
    run(["openssl", "crl", "-in", pem_path, "-outform", "DER", "-out", os.path.join(OUT, out_name)])


# --- OCSP responses: cryptography, producedAt pinned ------------------------

def read_tlv(data, offset):
    """(content start, end) of the DER element at offset."""
    first = data[offset + 1]
    if first < 0x80:
        return offset + 2, offset + 2 + first
    count = first & 0x7F
    size = int.from_bytes(data[offset + 2:offset + 2 + count], "big")
    return offset + 2 + count, offset + 2 + count + size


def children(data, start, end):
    """[(tag, element start, content start, end)] of the elements in data[start:end]."""
    out = []
    while start < end:
        content, stop = read_tlv(data, start)
        out.append((data[start], start, content, stop))
        start = stop
    return out


def pin_produced_at(response, produced_at, signer_key):
    """Rewrites ResponseData.producedAt and re-signs ResponseData (RFC 6960
    section 4.2.1). Both have the same length before and after, so the bytes
    are replaced in place."""
    data = bytearray(response)
    # OCSPResponse -> [0] responseBytes -> ResponseBytes -> response OCTET STRING -> BasicOCSPResponse
    top = children(data, *read_tlv(data, 0))
    response_bytes = children(data, *read_tlv(data, top[1][2]))
    basic_start = response_bytes[1][2]
    basic = children(data, *read_tlv(data, basic_start))
    tbs, signature = basic[0], basic[2]
    fields = children(data, tbs[2], tbs[3])
    time = fields[2] if fields[0][0] == 0xA0 else fields[1]     # skip the optional [0] version
    assert time[0] == 0x18 and time[3] - time[2] == 15, "producedAt is not a 15-byte GeneralizedTime"
    data[time[2]:time[3]] = openssl_time(produced_at).encode()
    new_signature = signer_key.sign(bytes(data[tbs[1]:tbs[3]]), padding.PKCS1v15(), hashes.SHA256())
    assert signature[0] == 0x03 and signature[3] - signature[2] == 1 + len(new_signature)
    data[signature[2] + 1:signature[3]] = new_signature
    return bytes(data)


def ocsp_response(cert, issuer, signer, signer_key, *, status=ocsp.OCSPCertStatus.GOOD, this_update=ISSUED,
                  next_update=NEXT, delegated=False):
    revoked = status == ocsp.OCSPCertStatus.REVOKED
    builder = ocsp.OCSPResponseBuilder().add_response(
        cert=cert, issuer=issuer, algorithm=hashes.SHA1(), cert_status=status,
        this_update=this_update, next_update=next_update,
        revocation_time=REVOKED_AT if revoked else None,
        revocation_reason=x509.ReasonFlags.key_compromise if revoked else None)
    if delegated:
        builder = builder.responder_id(ocsp.OCSPResponderEncoding.NAME, signer).certificates([signer])
    else:
        builder = builder.responder_id(ocsp.OCSPResponderEncoding.HASH, signer)
    der = builder.sign(signer_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
    der = pin_produced_at(der, this_update, signer_key)
    parsed = ocsp.load_der_ocsp_response(der)
    assert parsed.produced_at_utc == this_update and parsed.this_update_utc == this_update
    signer_key.public_key().verify(parsed.signature, parsed.tbs_response_bytes, padding.PKCS1v15(),
                                   hashes.SHA256())
    return der


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    ca_usage = key_usage(cert_sign=True, crl_sign=True)
    leaf_usage = key_usage(digital_signature=True, key_encipherment=True)
    server_auth = (ExtendedKeyUsageOID.SERVER_AUTH,)

    root_key = rsa_key()
    root_name = name("Revocation Test Root")
    root = issue(root_name, root_key, root_name, root_key, ca=True, usage=ca_usage)

    int_key, revoked_int_key, nocrlsign_key = rsa_key(), rsa_key(), rsa_key()
    int_name = name("Revocation Test Intermediate")
    revoked_int_name = name("Revocation Test Revoked Intermediate")
    nocrlsign_name = name("Revocation Test NoCRLSign Intermediate")
    intermediate = issue(int_name, int_key, root_name, root_key, ca=True, pathlen=0, usage=ca_usage,
                         crl="root.crl")
    revoked_int = issue(revoked_int_name, revoked_int_key, root_name, root_key, ca=True, pathlen=0,
                        usage=ca_usage, crl="root.crl")
    nocrlsign = issue(nocrlsign_name, nocrlsign_key, root_name, root_key, ca=True, pathlen=0,
                      usage=key_usage(cert_sign=True), crl="root.crl")

    # Same subject as the intermediate, another key. It also copies the
    # intermediate's subject key identifier, so what it signs names the
    # intermediate by name and (CRL AKI) by key identifier: only the signature
    # tells them apart.
    impostor_key = rsa_key()
    impostor = issue(int_name, impostor_key, int_name, impostor_key, ca=True, pathlen=0, usage=ca_usage,
                     ski=intermediate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value)

    leaves = {}
    leaf_keys = {}

    def leaf(label, issuer_name, issuer_key, **kwargs):
        host = f"{label}.revocation.test"
        leaf_keys[label] = rsa_key()
        leaves[label] = issue(name(host), leaf_keys[label], issuer_name, issuer_key, usage=leaf_usage,
                              eku=server_auth, host=host, **kwargs)

    leaf("good", int_name, int_key, crl="intermediate.crl", ocsp_url=True)
    leaf("revoked", int_name, int_key, crl="intermediate.crl", ocsp_url=True)
    leaf("muststaple", int_name, int_key, crl="intermediate.crl", ocsp_url=True, must_staple=True)
    leaf("plain", int_name, int_key)
    leaf("under-revoked", revoked_int_name, revoked_int_key, crl="revoked-intermediate.crl")
    leaf("under-nocrlsign", nocrlsign_name, nocrlsign_key, crl="nocrlsign.crl")
    leaf("other-cdp", int_name, int_key, crl="missing.crl", ocsp_url=True)

    responder_key, bogus_key = rsa_key(), rsa_key()
    responder = issue(name("Revocation Test OCSP Responder"), responder_key, int_name, int_key,
                      usage=key_usage(digital_signature=True), eku=(ExtendedKeyUsageOID.OCSP_SIGNING,))
    bogus = issue(name("Revocation Test Bogus Responder"), bogus_key, int_name, int_key,
                  usage=key_usage(digital_signature=True), eku=server_auth)

    for label, cert, key in [
        ("root", root, root_key), ("intermediate", intermediate, int_key),
        ("revoked-intermediate", revoked_int, revoked_int_key), ("nocrlsign-intermediate", nocrlsign, nocrlsign_key),
        ("responder", responder, responder_key), ("bogus-responder", bogus, bogus_key),
        ("impostor", impostor, impostor_key),
    ] + [(label, leaves[label], leaf_keys[label]) for label in leaves]:
        write_cert(label, cert)
        write_key(label, key)

    # What servers send: the leaf and its issuer, not the root.
    for label in ["good", "revoked", "muststaple", "plain", "other-cdp"]:
        write(label + "-chain.pem", pem(leaves[label]) + pem(intermediate))
    write("under-revoked-chain.pem", pem(leaves["under-revoked"]) + pem(revoked_int))
    write("under-nocrlsign-chain.pem", pem(leaves["under-nocrlsign"]) + pem(nocrlsign))

    with tempfile.TemporaryDirectory() as work:
        served = ["good", "muststaple", "plain", "other-cdp"]
        # The live responder's database, and the CRL made from it.
        config = ca_database(work, "intermediate", "intermediate", valid=served, revoked=["revoked"],
                             crl_number=3)
        shutil.copyfile(os.path.join(work, "intermediate", "index.txt"), os.path.join(OUT, "index.txt"))
        write("index.txt.attr", b"unique_subject = no\n")
        gencrl(config, "intermediate.crl")

        gencrl(ca_database(work, "empty", "intermediate", valid=served, crl_number=2), "intermediate-empty.crl")
        # Revoked on the day it was issued, so the revocation is not later than the CRL.
        gencrl(ca_database(work, "expired", "intermediate", revoked=["revoked"], revoked_at=STALE_FROM,
                           crl_number=1),
               "intermediate-expired.crl", last=STALE_FROM, next_=STALE_TO)
        gencrl(ca_database(work, "nonumber", "intermediate", revoked=["revoked"]), "intermediate-nonumber.crl")
        gencrl(ca_database(work, "critical", "intermediate", revoked=["revoked"],
                           extra_crl_extensions="crlNumber = critical,ASN1:INTEGER:7"),
               "intermediate-critical-number.crl")
        gencrl(ca_database(work, "wrongkey", "impostor", crl_number=4), "intermediate-wrongkey.crl")
        gencrl(ca_database(work, "root", "root", valid=["intermediate", "nocrlsign-intermediate"],
                           revoked=["revoked-intermediate"], crl_number=1), "root.crl")
        gencrl(ca_database(work, "revoked-intermediate", "revoked-intermediate", valid=["under-revoked"],
                           crl_number=1), "revoked-intermediate.crl")
        gencrl(ca_database(work, "nocrlsign", "nocrlsign-intermediate", revoked=["under-nocrlsign"],
                           crl_number=1), "nocrlsign.crl")

    good, revoked = leaves["good"], leaves["revoked"]
    REVOKED = ocsp.OCSPCertStatus.REVOKED
    for filename, der in [
        ("ocsp-good.der", ocsp_response(good, intermediate, intermediate, int_key)),
        ("ocsp-good-delegated.der", ocsp_response(good, intermediate, responder, responder_key, delegated=True)),
        ("ocsp-revoked.der", ocsp_response(revoked, intermediate, intermediate, int_key, status=REVOKED)),
        ("ocsp-expired.der", ocsp_response(good, intermediate, intermediate, int_key, this_update=STALE_FROM,
                                           next_update=STALE_TO)),
        # Named like the intermediate, signed by another key, the impostor's certificate attached.
        ("ocsp-wrong-signer.der", ocsp_response(good, intermediate, impostor, impostor_key, delegated=True)),
        ("ocsp-bogus-responder.der", ocsp_response(good, intermediate, bogus, bogus_key, delegated=True)),
        ("ocsp-other-cert.der", ocsp_response(leaves["plain"], intermediate, intermediate, int_key)),
        ("ocsp-muststaple-good.der", ocsp_response(leaves["muststaple"], intermediate, intermediate, int_key)),
        ("ocsp-revoked-for-good.der", ocsp_response(good, intermediate, intermediate, int_key, status=REVOKED)),
    ]:
        write(filename, der)
    make_indirect(root, root_key, intermediate)
    make_scope_cases(root, intermediate, int_key, load_key("crl-issuer"))


def make_indirect(root, root_key, intermediate):
    """An indirect CRL (RFC 5280 §5.2.5, §5.3.3): issued by a CRL issuer the
    root certified (cRLSign only, not a CA), with an issuing distribution
    point marked indirectCRL, revoking a certificate of the intermediate named
    by a certificateIssuer entry extension. The intermediate's leaves that use
    it name the CRL issuer in their distribution point's cRLIssuer.
    `indirect.crl.pem` carries the CRL issuer's certificate after the CRL;
    `indirect-unrelated.crl.pem` is the same CRL from a CRL issuer of the same
    name that no anchor certified. `openssl ca` cannot write certificateIssuer
    entries, so these are made here. Run alone with --indirect-only, it reads
    the root, its key and the intermediate already written."""
    issuer_key, unrelated_key = rsa_key(), rsa_key()
    issuer_name = name("Revocation Test CRL Issuer")
    crl_issuer = issue(issuer_name, issuer_key, root.subject, root_key, usage=key_usage(crl_sign=True))
    unrelated = issue(issuer_name, unrelated_key, issuer_name, unrelated_key, usage=key_usage(crl_sign=True))
    write_cert("crl-issuer", crl_issuer)
    write_key("crl-issuer", issuer_key)
    int_key = serialization.load_pem_private_key(open(os.path.join(OUT, "intermediate.key"), "rb").read(), None)
    leaves = {}
    for label in ["indirect-good", "indirect-revoked"]:
        host = f"{label}.revocation.test"
        key = rsa_key()
        leaves[label] = issue(name(host), key, intermediate.subject, int_key,
                              usage=key_usage(digital_signature=True, key_encipherment=True),
                              eku=(ExtendedKeyUsageOID.SERVER_AUTH,), host=host, crl="indirect.crl",
                              crl_issuer=issuer_name)
        write_cert(label, leaves[label])
        write_key(label, key)
        write(label + "-chain.pem", pem(leaves[label]) + pem(intermediate))

    def indirect_crl(key):
        entry = (
            x509.RevokedCertificateBuilder()
            .serial_number(leaves["indirect-revoked"].serial_number)
            .revocation_date(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
            .add_extension(x509.CertificateIssuer([x509.DirectoryName(intermediate.subject)]), critical=True)
            .add_extension(x509.CRLReason(x509.ReasonFlags.key_compromise), critical=False)
            .build()
        )
        return (
            x509.CertificateRevocationListBuilder()
            .issuer_name(issuer_name)
            .last_update(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
            .next_update(datetime.datetime(2035, 1, 1, tzinfo=datetime.timezone.utc))
            .add_extension(x509.CRLNumber(1), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
            .add_extension(x509.IssuingDistributionPoint(
                full_name=[x509.UniformResourceIdentifier(CRL_URL.format("indirect.crl"))], relative_name=None,
                only_contains_user_certs=False, only_contains_ca_certs=False, only_some_reasons=None,
                indirect_crl=True, only_contains_attribute_certs=False), critical=True)
            .add_revoked_certificate(entry)
            .sign(key, hashes.SHA256())
        )

    crl = indirect_crl(issuer_key)
    write("indirect.crl", crl.public_bytes(serialization.Encoding.DER))
    write("indirect.crl.pem", crl.public_bytes(serialization.Encoding.PEM) + pem(crl_issuer))
    write("indirect-unrelated.crl.pem", indirect_crl(unrelated_key).public_bytes(serialization.Encoding.PEM)
          + pem(unrelated))


def make_scope_cases(root, intermediate, int_key, crl_issuer_key):
    """CRLs and OCSP responses a verifier must not take at face value:
    - `dp-issuer-only`: a leaf whose distribution point names only its CRL
      issuer (no URL), revoked in `indirect-any.crl.pem`, an indirect CRL
      whose issuing distribution point names no point;
    - `intermediate-shard-relative.crl`, `intermediate-shard-dirname.crl`:
      empty CRLs of the intermediate scoped to a shard by a relative name or
      a directory name, which cover none of its leaves (their points are URLs);
    - `responder-expired` (valid 2020-2021, id-kp-OCSPSigning) and
      `ocsp-muststaple-expired-responder.der`, a good answer it signed."""
    issuer_name = name("Revocation Test CRL Issuer")
    key = rsa_key()
    host = "dp-issuer-only.revocation.test"
    builder = (
        x509.CertificateBuilder().subject_name(name(host)).issuer_name(intermediate.subject)
        .public_key(key.public_key()).serial_number(0x3001).not_valid_before(VALID_FROM).not_valid_after(VALID_TO)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(key_usage(digital_signature=True, key_encipherment=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(int_key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.CRLDistributionPoints([x509.DistributionPoint(
            full_name=None, relative_name=None, reasons=None, crl_issuer=[x509.DirectoryName(issuer_name)])]),
            critical=False)
    )
    leaf = builder.sign(int_key, hashes.SHA256())
    write_cert("dp-issuer-only", leaf)
    write_key("dp-issuer-only", key)
    write("dp-issuer-only-chain.pem", pem(leaf) + pem(intermediate))

    jan = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    end = datetime.datetime(2035, 1, 1, tzinfo=datetime.timezone.utc)

    def crl(issuer, signing_key, point, revoked=()):
        built = (
            x509.CertificateRevocationListBuilder().issuer_name(issuer).last_update(jan).next_update(end)
            .add_extension(x509.CRLNumber(9), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                           critical=False)
            .add_extension(point, critical=True)
        )
        for serial_number, certificate_issuer in revoked:
            built = built.add_revoked_certificate(
                x509.RevokedCertificateBuilder().serial_number(serial_number).revocation_date(jan)
                .add_extension(x509.CertificateIssuer([x509.DirectoryName(certificate_issuer)]), critical=True)
                .build())
        return built.sign(signing_key, hashes.SHA256())

    def point(full_name=None, relative_name=None, indirect=False):
        return x509.IssuingDistributionPoint(
            full_name=full_name, relative_name=relative_name, only_contains_user_certs=False,
            only_contains_ca_certs=False, only_some_reasons=None, indirect_crl=indirect,
            only_contains_attribute_certs=False)

    crl_issuer = load_cert("crl-issuer")
    anywhere = crl(issuer_name, crl_issuer_key, point(indirect=True), [(0x3001, intermediate.subject)])
    write("indirect-any.crl.pem", anywhere.public_bytes(serialization.Encoding.PEM) + pem(crl_issuer))
    shard = x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "shard 7")])
    write("intermediate-shard-relative.crl",
          crl(intermediate.subject, int_key, point(relative_name=shard)).public_bytes(serialization.Encoding.DER))
    write("intermediate-shard-dirname.crl",
          crl(intermediate.subject, int_key, point(full_name=[x509.DirectoryName(name("shard 7"))]))
          .public_bytes(serialization.Encoding.DER))

    responder_key = rsa_key()
    responder = (
        x509.CertificateBuilder().subject_name(name("Revocation Test Expired Responder"))
        .issuer_name(intermediate.subject).public_key(responder_key.public_key()).serial_number(0x3002)
        .not_valid_before(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc))
        .not_valid_after(datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.OCSP_SIGNING]), critical=False)
        .sign(int_key, hashes.SHA256())
    )
    write_cert("responder-expired", responder)
    write_key("responder-expired", responder_key)
    write("ocsp-muststaple-expired-responder.der",
          ocsp_response(load_cert("muststaple"), intermediate, responder, responder_key, delegated=True))


def load_cert(label):
    return x509.load_pem_x509_certificate(open(os.path.join(OUT, label + ".pem"), "rb").read())


def load_key(label):
    return serialization.load_pem_private_key(open(os.path.join(OUT, label + ".key"), "rb").read(), None)


if __name__ == "__main__":
    if sys.argv[1:] == ["--indirect-only"]:
        serial[0] = 0x2000
        make_indirect(load_cert("root"), load_key("root"), load_cert("intermediate"))
    elif sys.argv[1:] == ["--scope-only"]:
        make_scope_cases(load_cert("root"), load_cert("intermediate"), load_key("intermediate"),
                         load_key("crl-issuer"))
    else:
        main()
