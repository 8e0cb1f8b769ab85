/// Punycode (RFC 3492) encoding of one label, enough to turn a Unicode
/// (U-label) domain into the A-label form that certificates and DNS carry, so
/// that `bücher.example` in a config and `xn--bcher-kva.example` on the wire
/// name the same domain rule.
enum Punycode {
  private static let base = 36
  private static let tMin = 1
  private static let tMax = 26
  private static let skew = 38
  private static let damp = 700
  private static let initialBias = 72
  private static let initialN = 128

  private static func digit(_ value: Int) -> Character {
    let scalar = value < 26 ? UInt32(value) + 97 : UInt32(value - 26) + 48
    return Character(Unicode.Scalar(scalar)!)
  }

  private static func adapt(_ delta: Int, _ numPoints: Int, _ firstTime: Bool) -> Int {
    var delta = firstTime ? delta / damp : delta / 2
    delta += delta / numPoints
    var k = 0
    while delta > ((base - tMin) * tMax) / 2 {
      delta /= base - tMin
      k += base
    }
    return k + (base - tMin + 1) * delta / (delta + skew)
  }

  /// The Punycode of `label` (without the `xn--` prefix); nil on overflow.
  static func encode(_ label: String) -> String? {
    let input = label.unicodeScalars.map { Int($0.value) }
    var output = String(label.unicodeScalars.filter(\.isASCII).map(Character.init))
    let basicCount = output.count
    var handled = basicCount
    if basicCount > 0 { output.append("-") }
    var n = initialN
    var delta = 0
    var bias = initialBias
    while handled < input.count {
      guard let m = input.filter({ $0 >= n }).min() else { return nil }
      let (product, overflow) = (m - n).multipliedReportingOverflow(by: handled + 1)
      guard !overflow else { return nil }
      delta += product
      n = m
      for codePoint in input {
        if codePoint < n { delta += 1 }
        if codePoint == n {
          var q = delta
          var k = base
          while true {
            let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
            if q < t { break }
            output.append(digit(t + (q - t) % (base - t)))
            q = (q - t) / (base - t)
            k += base
          }
          output.append(digit(q))
          bias = adapt(delta, handled + 1, handled == basicCount)
          delta = 0
          handled += 1
        }
      }
      delta += 1
      n += 1
    }
    return output
  }
}
