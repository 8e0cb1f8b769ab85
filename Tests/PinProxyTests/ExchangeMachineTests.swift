import PinConfig
import PinHTTP
import XCTest

@testable import PinProxy

/// The exchange machine alone, sans I/O: what happened goes in (upstream
/// ready or closed, request body, response events, the timer), actions come
/// out. The same machine serves an HTTP/1.1 request and an h2 stream, so
/// every decision it owns — the Via, retry once, release or close, the
/// timeout's text, refusals — is pinned here once for both.
final class ExchangeMachineTests: XCTestCase {
  final class FakeUpstream: SameUpstream {
    func isSame(as other: FakeUpstream) -> Bool { self === other }
  }
  typealias Machine = ExchangeMachine<FakeUpstream>
  typealias Action = ExchangeAction<FakeUpstream>

  /// The response deadline the tests' upstreams come with: 60 s from an
  /// arbitrary start, and the moment it passes.
  let deadline = Deadline(seconds: 60, from: 1_000)
  var passed: UInt64 { deadline.at }

  static let config = """
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward}
    domains:
      - {domain: origin.test, allowsInsecureHTTPLoads: true}
    """

  /// A machine for `request` (HTTP/1.1 text, absolute-form), routed as the
  /// forward listener routes it.
  func makeMachine(_ request: String, client: WireProtocol = .http1) throws -> Machine {
    let configuration = try ConfigurationParser.parse(Self.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    var router = ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
    var parser = HTTP1Parser(role: .request, limits: HTTPLimits(), pausesBetweenMessages: true)
    guard case .request(let head)? = try parser.feed(Array(request.utf8)).first,
      case .forward(let target) = router.route(head, inside: nil)
    else { throw HTTPParseError(.badRequest, "not a routable request: \(request)") }
    return Machine(Exchange(id: 1, request: head, target: target, clientProtocol: client, started: 0))
  }

  static let get = "GET http://origin.test/a?b HTTP/1.1\r\nHost: x\r\n\r\n"
  static let post = "POST http://origin.test/up HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n"

  /// What the machine held when it named them, as an executor reads them:
  /// the request of the last `sendHead`, the head of the last
  /// `respondHead`, the last `record`.
  var sentRequest: ForwardedRequest?
  var respondedHead: HTTPResponseHead?
  var recorded: ExchangeRecord?

  /// Feeds one event; returns what the machine asked for.
  func run(_ machine: inout Machine, _ event: (inout Machine, inout Machine.Actions) -> Void) -> [Action] {
    var out = Machine.Actions()
    event(&machine, &out)
    var all: [Action] = []
    while let action = out.popFirst() {
      switch action {
      case .upstream(.sendHead(_, let id)):
        XCTAssertEqual(id, machine.exchange.id)
        sentRequest = machine.forwardedRequest
      case .response(.respondHead): respondedHead = machine.takeResponseHead()
      case .upstream(.record): recorded = machine.record
      default: break
      }
      all.append(action)
    }
    return all
  }

  /// Starts the exchange and gives it `upstream`; returns the actions of the `upstreamReady`.
  @discardableResult
  func connect(_ machine: inout Machine, _ upstream: FakeUpstream, client: WireProtocol = .http1)
    -> [Action]
  {
    if machine.isWaiting { _ = run(&machine) { $0.start(&$1) } }
    return run(&machine) {
      $0.upstreamReady(upstream, pooled: false, tls: .none, protocol: .http1, responseDeadline: deadline, &$1)
    }
  }

  func responseEvents(_ text: String, to method: String = "GET") throws -> [HTTP1Parser.Event] {
    var parser = HTTP1Parser(role: .response, limits: HTTPLimits())
    parser.expectResponse(to: method)
    return try parser.feed(Array(text.utf8))
  }

  /// One word per action (with its payload where that is what a test checks),
  /// so that order and content read as one list.
  func describe(_ actions: [Action]) -> [String] {
    actions.map { action in
      switch action {
      case .upstream(.acquireUpstream(let poolAllowed)): return poolAllowed ? "acquire" : "acquire-fresh"
      case .upstream(.sendHead): return "sendHead"
      case .upstream(.sendBody(_, let bytes)): return "sendBody:" + String(decoding: bytes, as: UTF8.self)
      case .upstream(.endBody(_, let trailers)): return trailers.count == 0 ? "endBody" : "endBody+trailers"
      case .upstream(.releaseUpstream): return "release"
      case .upstream(.closeUpstream): return "close"
      case .response(.respondInterim(let head)): return "interim:\(head.status)"
      case .response(.respondHead): return "head:\(respondedHead?.status ?? 0)"
      case .response(.respondBody(let bytes, _)): return "body:" + String(decoding: bytes, as: UTF8.self)
      case .response(.respondEnd(let trailers, _)): return trailers.count == 0 ? "end" : "end+trailers"
      case .upstream(.record):
        guard let record = recorded else { return "record:none" }
        return "record:\(record.status)/\(record.requestBodyBytes)/\(record.responseBytes)"
      case .response(.refuse(let failure)): return "refuse:\(failure.status) \(failure.code.rawValue)"
      case .response(.cutShort): return "cutShort"
      case .response(.finished): return "finished"
      }
    }
  }

  func refusal(in actions: [Action]) -> ProxyFailure? {
    for case .response(.refuse(let failure)) in actions { return failure }
    return nil
  }

  // MARK: Request

  func testReadySendsTheHeadWithTheViaOfTheClientsProtocol() throws {
    for (client, via) in [(WireProtocol.http1, "1.1 pinproxy"), (.http2, "2 pinproxy")] {
      var machine = try makeMachine(Self.get, client: client)
      XCTAssertEqual(describe(run(&machine) { $0.start(&$1) }), ["acquire"])
      let upstream = FakeUpstream()
      let out = run(&machine) {
        $0.upstreamReady(
          upstream, pooled: true, tls: .none, protocol: .http2, responseDeadline: deadline, &$1)
      }
      XCTAssertEqual(describe(out), ["sendHead"], "a GET has no body to end")
      XCTAssertEqual(machine.responseDeadline, deadline, "the response head is awaited from now")
      guard
        case .upstream(.sendHead(let to, _))? = out.first(where: {
          if case .upstream(.sendHead) = $0 { true } else { false }
        }), let request = sentRequest
      else { return XCTFail("no head sent") }
      XCTAssertTrue(to === upstream)
      XCTAssertEqual(request.via, via, "Via names the protocol the client spoke (\(client))")
      XCTAssertEqual(request.path, "/a?b")
      XCTAssertEqual(request.authority, "origin.test")
      XCTAssertTrue(machine.isServed(by: upstream))
      XCTAssertTrue(machine.exchange.upstreamWasPooled)
      XCTAssertEqual(machine.exchange.upstreamProtocol, .http2)
    }
  }

  func testBodyHeldBeforeReadyFollowsTheHeadInOrderAndThenEnds() throws {
    var machine = try makeMachine(Self.post, client: .http2)
    // Routed and waiting (an h2 stream holding its body), then acquiring:
    // nothing goes anywhere until the upstream is ready.
    XCTAssertTrue(run(&machine) { $0.requestBody(Array("abc".utf8), &$1) }.isEmpty)
    XCTAssertEqual(describe(run(&machine) { $0.start(&$1) }), ["acquire"])
    XCTAssertTrue(run(&machine) { $0.requestBody(Array("de".utf8), &$1) }.isEmpty)
    XCTAssertTrue(run(&machine) { $0.requestBody(Array("f".utf8), &$1) }.isEmpty)
    XCTAssertTrue(run(&machine) { $0.requestEnd(HTTPHeaders(), &$1) }.isEmpty)
    let out = run(&machine) {
      $0.upstreamReady(
        FakeUpstream(), pooled: false, tls: .none, protocol: .http1, responseDeadline: deadline, &$1)
    }
    XCTAssertEqual(
      describe(out),
      ["sendHead", "sendBody:abc", "sendBody:de", "sendBody:f", "endBody"])
    XCTAssertEqual(machine.exchange.requestBodyBytes, 6)
  }

  func testTrailersThatEndedTheRequestEarlyGoWithItsEnd() throws {
    var machine = try makeMachine(
      "POST http://origin.test/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", client: .http2)
    _ = run(&machine) { $0.start(&$1) }
    _ = run(&machine) { $0.requestBody(Array("xy".utf8), &$1) }
    _ = run(&machine) { $0.requestEnd(HTTPHeaders([("Checksum", "1")]), &$1) }
    let out = run(&machine) {
      $0.upstreamReady(
        FakeUpstream(), pooled: false, tls: .none, protocol: .http2, responseDeadline: deadline, &$1)
    }
    XCTAssertEqual(describe(out), ["sendHead", "sendBody:xy", "endBody+trailers"])
  }

  func testBodyAfterReadyGoesStraightUpstreamAndItsEndOnce() throws {
    var machine = try makeMachine(Self.post)
    let upstream = FakeUpstream()
    XCTAssertEqual(describe(connect(&machine, upstream)), ["sendHead"])
    XCTAssertEqual(describe(run(&machine) { $0.requestBody(Array("abcdef".utf8), &$1) }), ["sendBody:abcdef"])
    XCTAssertEqual(describe(run(&machine) { $0.requestEnd(HTTPHeaders(), &$1) }), ["endBody"])
    XCTAssertTrue(run(&machine) { $0.requestEnd(HTTPHeaders(), &$1) }.isEmpty, "a second end is ignored")
  }

  // MARK: Response

  func testACompleteResponseIsRelayedThenTheUpstreamReleasedAndRecorded() throws {
    var machine = try makeMachine(Self.get)
    let upstream = FakeUpstream()
    connect(&machine, upstream)
    _ = run(&machine) { $0.requestEnd(HTTPHeaders(), &$1) }
    let events = try responseEvents(
      "HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    let out = run(&machine) { $0.upstreamEvents(events, from: upstream, &$1) }
    XCTAssertEqual(
      describe(out),
      [
        "interim:103", "head:200", "body:hello", "end", "release", "record:200/0/5",
        "finished",
      ])
    XCTAssertTrue(machine.isDone)
    XCTAssertNil(machine.responseDeadline, "the final head ended the wait")
    XCTAssertTrue(
      out.contains {
        if case .upstream(.releaseUpstream(let released)) = $0 { released === upstream } else { false }
      })
  }

  func testChunkedResponseTrailersReachTheEnd() throws {
    var machine = try makeMachine(Self.get)
    let upstream = FakeUpstream()
    connect(&machine, upstream)
    _ = run(&machine) { $0.requestEnd(HTTPHeaders(), &$1) }
    let events = try responseEvents(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nGrpc-Status: 0\r\n\r\n"
    )
    XCTAssertEqual(
      describe(run(&machine) { $0.upstreamEvents(events, from: upstream, &$1) }),
      [
        "head:200", "body:abc", "body:de", "end+trailers", "release",
        "record:200/0/5", "finished",
      ])
  }

  func testTheUpstreamIsClosedWhenTheOriginSaidCloseOrTheRequestIsIncomplete() throws {
    // The origin said it closes: the connection is not reused.
    var closing = try makeMachine(Self.get)
    let first = FakeUpstream()
    connect(&closing, first)
    _ = run(&closing) { $0.requestEnd(HTTPHeaders(), &$1) }
    let said = try responseEvents("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    let closed = describe(run(&closing) { $0.upstreamEvents(said, from: first, &$1) })
    XCTAssertTrue(closed.contains("close") && !closed.contains("release"), "\(closed)")
    XCTAssertTrue(closed.contains("record:200/0/2"), "\(closed)")

    // The origin answered before the request body was all sent: the
    // connection is mid-request, never reusable.
    var early = try makeMachine(Self.post)
    let second = FakeUpstream()
    connect(&early, second)
    _ = run(&early) { $0.requestBody(Array("abc".utf8), &$1) }
    let answer = try responseEvents("HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n")
    let out = describe(run(&early) { $0.upstreamEvents(answer, from: second, &$1) })
    XCTAssertTrue(out.contains("close") && !out.contains("release"), "\(out)")
    XCTAssertTrue(out.contains("record:413/3/0"), "\(out)")
    XCTAssertEqual(out.last, "finished")
  }

  // MARK: Upstream closing

  func testAnUpstreamClosedBeforeTheResponseIsRetriedOnceOnAFreshConnection() throws {
    var machine = try makeMachine(Self.get)
    let pooled = FakeUpstream()
    connect(&machine, pooled)
    XCTAssertEqual(
      describe(run(&machine) { $0.upstreamClosed(pooled, failure: nil, mayRetry: true, &$1) }),
      ["acquire-fresh"])
    XCTAssertNil(machine.responseDeadline, "a fresh dial is not waiting for a response")
    let fresh = FakeUpstream()
    XCTAssertEqual(describe(connect(&machine, fresh)), ["sendHead"])
    // The retry closing too is the origin's answer, even if it may be retried.
    let out = run(&machine) { $0.upstreamClosed(fresh, failure: nil, mayRetry: true, &$1) }
    XCTAssertEqual(describe(out), ["refuse:502 upstream-unreachable"])
    XCTAssertEqual(refusal(in: out)?.reason, "origin.test:80 closed the connection without a response")
    XCTAssertTrue(machine.isDone)
  }

  func testNoRetryWhenNotAllowedOrOnceABodyByteWasSent() throws {
    // Not allowed: the failure given is the answer.
    var fresh = try makeMachine(Self.get)
    let first = FakeUpstream()
    connect(&fresh, first)
    let broke = run(&fresh) {
      $0.upstreamClosed(
        first, failure: .unreachable("origin.test:80 reset the connection"), mayRetry: false, &$1)
    }
    XCTAssertEqual(describe(broke), ["refuse:502 upstream-unreachable"])
    XCTAssertEqual(refusal(in: broke)?.reason, "origin.test:80 reset the connection")

    // Allowed, but part of the body went: it cannot be sent again.
    var upload = try makeMachine(Self.post)
    let second = FakeUpstream()
    connect(&upload, second)
    _ = run(&upload) { $0.requestBody(Array("a".utf8), &$1) }
    let out = run(&upload) { $0.upstreamClosed(second, failure: nil, mayRetry: true, &$1) }
    XCTAssertEqual(describe(out), ["refuse:502 upstream-unreachable"])
    XCTAssertEqual(refusal(in: out)?.reason, "origin.test:80 closed the connection without a response")
  }

  func testAnUpstreamClosedAfterTheResponseStartedCutsItShort() throws {
    var machine = try makeMachine(Self.get)
    let upstream = FakeUpstream()
    connect(&machine, upstream)
    let events = try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel")
    XCTAssertEqual(
      describe(run(&machine) { $0.upstreamEvents(events, from: upstream, &$1) }),
      ["head:200", "body:hel"])
    XCTAssertEqual(
      describe(run(&machine) { $0.upstreamClosed(upstream, failure: nil, mayRetry: true, &$1) }),
      ["cutShort"], "neither a retry nor a refusal once the head went out")
    XCTAssertTrue(machine.isDone)
  }

  // MARK: Timer, dial and stale upstreams

  func testTheResponseTimerRefusesWithAn504NamingTheWait() throws {
    var machine = try makeMachine(Self.get)
    XCTAssertTrue(run(&machine) { $0.timeout(now: passed, &$1) }.isEmpty, "not sent upstream yet")
    XCTAssertNil(machine.responseDeadline)
    let upstream = FakeUpstream()
    connect(&machine, upstream)
    XCTAssertTrue(run(&machine) { $0.timeout(now: passed - 1, &$1) }.isEmpty, "a timer early is nothing")
    XCTAssertEqual(machine.responseDeadline, deadline)
    let out = run(&machine) { $0.timeout(now: passed, &$1) }
    XCTAssertEqual(describe(out), ["close", "refuse:504 upstream-timeout"])
    XCTAssertEqual(refusal(in: out)?.reason, "origin.test:80 sent no response within 60.0 s")
    XCTAssertNil(machine.responseDeadline, "a refused exchange waits for nothing")

    // Once the response head came, the timer has nothing to say.
    var started = try makeMachine(Self.get)
    let other = FakeUpstream()
    connect(&started, other)
    let head = try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
    _ = run(&started) { $0.upstreamEvents(head, from: other, &$1) }
    XCTAssertNil(started.responseDeadline, "the head ends the wait")
    XCTAssertTrue(run(&started) { $0.timeout(now: passed, &$1) }.isEmpty)
  }

  func testAnInterimResponseDoesNotStopTheClock() throws {
    var machine = try makeMachine(Self.get)
    let upstream = FakeUpstream()
    connect(&machine, upstream)
    let interim = try responseEvents("HTTP/1.1 103 Early Hints\r\n\r\n")
    XCTAssertEqual(
      describe(run(&machine) { $0.upstreamEvents(interim, from: upstream, &$1) }), ["interim:103"])
    XCTAssertEqual(machine.responseDeadline, deadline, "a 1xx is not the head awaited")
    let out = run(&machine) { $0.timeout(now: passed, &$1) }
    XCTAssertEqual(refusal(in: out)?.status, 504)
  }

  func testADialFailureCountsOnlyWhileConnecting() throws {
    var machine = try makeMachine(Self.get)
    XCTAssertTrue(run(&machine) { $0.dialFailed(.unreachable("early"), &$1) }.isEmpty, "not acquiring yet")
    _ = run(&machine) { $0.start(&$1) }
    let failed = run(&machine) { $0.dialFailed(.cannotConnect("origin.test:80", detail: "refused"), &$1) }
    XCTAssertEqual(describe(failed), ["refuse:502 upstream-unreachable"])
    XCTAssertEqual(refusal(in: failed)?.reason, "cannot connect to origin.test:80")

    var exchanging = try makeMachine(Self.get)
    let upstream = FakeUpstream()
    connect(&exchanging, upstream)
    XCTAssertTrue(run(&exchanging) { $0.dialFailed(.unreachable("late"), &$1) }.isEmpty)
    XCTAssertTrue(exchanging.isServed(by: upstream))
  }

  func testEventsFromAStaleUpstreamCloseThatUpstreamOnly() throws {
    var machine = try makeMachine(Self.get)
    let stale = FakeUpstream()
    connect(&machine, stale)
    _ = run(&machine) { $0.upstreamClosed(stale, failure: nil, mayRetry: true, &$1) }
    let current = FakeUpstream()
    connect(&machine, current)

    let late = try responseEvents("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    let out = run(&machine) { $0.upstreamEvents(late, from: stale, &$1) }
    XCTAssertEqual(describe(out), ["close"])
    guard case .upstream(.closeUpstream(let closed))? = out.first else { return XCTFail("\(out)") }
    XCTAssertTrue(closed === stale)
    XCTAssertTrue(run(&machine) { $0.upstreamClosed(stale, failure: nil, mayRetry: true, &$1) }.isEmpty)
    XCTAssertTrue(machine.isServed(by: current), "the exchange goes on with its own upstream")

    // A connection that arrives when none is wanted is closed too.
    let extra = FakeUpstream()
    let unwanted = run(&machine) {
      $0.upstreamReady(extra, pooled: false, tls: .none, protocol: .http1, responseDeadline: deadline, &$1)
    }
    guard case .upstream(.closeUpstream(let dropped))? = unwanted.first, unwanted.count == 1 else {
      return XCTFail("\(unwanted)")
    }
    XCTAssertTrue(dropped === extra)
  }
}
