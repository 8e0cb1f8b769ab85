import PinHTTP

/// Starts libFuzzer from a SwiftPM executable. SwiftPM links an executable's
/// entry point as `<Target>_main`, so each target defines that symbol and
/// hands libFuzzer its callback here (libFuzzer's own `main` is not used).
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

public typealias FuzzCallback = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

public func runFuzzer(
  _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ callback: FuzzCallback
) -> CInt {
  var count = argc
  var vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
  return llvmFuzzerRunDriver(&count, &vector, callback)
}

/// The input as an array; libFuzzer passes no pointer for an empty input.
public func inputBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
  guard let data, size > 0 else { return [] }
  return Array(UnsafeBufferPointer(start: data, count: size))
}

/// A property of the target: on failure the message is printed (release
/// builds drop `precondition` messages) and libFuzzer keeps the input.
public func require(
  _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String = "", line: UInt = #line
) {
  if !condition() { fatalError("property failed: \(message())", line: line) }
}

public func requireFailure(_ message: String, line: UInt = #line) -> Never {
  fatalError("property failed: \(message)", line: line)
}

/// Body pieces joined and empty ones dropped: where the input was cut is not
/// an outcome, so split and whole feeds compare equal.
public func mergedBodies(_ events: [HTTP1Parser.Event]) -> [HTTP1Parser.Event] {
  var merged: [HTTP1Parser.Event] = []
  for event in events {
    if case .body(let bytes) = event {
      if bytes.isEmpty { continue }
      if case .body(let previous)? = merged.last {
        merged[merged.count - 1] = .body(previous + bytes)
        continue
      }
    }
    merged.append(event)
  }
  return merged
}
