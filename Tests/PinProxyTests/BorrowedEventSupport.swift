import PinHTTP

@testable import PinProxy

/// The tests hold response events as owned arrays (from `HTTP1Parser.feed`);
/// the machines take them lent, as the upstream links hand them over. Each
/// body piece is lent from the test's own array, which outlives the actions
/// a test inspects.
func lending<R>(_ events: [HTTP1Parser.Event], _ body: ([HTTP1Parser.BorrowedEvent]) -> R) -> R {
  var lent = BorrowedEvents()
  return lend(events[...], into: &lent, body)
}

private func lend<R>(
  _ events: ArraySlice<HTTP1Parser.Event>, into lent: inout BorrowedEvents,
  _ body: ([HTTP1Parser.BorrowedEvent]) -> R
) -> R {
  guard let first = events.first else { return body(lent.list) }
  guard case .body(let bytes) = first else {
    lent.append(first)
    return lend(events.dropFirst(), into: &lent, body)
  }
  return bytes.withUnsafeBytes { raw in
    lent.appendBody(raw)
    return lend(events.dropFirst(), into: &lent, body)
  }
}

extension ExchangeMachine {
  mutating func upstreamEvents(_ events: [HTTP1Parser.Event], from upstream: Upstream, _ out: inout Actions) {
    lending(events) { upstreamEvents($0, from: upstream, &out) }
  }
}

extension ForwardMachine {
  mutating func upstreamEvents(_ events: [HTTP1Parser.Event], from upstream: Upstream, draining: Bool) {
    lending(events) { upstreamEvents($0, from: upstream, draining: draining) }
  }
}

extension DownstreamLink {
  mutating func sendBody(_ bytes: [UInt8]) { bytes.withUnsafeBytes { sendBody($0) } }
}
