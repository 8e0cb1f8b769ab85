import PinTrust

/// The ClientHello reader as the fuzzer drives it (Fuzz/Sources/
/// FuzzClientHello): the input's first two bytes say where to split the
/// rest; it is fed in two pieces, byte by byte (up to 4 KiB), and whole.
/// Properties: every feeding reaches the same verdict; nothing is kept past
/// the bound; a name is a valid lowercase DNS host without a final dot.
@_spi(Fuzzing) public enum ClientHelloFuzzing {
  /// Returns the property that failed, or nil.
  public static func run(_ bytes: [UInt8]) -> String? {
    guard bytes.count >= 2 else { return nil }
    let input = Array(bytes.dropFirst(2))
    let split = (Int(bytes[0]) << 8 | Int(bytes[1])) % (input.count + 1)
    let whole = verdict([input])
    let halves = verdict([Array(input[..<split]), Array(input[split...])])
    guard whole.verdict == halves.verdict else {
      return "whole and split input reached \(whole.verdict) and \(halves.verdict)"
    }
    if input.count <= 4096 {
      let bytewise = verdict(input.map { [$0] })
      guard bytewise.verdict == whole.verdict else {
        return "byte by byte reached \(bytewise.verdict), whole \(whole.verdict)"
      }
    }
    for kept in [whole.kept, halves.kept] where kept > ClientHelloName.maximumBytes {
      return "\(kept) bytes kept"
    }
    if case .named(let name) = whole.verdict {
      guard let host = TrustHost(name), case .dns = host, host.description == name, !name.hasSuffix("."),
        name == name.lowercased()
      else { return "the name \(name) is not a lowercase DNS host" }
    }
    return nil
  }

  /// The verdict once the pieces are fed (stopping at the first that is not
  /// `.more`, as the splice does), and how many bytes the reader kept.
  private static func verdict(_ pieces: [[UInt8]]) -> (verdict: ClientHelloName.Verdict, kept: Int) {
    var reader = ClientHelloName()
    var verdict = ClientHelloName.Verdict.more
    for piece in pieces where verdict == .more {
      verdict = piece.withUnsafeBytes { reader.feed($0) }
    }
    return (verdict, reader.received.count)
  }
}
