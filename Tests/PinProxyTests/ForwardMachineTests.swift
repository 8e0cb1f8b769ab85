import PinConfig
import PinHTTP
import PinTrust
import XCTest

@testable import PinProxy

/// The forward session's protocol logic, driven directly: bytes and
/// upstream events in, actions out. No sockets, no loop.
final class ForwardMachineTests: XCTestCase {
  final class FakeUpstream: SameUpstream {
    func isSame(as other: FakeUpstream) -> Bool { self === other }
  }
  typealias Machine = ForwardMachine<FakeUpstream>

  static let config = """
    listeners:
      - name: forward
        address: 127.0.0.1:3128
        mode: forward
        intercept: false
        passthrough: ["pass.test"]
        allowedConnectPorts: [80, 443, 8080]
    domains:
      - domain: origin.test
        allowsInsecureHTTPLoads: true
    """

  func makeMachine() throws -> Machine {
    let configuration = try ConfigurationParser.parse(ForwardMachineTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    var machine = Machine(
      router: ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0]),
      limits: snapshot.httpLimits, clock: { 0 })
    machine.start()
    _ = actions(&machine)
    return machine
  }

  /// What the machine held when its actions named it, read as the session
  /// reads it: the bytes of each `writeClient` (by range: the test never
  /// empties the buffer, so ranges stay distinct), each exchange's sent
  /// request (by id), the last finished record.
  var written: [Range<Int>: [UInt8]] = [:]
  var sentRequests: [Int: ForwardedRequest] = [:]
  var finished: ExchangeRecord?

  func actions(_ machine: inout Machine) -> [Machine.Action] {
    var all: [Machine.Action] = []
    while let action = machine.nextAction() {
      switch action {
      case .writeClient(let range, _): written[range] = Array(machine.clientOutput[range])
      case .upstream(.sendHead(_, let id)):
        if let exchange = machine.exchange, exchange.exchange.id == id {
          sentRequests[id] = exchange.forwardedRequest
        }
      case .upstream(.record): finished = machine.takeFinishedRecord()
      default: break
      }
      all.append(action)
    }
    return all
  }

  func responseEvents(_ text: String, to method: String = "GET") throws -> [HTTP1Parser.Event] {
    var parser = HTTP1Parser(role: .response, limits: HTTPLimits(), pausesBetweenMessages: true)
    parser.expectResponse(to: method)
    return try parser.feed(Array(text.utf8))
  }

  /// Feeds a request and a fresh upstream; returns the upstream.
  func startExchange(_ machine: inout Machine, _ request: String, id: Int = 1) -> FakeUpstream {
    machine.clientRead(Array(request.utf8))
    _ = actions(&machine)
    let upstream = FakeUpstream()
    machine.upstreamReady(upstream, exchange: id, pooled: false, tls: .none, responseTimeout: 60)
    _ = actions(&machine)
    return upstream
  }

  func text(_ action: Machine.Action) -> String? {
    switch action {
    case .writeClient(let range, _):
      return written[range].map { String(decoding: $0, as: UTF8.self) }
    case .upstream(.sendBody(_, let bytes)):
      return String(decoding: bytes, as: UTF8.self)
    case .upstream(.sendHead(_, let id)):
      guard let request = sentRequests[id] else { return nil }
      // As the HTTP/1.1 link writes it.
      let bytes = ForwardedHead.request(
        request.head, target: request.path, authority: request.authority, via: request.via)
      return String(decoding: bytes, as: UTF8.self)
    default: return nil
    }
  }

  func testARequestAcquiresAnUpstreamAndSendsAReframedHead() throws {
    var machine = try makeMachine()
    machine.clientRead(
      Array("GET http://origin.test/a?b HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\n\r\n".utf8))
    let first = actions(&machine)
    guard
      case .upstream(.acquireUpstream(let poolAllowed)) = first.first(where: {
        if case .upstream(.acquireUpstream) = $0 { true } else { false }
      }), let target = machine.exchange?.exchange.target
    else {
      return XCTFail("no upstream acquired: \(first)")
    }
    XCTAssertEqual(machine.exchange?.exchange.id, 1)
    XCTAssertTrue(poolAllowed)
    XCTAssertEqual(target.key.description, "origin.test:80")
    XCTAssertFalse(target.key.tls, "the rule allows insecure loads")
    let upstream = FakeUpstream()
    machine.upstreamReady(upstream, exchange: 1, pooled: false, tls: .none, responseTimeout: 60)
    let sent = actions(&machine).compactMap { action -> String? in
      if case .upstream(.sendHead(let to, _)) = action, to === upstream { return text(action) }
      return nil
    }
    XCTAssertEqual(sent.count, 1)
    XCTAssertTrue(sent[0].hasPrefix("GET /a?b HTTP/1.1\r\n"), sent[0])
    XCTAssertTrue(sent[0].contains("Host: origin.test\r\n"), sent[0])
    XCTAssertFalse(sent[0].contains("Proxy-Connection"), sent[0])
  }

  func testInterimResponsesAreRelayedAndDoNotEndTheExchange() throws {
    var machine = try makeMachine()
    let upstream = startExchange(&machine, "GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n")
    let events = try responseEvents(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    )
    machine.upstreamEvents(events, from: upstream, draining: false)
    let out = actions(&machine)
    let written = out.compactMap { action -> String? in
      if case .writeClient = action { return text(action) }
      return nil
    }.joined()
    XCTAssertTrue(written.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"), written)
    XCTAssertTrue(written.contains("HTTP/1.1 200 OK\r\n"))
    XCTAssertTrue(written.hasSuffix("\r\n\r\nok"), written)
    XCTAssertTrue(
      out.contains {
        if case .upstream(.releaseUpstream(let pooled)) = $0 { pooled === upstream } else { false }
      })
    XCTAssertTrue(
      out.contains {
        if case .upstream(.record) = $0, let record = finished {
          record.status == 200 && record.responseBytes == 2
        } else {
          false
        }
      })
    XCTAssertTrue(machine.headDeadlineIsIdle, "the idle wait follows a response")
    XCTAssertEqual(machine.headDeadline, Deadline(seconds: TimeoutsConfig().idleKeepAlive, from: 0))
    XCTAssertTrue(machine.isIdleBetweenRequests)
  }

  func testAPooledConnectionThatClosesIsRetriedOnceOnAFreshDial() throws {
    var machine = try makeMachine()
    machine.clientRead(Array("GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
    _ = actions(&machine)
    let pooled = FakeUpstream()
    machine.upstreamReady(pooled, exchange: 1, pooled: true, tls: .none, responseTimeout: 60)
    _ = actions(&machine)
    machine.upstreamClosed(pooled, failure: nil, mayRetry: true)
    let retry = actions(&machine)
    XCTAssertTrue(
      retry.contains { if case .upstream(.acquireUpstream(poolAllowed: false)) = $0 { true } else { false } },
      "\(retry)")
    XCTAssertEqual(machine.exchange?.exchange.id, 1, "the same exchange, dialled afresh")
    XCTAssertFalse(retry.contains { if case .refuse = $0 { true } else { false } })
    // The fresh connection closing too is the origin's answer: a 502.
    let fresh = FakeUpstream()
    machine.upstreamReady(fresh, exchange: 1, pooled: false, tls: .none, responseTimeout: 60)
    _ = actions(&machine)
    machine.upstreamClosed(fresh, failure: nil, mayRetry: false)
    let refusal = actions(&machine).compactMap { action -> Machine.Refusal? in
      if case .refuse(let refusal) = action { return refusal }
      return nil
    }
    XCTAssertEqual(refusal.first?.failure.status, 502)
    XCTAssertEqual(refusal.first?.failure.code, .upstreamUnreachable)
    XCTAssertEqual(refusal.first?.site, "origin.test:80")
  }

  func testAPipelinedRequestWaitsUntilTheExchangeBeforeItIsDone() throws {
    var machine = try makeMachine()
    let two =
      "GET http://origin.test/1 HTTP/1.1\r\nHost: x\r\n\r\nGET http://origin.test/2 HTTP/1.1\r\nHost: x\r\n\r\n"
    machine.clientRead(Array(two.utf8))
    let first = actions(&machine)
    XCTAssertEqual(first.filter { if case .upstream(.acquireUpstream) = $0 { true } else { false } }.count, 1)
    XCTAssertTrue(
      first.contains { if case .pauseClient = $0 { true } else { false } }, "reading stops: \(first)")
    let upstream = FakeUpstream()
    machine.upstreamReady(upstream, exchange: 1, pooled: false, tls: .none, responseTimeout: 60)
    _ = actions(&machine)
    machine.upstreamEvents(
      try responseEvents("HTTP/1.1 204 No Content\r\n\r\n"), from: upstream, draining: false)
    let next = actions(&machine)
    XCTAssertTrue(
      next.contains { if case .upstream(.acquireUpstream) = $0 { true } else { false } }, "\(next)")
    XCTAssertEqual(machine.exchange?.exchange.id, 2)
    XCTAssertEqual(machine.exchange?.exchange.target.path, "/2")
  }

  /// A machine that served a request, parsed a pipelined one it never
  /// served and part of a third, framed a response and queued actions.
  func usedMachine() throws -> Machine {
    var machine = try makeMachine()
    let upstream = startExchange(
      &machine,
      "GET http://origin.test/1 HTTP/1.1\r\nHost: x\r\n\r\nGET http://origin.test/left HTTP/1.1\r\nHost: x\r\n\r\nGE"
    )
    machine.upstreamEvents(
      try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), from: upstream, draining: false)
    return machine
  }

  /// What a machine does serving a new connection's first request.
  func serve(_ machine: inout Machine) throws -> [String] {
    machine.start()
    let upstream = startExchange(&machine, "GET http://origin.test/new HTTP/1.1\r\nHost: x\r\n\r\n")
    machine.upstreamEvents(
      try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew"), from: upstream, draining: false)
    return actions(&machine).compactMap { text($0) ?? String(describing: $0) }
  }

  /// A machine built on the storage an ended one handed back — which had
  /// parsed a pipelined request it never served, framed a response and queued
  /// actions — serves exactly as a new one does: nothing of the old
  /// connection is left in it.
  func testAMachineOnHandedBackStorageServesAsANewOne() throws {
    var old = try usedMachine()
    let storage = old.surrenderStorage()

    let configuration = try ConfigurationParser.parse(ForwardMachineTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    func machine(_ storage: Machine.Storage?) -> Machine {
      Machine(
        router: ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0]),
        limits: snapshot.httpLimits, clock: { 0 }, storage: storage)
    }
    var recycled = machine(storage)
    var fresh = machine(nil)
    XCTAssertEqual(try serve(&recycled), try serve(&fresh))
    XCTAssertEqual(recycled.exchange?.exchange.target.path, fresh.exchange?.exchange.target.path)
    XCTAssertTrue(recycled.pending.isEmpty, "the old connection's pipelined request is gone")
  }

  /// A machine reopened for its session's next connection reads, field by
  /// field, as a new one does (its storage's capacity aside), and serves as
  /// one: a field `reopen` forgot to reset would carry the old connection's
  /// state (a credential, a deadline, a pipelined request) into the next.
  func testAReopenedMachineReadsAndServesAsANewOne() throws {
    var old = try usedMachine()
    let configuration = try ConfigurationParser.parse(ForwardMachineTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 2)
    let router = ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
    old.reopen(router: router, limits: snapshot.httpLimits, timeouts: snapshot.timeouts, client: "next")
    var fresh = Machine(
      router: router, limits: snapshot.httpLimits, timeouts: snapshot.timeouts, client: "next", clock: { 0 })
    XCTAssertTrue(old.pending.isEmpty && old.actions.isEmpty && old.exchangeActions.isEmpty)
    let kept: Set<String> = ["clock", "pending", "actions", "exchangeActions"]
    let fields = Mirror(reflecting: fresh).children.compactMap { $0.label }.filter { !kept.contains($0) }
    XCTAssertGreaterThan(fields.count, 15)
    func value(_ machine: Machine, _ label: String) -> String {
      String(describing: Mirror(reflecting: machine).children.first { $0.label == label }!.value)
    }
    for field in fields { XCTAssertEqual(value(old, field), value(fresh, field), field) }

    XCTAssertEqual(try serve(&old), try serve(&fresh))
  }

  func testDrainClosesAnIdleConnectionButLetsAnExchangeFinishWithClose() throws {
    var idle = try makeMachine()
    idle.drain()
    XCTAssertTrue(actions(&idle).contains { if case .close = $0 { true } else { false } })

    var busy = try makeMachine()
    let upstream = startExchange(&busy, "GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n")
    busy.drain()
    XCTAssertFalse(actions(&busy).contains { if case .close = $0 { true } else { false } })
    busy.upstreamEvents(
      try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), from: upstream, draining: true)
    let out = actions(&busy)
    let head = out.compactMap { action -> String? in
      if case .writeClient = action { text(action) } else { nil }
    }.joined()
    XCTAssertTrue(head.contains("Connection: close\r\n"), head)
    XCTAssertTrue(out.contains { if case .closeAfterFlush = $0 { true } else { false } })
  }

  func testABodyThatBreaksFramingMidStreamClosesTheUpstreamAndIsRefused() throws {
    var machine = try makeMachine()
    let upstream = startExchange(
      &machine,
      "POST http://origin.test/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
    machine.clientRead(Array("zz\r\n".utf8))
    let out = actions(&machine)
    XCTAssertTrue(
      out.contains {
        if case .upstream(.closeUpstream(let closed)) = $0 { closed === upstream } else { false }
      })
    XCTAssertTrue(
      out.contains { if case .refuse(let refusal) = $0 { refusal.failure.status == 400 } else { false } })
    XCTAssertFalse(
      out.contains {
        switch $0 {
        case .upstream(.sendHead), .upstream(.sendBody), .upstream(.endBody): true
        default: false
        }
      }, "nothing more goes upstream")
  }

  func testTimersAndDialsForAnotherExchangeAreIgnored() throws {
    var machine = try makeMachine()
    machine.clientRead(Array("GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
    _ = actions(&machine)
    // No upstream yet, so no response deadline: a timer now says nothing.
    XCTAssertNil(machine.responseDeadline)
    machine.responseDeadlineReached(now: .max)
    machine.dialFailed(.unreachable("late"), exchange: 7)
    XCTAssertTrue(actions(&machine).isEmpty)
    let stale = FakeUpstream()
    machine.upstreamReady(stale, exchange: 7, pooled: false, tls: .none, responseTimeout: 60)
    let out = actions(&machine)
    XCTAssertTrue(
      out.contains { if case .upstream(.closeUpstream(let closed)) = $0 { closed === stale } else { false } })
  }

  func testAPartialHeadWhenTheTimerFiresIsA408() throws {
    var machine = try makeMachine()
    machine.clientRead(Array("GET http://origin.test/ HTTP/1.1\r\nHo".utf8))
    _ = actions(&machine)
    let deadline = try XCTUnwrap(machine.nextDeadline, "part of a head is awaited")
    XCTAssertEqual(deadline.seconds, TimeoutsConfig().clientHeader)
    machine.timeout(now: deadline.at - 1)
    XCTAssertTrue(actions(&machine).isEmpty, "a timer early answers nothing")
    machine.timeout(now: deadline.at)
    let out = actions(&machine)
    XCTAssertTrue(
      out.contains { if case .refuse(let refusal) = $0 { refusal.failure.status == 408 } else { false } })
    XCTAssertNil(machine.headDeadline)
  }

  func testResponseBodyWritesAskForUpstreamBackPressure() throws {
    var machine = try makeMachine()
    let upstream = startExchange(&machine, "GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n")
    machine.upstreamEvents(
      try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), from: upstream,
      draining: false)
    let out = actions(&machine)
    XCTAssertTrue(
      out.contains { action in
        if case .writeClient(let range, let pausing?) = action {
          return pausing === upstream && written[range] == Array("hello".utf8)
        }
        return false
      }, "\(out)")
    XCTAssertFalse(
      out.contains { if case .upstream(.releaseUpstream) = $0 { true } else { false } },
      "the response is not over")
  }

  /// The deadlines over keep-alive and pipelined requests, read after each
  /// turn as the session reads them: the head's while a request is
  /// awaited (never while an exchange runs), the response deadline from the
  /// upstream's readiness to the response head, and the earliest of them
  /// is what the session's timer follows.
  func testTheDeadlinesFollowEachRequestAndNeverOverlap() throws {
    var machine = try makeMachine()
    let idle = Deadline(seconds: TimeoutsConfig().idleKeepAlive, from: 0)
    XCTAssertEqual(machine.nextDeadline?.seconds, TimeoutsConfig().clientHeader, "the first head is awaited")
    let ok = try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    for id in 1...3 {
      // A whole head in one read, as a keep-alive client sends it.
      machine.clientRead(Array("GET http://origin.test/\(id) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
      _ = actions(&machine)
      XCTAssertNil(machine.headDeadline, "a request is here")
      XCTAssertNil(machine.responseDeadline, "nothing is upstream yet")
      let upstream = FakeUpstream()
      machine.upstreamReady(upstream, exchange: id, pooled: id > 1, tls: .none, responseTimeout: 5)
      _ = actions(&machine)
      XCTAssertEqual(machine.nextDeadline, Deadline(seconds: 5, from: 0), "the machine's clock reads 0")
      XCTAssertNil(machine.headDeadline)
      machine.upstreamEvents(ok, from: upstream, draining: false)
      _ = actions(&machine)
      XCTAssertNil(machine.responseDeadline, "the head ended the wait")
      XCTAssertEqual(machine.nextDeadline, idle, "the idle wait follows the response")
      XCTAssertTrue(machine.headDeadlineIsIdle)
    }
    // Two pipelined requests: the second begins in the turn the first ends.
    machine.clientRead(
      Array(
        "GET http://origin.test/4 HTTP/1.1\r\nHost: x\r\n\r\nGET http://origin.test/5 HTTP/1.1\r\nHost: x\r\n\r\n"
          .utf8))
    _ = actions(&machine)
    let fourth = FakeUpstream()
    machine.upstreamReady(fourth, exchange: 4, pooled: true, tls: .none, responseTimeout: 5)
    _ = actions(&machine)
    machine.upstreamEvents(ok, from: fourth, draining: false)
    let handOver = actions(&machine)
    XCTAssertTrue(handOver.contains { if case .upstream(.acquireUpstream) = $0 { true } else { false } })
    XCTAssertNil(machine.nextDeadline, "a request already here waits for nothing but its upstream")
  }

  /// A head that arrives in parts replaces the idle wait with the header one.
  func testAPartialHeadAfterAnExchangeAwaitsTheRestWithinTheHeaderWait() throws {
    var machine = try makeMachine()
    let upstream = startExchange(&machine, "GET http://origin.test/ HTTP/1.1\r\nHost: x\r\n\r\n")
    machine.upstreamEvents(
      try responseEvents("HTTP/1.1 204 No Content\r\n\r\n"), from: upstream, draining: false)
    _ = actions(&machine)
    XCTAssertTrue(machine.headDeadlineIsIdle)
    machine.clientRead(Array("GET http://origin.test/ HT".utf8))
    _ = actions(&machine)
    XCTAssertFalse(machine.headDeadlineIsIdle)
    XCTAssertEqual(machine.headDeadline, Deadline(seconds: TimeoutsConfig().clientHeader, from: 0))
    machine.clientRead(Array("TP/1.1\r\nHost: x\r\n\r\n".utf8))
    _ = actions(&machine)
    XCTAssertNil(machine.headDeadline, "the whole head is here")
  }

  func testAPassthroughConnectPausesAndHandsTheBytesAfterTheHeadToTheSplice() throws {
    var machine = try makeMachine()
    machine.clientRead(
      Array("CONNECT pass.test:443 HTTP/1.1\r\nHost: pass.test:443\r\n\r\n\u{16}\u{03}\u{01}".utf8))
    let out = actions(&machine)
    XCTAssertTrue(out.contains { if case .pauseClient = $0 { true } else { false } })
    XCTAssertTrue(
      out.contains {
        if case .openPassthrough(let target) = $0 { target.key.description == "pass.test:443" } else { false }
      })
    let opened = machine.passthroughReady()
    XCTAssertEqual(opened?.early, [0x16, 0x03, 0x01])
    guard case .spliced = machine.state else { return XCTFail("not spliced: \(machine.state)") }
  }

  /// A SOCKS5 CONNECT reaches the machine typed: routed as the CONNECT it
  /// stands for, with what the client sent after its request handed to
  /// the splice, and no HTTP text parsed on the way.
  func testATypedTunnelRequestIsRoutedAsItsConnectAndKeepsItsEarlyBytes() throws {
    var machine = try makeMachine()
    let host = try XCTUnwrap(TrustHost("pass.test"))
    machine.openTunnel(TunnelRequest(host: host, port: 443, credential: nil, early: [0x16, 0x03]))
    let out = actions(&machine)
    XCTAssertTrue(out.contains { if case .pauseClient = $0 { true } else { false } }, "\(out)")
    XCTAssertTrue(
      out.contains {
        if case .openPassthrough(let target) = $0 { target.key.description == "pass.test:443" } else { false }
      }, "\(out)")
    XCTAssertEqual(machine.passthroughReady()?.early, [0x16, 0x03])
    guard case .spliced = machine.state else { return XCTFail("not spliced: \(machine.state)") }

    var refused = try makeMachine()
    refused.openTunnel(TunnelRequest(host: host, port: 25, credential: nil, early: []))
    let refusal = actions(&refused).compactMap { if case .refuse(let refusal) = $0 { refusal } else { nil } }
    XCTAssertEqual(refusal.first?.failure.status, 403)
    XCTAssertEqual(refusal.first?.method, "CONNECT")
    XCTAssertEqual(refusal.first?.site, "pass.test:25")
  }

  func testAConnectToAPortNotAllowedIsRefused() throws {
    var machine = try makeMachine()
    machine.clientRead(Array("CONNECT pass.test:25 HTTP/1.1\r\nHost: pass.test:25\r\n\r\n".utf8))
    let out = actions(&machine)
    XCTAssertTrue(
      out.contains { if case .refuse(let refusal) = $0 { refusal.failure.status == 403 } else { false } })
    XCTAssertFalse(out.contains { if case .openPassthrough = $0 { true } else { false } })
  }
}

extension ForwardMachine {
  /// The session hands the machine its channel's reused read buffer; these
  /// tests hold their requests as arrays.
  mutating func clientRead(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { clientRead($0) }
  }
}
