#!/usr/bin/env python3
"""A table-driven corpus of HTTP/1.1 request-framing shapes (request
smuggling, desynchronisation, header grammar), sent as raw bytes through a
running pinproxy to recording_origin.py.

For each shape it checks three things:
  * the status (or statuses, when pipelined) the client gets;
  * what the origin parsed for this shape: every request of shape ID uses a
    target under /s/ID/, so the origin's JSON log says exactly which
    (method, target) pairs reached it, with per-request checks on headers,
    body and trailers;
  * two canary clients afterwards, each on a fresh connection, must get their
    own 200 (run the proxy with `eventLoops: 1` so they share the pooled
    upstream connection: a desynchronised pool shows up here).

Usage:
  smuggling_corpus.py --proxy-port P --origin-log FILE --path forward|intercept
                      [--ca CA.pem] [--host httpbin.org] [--only NAME[,NAME]] [--json OUT]

forward:   absolute-form requests (`GET http://HOST/s/ID/... HTTP/1.1`) to the proxy port.
intercept: `CONNECT HOST:443`, TLS verified against --ca, then origin-form requests.
Exit status 0 when every shape passed, 1 otherwise.
"""
import argparse
import hashlib
import json
import os
import re
import socket
import ssl
import sys
import time

READ_TIMEOUT = 3.0
EXTRA_PROBE = 0.1
LOG_POLL = 0.3
EMPTY_SETTLE = 0.05
ANY = "any"


# ---------------------------------------------------------------- shapes ---

class Shape:
    def __init__(self, name, send, status, origin=(), checks=(), statuses=None, paths=None,
                 truncated_ok=False, expect_close=False, resp_checks=(), settle=0.0,
                 methods=None, note=""):
        self.name = name
        self.send = send              # function(ctx) -> bytes or list of plan steps
        self.status = status          # int, set of ints, or ANY (first final response)
        self.statuses = statuses      # pipelined: the exact list of final statuses
        self.origin = list(origin)    # [(METHOD, rest-under-/s/ID/)]
        self.checks = list(checks)    # origin checks: function(entries) -> error text or None
        self.resp_checks = list(resp_checks)  # function(responses, interim) -> error or None
        self.paths = paths or ("forward", "intercept")
        self.truncated_ok = truncated_ok
        self.expect_close = expect_close
        self.settle = settle
        self.methods = methods
        self.note = note


class Ctx:
    """Per-shape building blocks: the target form depends on the path."""

    def __init__(self, path, host, shape_id):
        self.path = path
        self.host = host.encode()
        self.id = shape_id.encode()
        self.absolute = path == "forward"

    def origin_form(self, rest):
        return b"/s/" + self.id + b"/" + rest

    def target(self, rest):
        prefix = b"http://" + self.host if self.absolute else b""
        return prefix + self.origin_form(rest)

    def smuggled(self):
        """The inner request a desynchronised origin would parse."""
        return b"GET " + self.origin_form(b"smuggled") + b" HTTP/1.1\r\nHost: " + self.host + b"\r\n\r\n"


def b(text):
    return text.encode("latin-1") if isinstance(text, str) else text


def req(c, method="GET", rest="a", headers=(), body=b"", version="HTTP/1.1", host=True, target=None):
    line_target = b(target) if target is not None else c.target(b(rest))
    lines = [b(method) + b" " + line_target + b" " + b(version)]
    if host:
        lines.append(b"Host: " + c.host)
    lines += [b(h) for h in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + b(body)


def raw(c, text):
    """Bytes with {T} (the target prefix for /s/ID), {O} (origin-form prefix), {H} (host)."""
    data = b(text)
    data = data.replace(b"{T}", c.target(b"")[:-1])
    data = data.replace(b"{O}", c.origin_form(b"")[:-1])
    return data.replace(b"{H}", c.host)


def post(c, headers, body, rest="a", **kw):
    return req(c, "POST", rest, headers, body, **kw)


# Origin checks (on the non-error entries, in order).

def o_headers(entries, index, name):
    if index >= len(entries):
        return None
    return [value for field, value in entries[index]["headers"] if field.lower() == name.lower()]


def one_header(name, value, index=0):
    def check(entries, ctx=None):
        values = o_headers(entries, index, name)
        if values is None:
            return f"origin request {index} missing"
        if values != [value]:
            return f"origin {name} fields {values!r}, expected exactly [{value!r}]"
        return None
    return check


def no_header(name, index=0):
    def check(entries, ctx=None):
        values = o_headers(entries, index, name)
        if values:
            return f"origin saw {name}: {values!r}"
        return None
    return check


def body_is(data, index=0):
    data = b(data)

    def check(entries, ctx=None):
        if index >= len(entries):
            return f"origin request {index} missing"
        entry = entries[index]
        if entry["body_len"] != len(data) or entry["body_sha256"] != hashlib.sha256(data).hexdigest():
            return f"origin body {entry['body_len']} bytes {entry['body_head'][:60]!r}, expected {len(data)} bytes"
        return None
    return check


def body_len(n, index=0):
    def check(entries, ctx=None):
        if index >= len(entries):
            return f"origin request {index} missing"
        if entries[index]["body_len"] != n:
            return f"origin body_len {entries[index]['body_len']}, expected {n}"
        return None
    return check


def trailers_are(expected, index=0):
    def check(entries, ctx=None):
        if index >= len(entries):
            return f"origin request {index} missing"
        got = [tuple(t) for t in entries[index]["trailers"]]
        if got != [tuple(t) for t in expected]:
            return f"origin trailers {got!r}, expected {expected!r}"
        return None
    return check


def body_is_smuggled(index=0):
    """The smuggled inner request arrived as the body of request `index`, not as a request."""
    def check(entries, ctx=None):
        if index >= len(entries):
            return f"origin request {index} missing"
        inner = ctx.smuggled()
        entry = entries[index]
        if entry["body_len"] != len(inner) or entry["body_sha256"] != hashlib.sha256(inner).hexdigest():
            return (f"origin body {entry['body_len']} bytes {entry['body_head'][:60]!r},"
                    f" expected the {len(inner)}-byte smuggled request as the body")
        return None
    return check


def one_header_matching_body(index=0):
    """Exactly one Content-Length, equal to the body length the origin read."""
    def check(entries, ctx=None):
        if index >= len(entries):
            return f"origin request {index} missing"
        values = o_headers(entries, index, "Content-Length")
        if values != [str(entries[index]["body_len"])]:
            return f"origin Content-Length fields {values!r} for a {entries[index]['body_len']}-byte body"
        return None
    return check


# Client-side response checks.

def r_fields(response, name):
    return [value for field, value in response["headers"] if field.lower() == b(name).lower()]


def r_one_length():
    def check(responses, interim):
        if not responses:
            return "no response"
        values = r_fields(responses[0], "Content-Length")
        if len(values) != 1 or not values[0].isdigit():
            return f"client got Content-Length fields {values!r}, expected exactly one number"
        return None
    return check


def r_has_length():
    def check(responses, interim):
        if not responses:
            return "no response"
        if not r_fields(responses[0], "Content-Length"):
            return "client got no Content-Length"
        return None
    return check


def r_header_raw(name, value):
    def check(responses, interim):
        if not responses:
            return "no response"
        values = r_fields(responses[0], name)
        if values != [value]:
            return f"client got {name} {values!r}, expected [{value!r}]"
        return None
    return check


def r_no_trailers(*names):
    def check(responses, interim):
        if not responses:
            return "no response"
        bad = [(f, v) for f, v in responses[0]["trailers"] if f.lower() in {b(n).lower() for n in names}]
        if bad:
            return f"client got trailers {bad!r}"
        return None
    return check


def r_interim_100():
    def check(responses, interim):
        if not any(r["status"] == 100 for r in interim):
            return "client got no 100 Continue"
        return None
    return check


def r_header(name, value):
    def check(responses, interim):
        if not responses:
            return "no response"
        values = r_fields(responses[0], name)
        if b(value) not in values:
            return f"client got {name} {values!r}, expected {value!r}"
        return None
    return check


def build_shapes():
    S = Shape
    shapes = []
    add = shapes.append
    F = ("forward",)
    chunked5 = "5\r\nhello\r\n0\r\n\r\n"

    # --- plain, valid requests --------------------------------------------------
    add(S("get-simple", lambda c: req(c), 200, [("GET", "a")]))
    add(S("head", lambda c: req(c, "HEAD"), 200, [("HEAD", "a")]))
    add(S("options", lambda c: req(c, "OPTIONS"), 200, [("OPTIONS", "a")]))
    add(S("delete", lambda c: req(c, "DELETE"), 200, [("DELETE", "a")]))
    add(S("post-cl", lambda c: post(c, ["Content-Length: 5"], "hello"), 200, [("POST", "a")],
          [one_header("Content-Length", "5"), no_header("Transfer-Encoding"), body_is("hello")]))
    add(S("post-cl-zero", lambda c: post(c, ["Content-Length: 0"], ""), 200, [("POST", "a")],
          [body_len(0)]))
    add(S("post-chunked", lambda c: post(c, ["Transfer-Encoding: chunked"], chunked5), 200,
          [("POST", "a")], [body_is("hello"), no_header("Content-Length")]))
    add(S("put-chunked-multi",
          lambda c: req(c, "PUT", "a", ["Transfer-Encoding: chunked"],
                        "3\r\nabc\r\nA\r\n0123456789\r\n1\r\nz\r\n0\r\n\r\n"),
          200, [("PUT", "a")], [body_is("abc0123456789z")]))
    add(S("chunk-ext", lambda c: post(c, ["Transfer-Encoding: chunked"],
                                      "5;name=value;x\r\nhello\r\n0;last\r\n\r\n"),
          200, [("POST", "a")], [body_is("hello")]))
    add(S("chunk-ext-bws", lambda c: post(c, ["Transfer-Encoding: chunked"],
                                          "5 ;x=1\r\nhello\r\n0\r\n\r\n"),
          200, [("POST", "a")], [body_is("hello")]))
    add(S("chunk-data-nul", lambda c: post(c, ["Transfer-Encoding: chunked"],
                                           "5\r\nhe\x00lo\r\n0\r\n\r\n"),
          200, [("POST", "a")], [body_is("he\x00lo")]))
    add(S("get-with-body", lambda c: req(c, "GET", "a", ["Content-Length: 5"], "hello"), 200,
          [("GET", "a")], [body_is("hello"), one_header("Content-Length", "5")]))
    add(S("te-name-case", lambda c: post(c, ["Transfer-encoding: chunked"], chunked5), 200,
          [("POST", "a")], [body_is("hello")]))
    add(S("te-value-case", lambda c: post(c, ["Transfer-Encoding: Chunked"], chunked5), 200,
          [("POST", "a")], [body_is("hello")]))
    add(S("te-tab-ows", lambda c: post(c, ["Transfer-Encoding:\tchunked\t"], chunked5), 200,
          [("POST", "a")], [body_is("hello")]))
    add(S("te-trailing-comma", lambda c: post(c, ["Transfer-Encoding: chunked,"], chunked5), 200,
          [("POST", "a")], [body_is("hello")],
          note="RFC 9110 §5.6.1: empty list elements are ignored"))
    add(S("cl-trailing-ows", lambda c: post(c, ["Content-Length: 5 "], "hello"), 200,
          [("POST", "a")], [one_header("Content-Length", "5"), body_is("hello")]))
    add(S("cl-leading-zero", lambda c: post(c, ["Content-Length: 05"], "hello"), 200,
          [("POST", "a")], [one_header("Content-Length", "5"), body_is("hello")]))
    add(S("leading-crlf", lambda c: b"\r\n" + req(c), 200, [("GET", "a")]))
    add(S("query-string", lambda c: req(c, rest="a?x=1&y=%20"), 200, [("GET", "a?x=1&y=%20")]))
    add(S("fragment", lambda c: req(c, rest="a#frag"), 200, [("GET", "a")]))
    add(S("fragment-after-query", lambda c: req(c, rest="a?q=1#frag"), 200, [("GET", "a?q=1")]))
    add(S("obs-text-request", lambda c: req(c, headers=["X-Obs: caf\xe9 \xff"]), 200, [("GET", "a")],
          [one_header("X-Obs", "caf\xe9 \xff")]))
    add(S("large-header", lambda c: req(c, headers=["X-Big: " + "v" * 8000]), 200, [("GET", "a")],
          [one_header("X-Big", "v" * 8000)]))
    add(S("many-headers", lambda c: req(c, headers=[f"X-H{i}: {i}" for i in range(60)]), 200,
          [("GET", "a")], [one_header("X-H59", "59")]))
    add(S("post-cl-large", lambda c: post(c, ["Content-Length: 200000"], bytes(range(256)) * 781 + b"x" * 64),
          200, [("POST", "a")], [body_is(bytes(range(256)) * 781 + b"x" * 64)]))
    add(S("chunked-large",
          lambda c: post(c, ["Transfer-Encoding: chunked"],
                         b"".join(b"%x\r\n%s\r\n" % (25000, bytes([65 + i]) * 25000) for i in range(4)) +
                         b"0\r\n\r\n"),
          200, [("POST", "a")], [body_is(b"".join(bytes([65 + i]) * 25000 for i in range(4)))]))
    add(S("byte-at-a-time",
          lambda c: [x for byte in req(c, headers=["X-Slow: 1"]) for x in (bytes([byte]), 0.001)],
          200, [("GET", "a")]))
    add(S("split-body",
          lambda c: [post(c, ["Content-Length: 10"], ""), 0.05, b"hello", 0.05, b"world"],
          200, [("POST", "a")], [body_is("helloworld")]))
    add(S("chunked-split-size-line",
          lambda c: [post(c, ["Transfer-Encoding: chunked"], "") + b"1", 0.05, b"0\r\n0123456789abcde",
                     0.05, b"f\r", 0.05, b"\n0\r", 0.05, b"\n\r\n"],
          200, [("POST", "a")], [body_is("0123456789abcdef")]))
    add(S("expect-100",
          lambda c: [post(c, ["Content-Length: 5", "Expect: 100-continue"], ""), ("await100",), b"hello"],
          200, [("POST", "a")], [body_is("hello")], resp_checks=[r_interim_100()]))
    add(S("http10-no-host", lambda c: req(c, version="HTTP/1.0", host=False), 200, [("GET", "a")],
          expect_close=True))
    add(S("http10-te-chunked",
          lambda c: post(c, ["Transfer-Encoding: chunked"], chunked5, version="HTTP/1.0"),
          200, [("POST", "a")], [body_is("hello")], expect_close=True))
    add(S("connection-close", lambda c: req(c, headers=["Connection: close"]), 200, [("GET", "a")],
          expect_close=True))

    # --- Connection / Proxy-Connection naming framing fields: ignored ------------
    def conn_smuggle(header):
        def make(c):
            inner = c.smuggled()
            return post(c, [header, "Content-Length: %d" % len(inner)], inner)
        return make

    for name, header, close in [
            ("conn-cl-smuggle", "Connection: Content-Length", False),
            ("proxy-conn-cl-smuggle", "Proxy-Connection: Content-Length", False),
            ("conn-close-cl-smuggle", "Connection: close, Content-Length", True),
            ("conn-cl-uppercase", "Connection: CONTENT-LENGTH", False),
            ("conn-keepalive-cl", "Connection: keep-alive, content-length", False)]:
        add(S(name, conn_smuggle(header), 200, [("POST", "a")], [body_is_smuggled(), one_header_matching_body()],
              expect_close=close))
    add(S("conn-cl-poison-pool",
          lambda c: post(c, ["Connection: Content-Length", "Content-Length: 5"], "hello"), 200,
          [("POST", "a")], [one_header("Content-Length", "5"), body_is("hello")],
          note="a body that is not a request: if forwarded unframed it prefixes the next pooled request"))
    add(S("conn-te-chunked",
          lambda c: post(c, ["Connection: Transfer-Encoding", "Transfer-Encoding: chunked"],
                         b"%x\r\n" % len(c.smuggled()) + c.smuggled() + b"\r\n0\r\n\r\n"),
          200, [("POST", "a")], [body_is_smuggled(), no_header("Content-Length")]))
    add(S("conn-host", lambda c: req(c, headers=["Connection: Host"]), 200, [("GET", "a")],
          [one_header("Host", "httpbin.org")]))
    add(S("conn-host-cl", lambda c: post(c, ["Connection: Host, Content-Length", "Content-Length: 5"],
                                         "hello"),
          200, [("POST", "a")], [one_header("Host", "httpbin.org"), one_header("Content-Length", "5")]))

    # --- Content-Length values -------------------------------------------------
    add(S("dup-cl-same", lambda c: post(c, ["Content-Length: 5", "Content-Length: 5"], "hello"), 200,
          [("POST", "a")], [one_header("Content-Length", "5"), body_is("hello")]))
    add(S("cl-list-same", lambda c: post(c, ["Content-Length: 5, 5"], "hello"), 200,
          [("POST", "a")], [one_header("Content-Length", "5"), body_is("hello")]))
    for name, values in [
            ("dup-cl-differ", ["Content-Length: 5", "Content-Length: 6"]),
            ("cl-list-differ", ["Content-Length: 5, 6"]),
            ("cl-list-empty-element", ["Content-Length: 5,"]),
            ("cl-plus", ["Content-Length: +5"]),
            ("cl-negative", ["Content-Length: -1"]),
            ("cl-hex", ["Content-Length: 0x5"]),
            ("cl-empty", ["Content-Length:"]),
            ("cl-inner-space", ["Content-Length: 5 5"]),
            ("cl-letters", ["Content-Length: 5a"]),
            ("cl-huge", ["Content-Length: 99999999999999999999"]),
            ("cl-decimal", ["Content-Length: 5.0"])]:
        add(S(name, (lambda v: lambda c: post(c, v, "hello"))(values), 400, []))

    # --- CL + TE, transfer codings ----------------------------------------------
    add(S("cl-te", lambda c: post(c, ["Content-Length: 6", "Transfer-Encoding: chunked"],
                                  "0\r\n\r\nG"), 400, []))
    add(S("te-cl", lambda c: post(c, ["Transfer-Encoding: chunked", "Content-Length: 3"],
                                  "8\r\nSMUGGLED\r\n0\r\n\r\n"), 400, []))
    add(S("cl-te-smuggle-get",
          lambda c: post(c, ["Content-Length: %d" % (5 + len(c.smuggled())), "Transfer-Encoding: chunked"],
                         b"0\r\n\r\n" + c.smuggled()), 400, []))
    for name, te in [
            ("te-gzip", "gzip"), ("te-identity", "identity"), ("te-chunked-chunked", "chunked, chunked"),
            ("te-chunked-identity", "chunked, identity"), ("te-identity-chunked", "identity, chunked"),
            ("te-gzip-chunked", "gzip, chunked"), ("te-xchunked", "xchunked"),
            ("te-chunked-param", "chunked;q=1"), ("te-quoted", '"chunked"'), ("te-empty", ""),
            ("te-chunked-space-x", "chunked x")]:
        add(S(name, (lambda v: lambda c: post(c, ["Transfer-Encoding: " + v], chunked5))(te), 400, []))
    add(S("te-space-before-colon", lambda c: post(c, ["Transfer-Encoding : chunked"], chunked5), 400, []))
    add(S("te-dup-lines-x", lambda c: post(c, ["Transfer-Encoding: chunked", "Transfer-Encoding: x"],
                                           chunked5), 400, []))
    add(S("te-dup-lines-chunked",
          lambda c: post(c, ["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], chunked5), 400, []))
    add(S("te-obs-fold", lambda c: post(c, ["Transfer-Encoding:", " chunked"], chunked5), 400, []))
    add(S("te-hidden-in-fold", lambda c: post(c, ["X-A: b", " Transfer-Encoding: chunked",
                                                  "Content-Length: 5"], "hello"), 400, []))
    add(S("te-vertical-tab", lambda c: post(c, ["Transfer-Encoding:\x0bchunked"], chunked5), 400, []))
    add(S("te-bare-lf", lambda c: post(c, ["X-A: 1\nTransfer-Encoding: chunked"], chunked5), 400, []))
    add(S("te-cl-http10", lambda c: post(c, ["Transfer-Encoding: chunked", "Content-Length: 5"], chunked5,
                                         version="HTTP/1.0"), 400, []))

    # --- chunk syntax (errors inside the body) ------------------------------------
    for name, body in [
            ("chunk-size-0x", "0x5\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-negative", "-1\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-plus", "+5\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-leading-space", " 5\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-trailing-space", "5 \r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-16-digits", "0000000000000005\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-overflow", "fffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
            ("chunk-size-empty", "\r\nhello\r\n0\r\n\r\n"),
            ("chunk-data-too-long", "5\r\nhelloXX\r\n0\r\n\r\n"),
            ("chunk-missing-crlf", "5\r\nhello0\r\n\r\n"),
            ("chunk-size-bare-lf", "5\nhello\r\n0\r\n\r\n"),
            ("chunk-data-bare-lf", "5\r\nhello\n0\r\n\r\n"),
            ("chunk-size-bare-cr", "5\rhello\r\n0\r\n\r\n"),
            ("chunk-last-bare-lf", "5\r\nhello\r\n0\n\n"),
            ("chunk-ext-ctl", "5;a=\x01b\r\nhello\r\n0\r\n\r\n"),
            ("chunk-trailer-obs-fold", "5\r\nhello\r\n0\r\nX-T: 1\r\n folded\r\n\r\n"),
            ("chunk-trailer-no-colon", "5\r\nhello\r\n0\r\nX-T\r\n\r\n")]:
        add(S(name, (lambda v: lambda c: post(c, ["Transfer-Encoding: chunked"], v))(body), 400, [],
              truncated_ok=True))
    add(S("chunk-bad-size-late",
          lambda c: [post(c, ["Transfer-Encoding: chunked"], "5\r\nhello\r\n"), 0.15, b"zz\r\n"],
          400, [], truncated_ok=True, note="the head and first chunk may reach the origin first"))
    add(S("chunk-smuggle-after-last",
          lambda c: post(c, ["Transfer-Encoding: chunked"], b"0\r\n\r\n" + req(c, rest="p2")),
          200, [("POST", "a"), ("GET", "p2")], [body_len(0)], statuses=[200, 200],
          note="a legitimate pipelined GET right after an empty chunked body"))

    # --- trailers ----------------------------------------------------------------
    add(S("trailers-framing-fields",
          lambda c: post(c, ["Transfer-Encoding: chunked"],
                         "5\r\nhello\r\n0\r\nX-T: 1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
                         "Host: evil.example\r\n\r\n"),
          200, [("POST", "a")], [body_is("hello"), trailers_are([("X-T", "1")])]))
    add(S("trailer-te-only",
          lambda c: post(c, ["Transfer-Encoding: chunked"],
                         "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"),
          200, [("POST", "a")], [body_is("hello"), trailers_are([])]))
    add(S("trailer-plain",
          lambda c: post(c, ["Transfer-Encoding: chunked"], "5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n"),
          200, [("POST", "a")], [trailers_are([("X-Checksum", "abc")])]))

    # --- head grammar -------------------------------------------------------------
    for name, text in [
            ("bare-lf-head", "GET {T}/a HTTP/1.1\nHost: {H}\n\n"),
            ("bare-lf-request-line", "GET {T}/a HTTP/1.1\nHost: {H}\r\n\r\n"),
            ("bare-lf-in-header", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: 1\nX-B: 2\r\n\r\n"),
            ("bare-cr-in-header", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: 1\rX-B: 2\r\n\r\n"),
            ("bare-cr-request-line", "GET {T}/a\rHTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("nul-in-header", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\x00b\r\n\r\n"),
            ("nul-in-target", "GET {T}/a\x00b HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("obs-fold-space", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\r\n b\r\n\r\n"),
            ("obs-fold-tab", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\r\n\tb\r\n\r\n"),
            ("obs-fold-first-line", "GET {T}/a HTTP/1.1\r\n Host: {H}\r\n\r\n"),
            ("space-before-colon", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A : b\r\n\r\n"),
            ("tab-before-colon", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A\t: b\r\n\r\n"),
            ("empty-header-name", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\n: b\r\n\r\n"),
            ("no-colon-header", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A b\r\n\r\n"),
            ("non-token-header-name", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-\xe9: 1\r\n\r\n"),
            ("header-name-slash", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX/A: 1\r\n\r\n"),
            ("ctl-01-value", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\x01b\r\n\r\n"),
            ("ctl-7f-value", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\x7fb\r\n\r\n"),
            ("ctl-1b-value", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\x1bb\r\n\r\n"),
            ("reqline-double-space", "GET  {T}/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("reqline-trailing-space", "GET {T}/a HTTP/1.1 \r\nHost: {H}\r\n\r\n"),
            ("reqline-leading-space", " GET {T}/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("reqline-tab-separator", "GET\t{T}/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("reqline-no-version", "GET {T}/a\r\nHost: {H}\r\n\r\n"),
            ("reqline-lowercase-version", "GET {T}/a http/1.1\r\nHost: {H}\r\n\r\n"),
            ("reqline-version-junk", "GET {T}/a HTTP/1.1x\r\nHost: {H}\r\n\r\n"),
            ("method-non-token", "GE/T {T}/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("target-with-space", "GET {T}/a b HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("target-non-ascii", "GET {T}/a\xe9 HTTP/1.1\r\nHost: {H}\r\n\r\n"),
            ("pipeline-after-bad", "GET {T}/a HTTP/1.1\r\nHost: {H}\r\nX-A: a\r\n b\r\n\r\n"
                                   "GET {T}/smuggled HTTP/1.1\r\nHost: {H}\r\n\r\n")]:
        add(S(name, (lambda t: lambda c: raw(c, t))(text), 400, []))
    for name, version in [("reqline-http20", "HTTP/2.0"), ("reqline-http12", "HTTP/1.2")]:
        add(S(name, (lambda v: lambda c: req(c, version=v))(version), 505, []))

    # --- Host ---------------------------------------------------------------------
    add(S("no-host-http11", lambda c: req(c, host=False), 400, []))
    add(S("two-hosts-differ", lambda c: req(c, headers=["Host: evil.example"]), 400, []))
    add(S("two-hosts-same", lambda c: req(c, headers=["Host: {}".format(c.host.decode())]), 400, []))
    add(S("two-hosts-http10", lambda c: req(c, headers=["Host: evil.example"], version="HTTP/1.0"),
          400, [], note="RFC 9112 §3.2: any request with more than one Host line"))
    add(S("host-differs-from-url", lambda c: req(c, host=False, headers=["Host: evil.example"]), 200,
          [("GET", "a")], [one_header("Host", "httpbin.org")], paths=F,
          note="absolute-form: the URL's authority wins (RFC 9112 §3.2.2)"))

    # --- pipelining -----------------------------------------------------------------
    add(S("pipeline-2-get", lambda c: req(c, rest="p1") + req(c, rest="p2"), 200,
          [("GET", "p1"), ("GET", "p2")], statuses=[200, 200]))
    add(S("pipeline-3-mixed",
          lambda c: req(c, rest="p1") + post(c, ["Content-Length: 5"], "hello", rest="p2") + req(c, rest="p3"),
          200, [("GET", "p1"), ("POST", "p2"), ("GET", "p3")], [body_is("hello", index=1)],
          statuses=[200, 200, 200]))
    add(S("pipeline-chunked-then-get",
          lambda c: post(c, ["Transfer-Encoding: chunked"], chunked5, rest="p1") + req(c, rest="p2"),
          200, [("POST", "p1"), ("GET", "p2")], [body_is("hello")], statuses=[200, 200]))
    add(S("pipeline-head-then-get", lambda c: req(c, "HEAD", "p1") + req(c, rest="p2"), 200,
          [("HEAD", "p1"), ("GET", "p2")], statuses=[200, 200]))
    add(S("pipeline-close-then-get",
          lambda c: req(c, rest="p1", headers=["Connection: close"]) + req(c, rest="smuggled"),
          200, [("GET", "p1")], statuses=[200], expect_close=True))
    add(S("pipeline-after-cl-te",
          lambda c: post(c, ["Content-Length: 6", "Transfer-Encoding: chunked"], "0\r\n\r\nG")
          + req(c, rest="smuggled"), 400, []))
    add(S("pipeline-after-dup-cl",
          lambda c: post(c, ["Content-Length: 5", "Content-Length: 50"], "hello") + req(c, rest="smuggled"),
          400, []))
    add(S("pipeline-split-writes",
          lambda c: [req(c, rest="p1") + req(c, rest="p2")[:10], 0.05, req(c, rest="p2")[10:]],
          200, [("GET", "p1"), ("GET", "p2")], statuses=[200, 200]))

    # --- truncation -------------------------------------------------------------------
    add(S("cl-large-short-body-close",
          lambda c: [post(c, ["Content-Length: 1000"], "hello"), 0.15, ("close",)],
          ANY, [], truncated_ok=True,
          note="the origin may see a truncated request, but must not be left mid-body"))
    add(S("chunked-truncated-close",
          lambda c: [post(c, ["Transfer-Encoding: chunked"], "5\r\nhello\r\n"), 0.15, ("close",)],
          ANY, [], truncated_ok=True))

    # --- forward path only: CONNECT and absolute-form -------------------------------------
    for name, text, status in [
            ("connect-plus-port", "CONNECT {H}:+443 HTTP/1.1\r\nHost: {H}:+443\r\n\r\n", 400),
            ("connect-ipv6-unbracketed", "CONNECT ::1:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n", 400),
            ("connect-port-0", "CONNECT {H}:0 HTTP/1.1\r\nHost: {H}:0\r\n\r\n", 400),
            ("connect-port-65536", "CONNECT {H}:65536 HTTP/1.1\r\nHost: {H}:65536\r\n\r\n", 400),
            ("connect-no-port", "CONNECT {H} HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("connect-empty-port", "CONNECT {H}: HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("connect-path", "CONNECT {H}:443/x HTTP/1.1\r\nHost: {H}:443\r\n\r\n", 400),
            ("absolute-userinfo", "GET http://a@{H}/s/absolute-userinfo/a HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("absolute-ftp", "GET ftp://{H}/s/absolute-ftp/a HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("absolute-empty-host", "GET http:///s/absolute-empty-host/a HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("origin-form-on-forward", "GET /s/origin-form-on-forward/a HTTP/1.1\r\nHost: {H}\r\n\r\n", 400),
            ("asterisk-on-forward", "OPTIONS * HTTP/1.1\r\nHost: {H}\r\n\r\n", 400)]:
        add(S(name, (lambda t: lambda c: raw(c, t))(text), status, [], paths=F,
              methods=["CONNECT"] if text.startswith("CONNECT") else None))
    add(S("connect-port-8443", lambda c: raw(c, "CONNECT {H}:8443 HTTP/1.1\r\nHost: {H}:8443\r\n\r\n"),
          403, [], paths=F, resp_checks=[r_header("Pinproxy-Error", "denied-by-policy")], methods=["CONNECT"]))
    add(S("absolute-port-8443",
          lambda c: raw(c, "GET https://{H}:8443/s/absolute-port-8443/a HTTP/1.1\r\nHost: {H}:8443\r\n\r\n"),
          403, [], paths=F, resp_checks=[r_header("Pinproxy-Error", "denied-by-policy")]))
    add(S("absolute-denied-host",
          lambda c: raw(c, "GET http://evil.example/s/absolute-denied-host/a HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
          403, [], paths=F, resp_checks=[r_header("Pinproxy-Error", "denied-by-policy")]))
    add(S("absolute-https", lambda c: raw(c, "GET https://{H}/s/absolute-https/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
          200, [("GET", "a")], paths=F))
    add(S("absolute-explicit-443",
          lambda c: raw(c, "GET https://{H}:443/s/absolute-explicit-443/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
          200, [("GET", "a")], [one_header("Host", "httpbin.org")], paths=F))
    add(S("absolute-scheme-case",
          lambda c: raw(c, "GET HTTP://{H}/s/absolute-scheme-case/a HTTP/1.1\r\nHost: {H}\r\n\r\n"),
          200, [("GET", "a")], paths=F))
    add(S("absolute-query-only",
          lambda c: raw(c, "GET http://{H}?q=1 HTTP/1.1\r\nHost: {H}\r\n\r\n"),
          ANY, [], paths=F, note="target /?q=1 is outside /s/: only the canaries are checked"))

    # --- response shapes from the origin ----------------------------------------------------
    def resp(shape, method="GET"):
        return lambda c: req(c, method, "resp/" + shape)

    add(S("resp-connection-cl", resp("connection-cl"), 200, [("GET", "resp/connection-cl")],
          resp_checks=[r_has_length()]))
    add(S("resp-dup-cl", resp("dup-cl"), 200, [("GET", "resp/dup-cl")], resp_checks=[r_one_length()]))
    add(S("resp-cl-list", resp("cl-list"), 200, [("GET", "resp/cl-list")], resp_checks=[r_one_length()]))
    add(S("resp-chunked-trailers", resp("chunked-trailers"), 200, [("GET", "resp/chunked-trailers")],
          resp_checks=[r_no_trailers("Content-Length", "Host", "Transfer-Encoding")]))
    add(S("resp-obs-text", resp("obs-text"), 200, [("GET", "resp/obs-text")],
          resp_checks=[r_header_raw("X-Obs", b"caf\xe9 \xff")]))
    add(S("resp-unsolicited", resp("unsolicited"), 200, [("GET", "resp/unsolicited")], settle=0.35))
    add(S("resp-close-delimited", resp("close-delimited"), 200, [("GET", "resp/close-delimited")]))
    add(S("resp-connection-te", resp("connection-te"), 200, [("GET", "resp/connection-te")]))
    add(S("resp-http10-te", resp("http10-te"), 200, [("GET", "resp/http10-te")]))
    add(S("resp-head-chunked", resp("chunked-trailers", "HEAD"), 200, [("HEAD", "resp/chunked-trailers")]))
    add(S("resp-pipeline-dup-cl", lambda c: req(c, rest="resp/dup-cl") + req(c, rest="p2"), 200,
          [("GET", "resp/dup-cl"), ("GET", "p2")], statuses=[200, 200]))
    return shapes


# ---------------------------------------------------------------- client ---

class Closed(Exception):
    pass


class Stream:
    """A client connection: plain TCP (forward) or TLS inside CONNECT (intercept)."""

    def __init__(self, port, path, host, ca):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        if path == "intercept":
            connect = b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode())
            self.sock.sendall(connect)
            head = b""
            while b"\r\n\r\n" not in head:
                data = self.sock.recv(1)
                if not data:
                    raise Closed("proxy closed during CONNECT")
                head += data
            if not head.startswith(b"HTTP/1.1 200"):
                raise Closed(f"CONNECT answered {head[:60]!r}")
            context = ssl.create_default_context(cafile=ca)
            if hasattr(ssl, "OP_IGNORE_UNEXPECTED_EOF"):
                context.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
            self.sock = context.wrap_socket(self.sock, server_hostname=host)

    def send(self, data):
        self.sock.sendall(data)

    def fill(self, deadline):
        if self.eof:
            raise Closed("eof")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError):
            data = b""
        except ssl.SSLError as error:
            if "timed out" in str(error):
                raise socket.timeout("deadline")
            data = b""
        if not data:
            self.eof = True
            raise Closed("eof")
        self.buf += data

    def until(self, marker, deadline):
        while True:
            index = self.buf.find(marker)
            if index >= 0:
                out = bytes(self.buf[:index + len(marker)])
                del self.buf[:index + len(marker)]
                return out
            self.fill(deadline)

    def exact(self, count, deadline):
        while len(self.buf) < count:
            self.fill(deadline)
        out = bytes(self.buf[:count])
        del self.buf[:count]
        return out

    def rest(self, deadline):
        """Until close (close-delimited)."""
        try:
            while True:
                self.fill(deadline)
        except Closed:
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def parse_fields(block):
    fields = []
    for line in block.split(b"\r\n"):
        if not line:
            continue
        name, _, value = line.partition(b":")
        fields.append((name, value.strip(b" \t")))
    return fields


def read_response(stream, method, deadline):
    """One response (interim or final) framed by RFC 9112 §6.3 from the client's side."""
    head = stream.until(b"\r\n\r\n", deadline)[:-4]
    status_line, _, block = head.partition(b"\r\n")
    parts = status_line.split(b" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        return {"status": -1, "status_line": status_line, "headers": [], "body": b"", "trailers": [],
                "framing": "malformed"}
    headers = parse_fields(block)
    response = {"status": status, "status_line": status_line, "headers": headers, "body": b"",
                "trailers": [], "framing": "none"}
    if 100 <= status < 200 or status in (204, 304) or method == "HEAD" or (
            method == "CONNECT" and 200 <= status < 300):
        return response
    te = [v for f, v in headers if f.lower() == b"transfer-encoding"]
    cl = [v for f, v in headers if f.lower() == b"content-length"]
    if te:
        response["framing"] = "chunked"
        body = bytearray()
        while True:
            line = stream.until(b"\r\n", deadline)[:-2]
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            body += stream.exact(size, deadline)
            stream.exact(2, deadline)
        trailer_block = stream.until(b"\r\n", deadline)
        while trailer_block != b"\r\n" and not trailer_block.endswith(b"\r\n\r\n"):
            trailer_block += stream.until(b"\r\n", deadline)
        response["trailers"] = parse_fields(trailer_block)
        response["body"] = bytes(body)
    elif cl:
        elements = {e.strip() for v in cl for e in v.split(b",")}
        if len(elements) == 1 and next(iter(elements)).isdigit():
            response["framing"] = "length"
            response["body"] = stream.exact(int(next(iter(elements))), deadline)
        else:
            response["framing"] = "bad-length"
            response["body"] = stream.rest(deadline)
    else:
        response["framing"] = "close"
        try:
            response["body"] = stream.rest(deadline)
        except socket.timeout:
            response["framing"] = "close (timed out: not delimited)"
            response["body"] = bytes(stream.buf)
            stream.buf.clear()
    return response


def run_exchange(args, ctx, shape):
    """Sends the shape's bytes; returns (final responses, interim responses, closed, problems)."""
    problems = []
    plan = shape.send(ctx)
    if isinstance(plan, (bytes, bytearray)):
        plan = [bytes(plan)]
    try:
        stream = Stream(args.proxy_port, args.path, args.host, args.ca)
    except (OSError, Closed) as error:
        return [], [], True, [f"cannot open client connection: {error}"]
    interim, finals = [], []
    wanted = len(shape.statuses) if shape.statuses else 1
    methods = shape.methods or [m for m, _ in shape.origin] or ["GET"]
    closed_early = False
    try:
        for step in plan:
            if isinstance(step, (bytes, bytearray)):
                try:
                    stream.send(step)
                except OSError as error:
                    problems.append(f"send failed: {error}")
                    break
            elif isinstance(step, (int, float)):
                time.sleep(step)
            elif step[0] == "await100":
                try:
                    response = read_response(stream, "POST", time.monotonic() + 2.0)
                    (interim if response["status"] < 200 else finals).append(response)
                    if response["status"] >= 200:
                        break
                except (socket.timeout, Closed):
                    pass
            elif step[0] == "close":
                stream.close()
                closed_early = True
                break
        deadline = time.monotonic() + READ_TIMEOUT
        while not closed_early and len(finals) < wanted:
            method = methods[len(finals)] if len(finals) < len(methods) else "GET"
            try:
                response = read_response(stream, method, deadline)
            except socket.timeout:
                problems.append("timed out waiting for a response")
                break
            except Closed:
                break
            except (ValueError, IndexError) as error:
                problems.append(f"unparsable response: {error}")
                break
            if response["status"] < 200:
                interim.append(response)
            else:
                finals.append(response)
            if response["framing"].startswith("close") or response["framing"] == "bad-length":
                break
        # Anything more on the connection is a response nobody asked for (or the close we expect).
        closed = stream.eof or closed_early
        if not closed:
            leftover = bytes(stream.buf)
            try:
                stream.fill(time.monotonic() + (1.0 if shape.expect_close else EXTRA_PROBE))
                leftover = bytes(stream.buf)
            except Closed:
                closed = True
            except socket.timeout:
                pass
            if leftover:
                problems.append(f"unexpected bytes after the responses: {leftover[:80]!r}")
    finally:
        stream.close()
    if shape.expect_close and not closed:
        problems.append("the proxy kept the client connection open")
    return finals, interim, closed, problems


def canary(args, ctx, index):
    rest = b"canary-%d" % index
    target = ctx.origin_form(rest).decode()
    try:
        stream = Stream(args.proxy_port, args.path, args.host, args.ca)
    except (OSError, Closed) as error:
        return f"canary-{index}: cannot connect: {error}"
    try:
        stream.send(req(ctx, "GET", rest))
        response = read_response(stream, "GET", time.monotonic() + READ_TIMEOUT)
    except (socket.timeout, Closed, OSError, ValueError) as error:
        return f"canary-{index}: no response ({type(error).__name__})"
    finally:
        stream.close()
    body = response["body"]
    if response["status"] != 200 or not re.fullmatch(rb"ok \d+-\d+ GET " + re.escape(target.encode()) + rb"\n",
                                                     body):
        return f"canary-{index}: got {response['status']} {body[:80]!r}"
    return None


# ------------------------------------------------------------------ origin ---

class OriginLog:
    def __init__(self, path):
        self.path = path
        self.offset = os.path.getsize(path) if os.path.exists(path) else 0

    def entries(self, shape_id):
        prefix = f"/s/{shape_id}/"
        out = []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            for line in handle.read().split(b"\n"):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                target = entry.get("target", "")
                if target.startswith(prefix) and not target[len(prefix):].startswith("canary-"):
                    out.append(entry)
        return out


def describe(entry, shape_id):
    text = f"{entry.get('method', '?')} {entry.get('target', '?')}"
    if "error" in entry:
        return f"ERROR({text}): {entry['error']}"
    return text


def evaluate_origin(shape, entries, shape_id, ctx):
    """(ok, detail) for what the origin parsed."""
    prefix = f"/s/{shape_id}/"
    heads = [e for e in entries if e.get("phase") == "head"]
    entries = [e for e in entries if "phase" not in e]
    complete = [e for e in entries if "error" not in e]
    errors = [e for e in entries if "error" in e]
    seen = [(e["method"], e["target"]) for e in complete]
    expected = [(m, prefix + r) for m, r in shape.origin]
    details = []
    if seen != expected:
        details.append(f"origin parsed {seen!r}, expected {expected!r}")
    for error in errors:
        if not (shape.truncated_ok and error["error"].startswith("truncated")):
            details.append("origin framing error: " + describe(error, shape_id))
    finished = {(e.get("conn"), e.get("seq")) for e in entries}
    for head in heads:
        if (head["conn"], head["seq"]) not in finished:
            details.append(f"origin left mid-body: {head['method']} {head['target']} (conn {head['conn']})"
                           " never completed nor closed — upstream connection left open")
    if not details:
        for check in shape.checks:
            problem = check(complete, ctx)
            if problem:
                details.append(problem)
    return not details, details


# -------------------------------------------------------------------- run ---

def status_ok(expected, got):
    if expected == ANY:
        return True
    if isinstance(expected, (set, frozenset, tuple, list)):
        return got in expected
    return got == expected


def run_shape(args, log, shape):
    ctx = Ctx(args.path, args.host, shape.name)
    prefix = ctx.origin_form(b"").decode()
    started = time.monotonic()
    finals, interim, closed, problems = run_exchange(args, ctx, shape)
    statuses = [r["status"] for r in finals]
    status = statuses[0] if statuses else 0
    details = list(problems)
    status_good = status_ok(shape.status, status)
    if shape.statuses is not None and statuses != shape.statuses:
        status_good = False
        details.append(f"statuses {statuses}, expected {shape.statuses}")
    elif not status_good:
        details.append(f"status {status}, expected {shape.status}")
    if shape.statuses is None and len(finals) > 1:
        details.append(f"{len(finals)} responses to one request")
    # Responses to forwarded requests must name their own request, in order.
    checks_ok = status_good
    if status_good and shape.origin and shape.status != ANY:
        for response, (method, rest) in zip(finals, shape.origin):
            if response["status"] != 200 or method == "HEAD":
                continue
            pattern = rb"ok \d+-\d+ " + method.encode() + rb" " + re.escape((prefix + rest).encode()) + rb"\n"
            if not re.fullmatch(pattern, response["body"]):
                checks_ok = False
                details.append(f"response body {response['body'][:80]!r} does not name {method} {prefix + rest}")
        for response in finals:
            if response["framing"].startswith("close (timed out"):
                checks_ok = False
                details.append("response was not delimited (no Content-Length, not chunked, not closed)")
    for check in shape.resp_checks:
        problem = check(finals, interim)
        if problem:
            checks_ok = False
            details.append(problem)
    if problems:
        checks_ok = False
    if shape.settle:
        time.sleep(shape.settle)
    canary_problems = [p for p in (canary(args, ctx, k) for k in (1, 2)) if p]
    canaries_ok = not canary_problems
    details += canary_problems
    # The canaries went through the same origin after this shape's requests;
    # poll a little longer only when what the origin parsed does not match yet.
    # A shape that must not reach the origin gets a short settle first: a stray
    # request on another upstream connection may be logged after the canaries.
    if not shape.origin:
        time.sleep(EMPTY_SETTLE)
    poll_end = time.monotonic() + LOG_POLL
    while True:
        entries = log.entries(shape.name)
        origin_ok, origin_details = evaluate_origin(shape, entries, shape.name, ctx)
        if origin_ok or time.monotonic() > poll_end:
            break
        time.sleep(0.03)
    details += origin_details
    checks_ok = checks_ok and origin_ok
    ok = status_good and checks_ok and canaries_ok
    return {
        "name": shape.name,
        "path": args.path,
        "status": statuses if shape.statuses is not None else status,
        "expected_status": shape.statuses if shape.statuses is not None else (
            sorted(shape.status) if isinstance(shape.status, (set, frozenset)) else shape.status),
        "origin_saw": [describe(e, shape.name) for e in entries if "phase" not in e],
        "expected_origin": [f"{m} {prefix}{r}" for m, r in shape.origin],
        "checks_ok": checks_ok,
        "canaries_ok": canaries_ok,
        "ok": ok,
        "detail": "; ".join(details) + (f" [note: {shape.note}]" if shape.note and not ok else ""),
        "seconds": round(time.monotonic() - started, 3),
    }


def main():
    parser = argparse.ArgumentParser(description="HTTP/1.1 request-framing corpus through pinproxy")
    parser.add_argument("--proxy-port", type=int, required=True)
    parser.add_argument("--origin-log", required=True)
    parser.add_argument("--path", choices=("forward", "intercept"), required=True)
    parser.add_argument("--ca", default=None, help="the proxy's local CA (intercept path)")
    parser.add_argument("--host", default="httpbin.org")
    parser.add_argument("--only", default=None, help="comma-separated shape names")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--list", action="store_true", help="list the shapes of this path and exit")
    args = parser.parse_args()
    if args.path == "intercept" and not args.ca:
        parser.error("--ca is required for --path intercept")

    shapes = [s for s in build_shapes() if args.path in s.paths]
    names = [s.name for s in shapes]
    assert len(names) == len(set(names)), "duplicate shape names"
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(names)
        if unknown:
            parser.error(f"unknown shape(s) for this path: {', '.join(sorted(unknown))}")
        shapes = [s for s in shapes if s.name in wanted]
    if args.list:
        for shape in shapes:
            print(shape.name)
        return 0

    log = OriginLog(args.origin_log)
    results = []
    started = time.monotonic()
    width = max(len(s.name) for s in shapes)
    for shape in shapes:
        result = run_shape(args, log, shape)
        results.append(result)
        saw = ", ".join(result["origin_saw"]).replace(f"/s/{shape.name}/", "…/") or "-"
        print(f"{shape.name:<{width}} | {str(result['status']):<10} | {saw[:70]:<70} | "
              f"{'ok' if result['ok'] else 'FAIL'}", flush=True)
    failed = [r for r in results if not r["ok"]]
    print(f"\n{args.path}: {len(results) - len(failed)}/{len(results)} shapes ok "
          f"in {time.monotonic() - started:.1f} s")
    for result in failed:
        print(f"  FAIL {result['name']}: {result['detail']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
