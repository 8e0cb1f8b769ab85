#!/usr/bin/env python3
"""Reads what `pinproxy export` wrote with readers independent of pinproxy
(Python's plistlib and xml.etree, a regular expression for Kotlin) and prints
one JSON summary, so a test can assert what an app would load.

usage: read_exports.py FORMAT FILE  (FORMAT: ats, trustkit, android, okhttp, certspotter)
"""
import json
import plistlib
import re
import sys
import xml.etree.ElementTree as ET


def ats(path):
    with open(path, "rb") as handle:
        root = plistlib.load(handle)
    settings = root["NSAppTransportSecurity"]
    pinned = {}
    for domain, entry in settings.get("NSPinnedDomains", {}).items():
        pinned[domain] = {
            "subdomains": entry.get("NSIncludesSubdomains", False),
            "ca": [item["SPKI-SHA256-BASE64"] for item in entry.get("NSPinnedCAIdentities", [])],
            "leaf": [item["SPKI-SHA256-BASE64"] for item in entry.get("NSPinnedLeafIdentities", [])],
        }
    return {"pinned": pinned, "exceptions": settings.get("NSExceptionDomains", {})}


def trustkit(path):
    with open(path, "rb") as handle:
        root = plistlib.load(handle)
    domains = root["TSKConfiguration"]["TSKPinnedDomains"]
    return {
        domain: {
            "pins": entry["TSKPublicKeyHashes"],
            "subdomains": entry.get("TSKIncludeSubdomains", False),
            "enforce": entry.get("TSKEnforcePinning"),
            "reportUris": entry.get("TSKReportUris", []),
            "expiration": entry.get("TSKExpirationDate"),
        }
        for domain, entry in domains.items()
    }


def android(path):
    root = ET.parse(path).getroot()
    assert root.tag == "network-security-config", root.tag
    base = root.find("base-config")
    configs = []
    for config in root.findall("domain-config"):
        pin_set = config.find("pin-set")
        anchors = config.find("trust-anchors")
        configs.append({
            "domains": [[d.text, d.get("includeSubdomains")] for d in config.findall("domain")],
            "cleartext": config.get("cleartextTrafficPermitted"),
            "pins": [] if pin_set is None else [[p.get("digest"), p.text] for p in pin_set.findall("pin")],
            "expiration": None if pin_set is None else pin_set.get("expiration"),
            "anchors": [] if anchors is None else [c.get("src") for c in anchors.findall("certificates")],
        })
    return {"base": None if base is None else base.attrib, "configs": configs}


def okhttp(path):
    text = open(path, encoding="utf-8").read()
    assert "CertificatePinner.Builder()" in text and text.rstrip().endswith(".build()"), text
    return [list(match) for match in re.findall(r'\.add\("([^"]+)", "(sha256/[A-Za-z0-9+/=]+)"\)', text)]


def certspotter(path):
    return [line for line in open(path, encoding="utf-8").read().split("\n") if line]


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    print(json.dumps(globals()[kind](path), sort_keys=True))
