import Foundation

/// A value behind a lock: the one lock type of the project.
///
/// Built on `NSLock` (a pthread mutex) rather than the standard library's
/// `Mutex`: on Linux `Mutex` locks with raw futex calls that ThreadSanitizer
/// cannot see, so every access it guards was reported as a data race and
/// real races would have drowned in those reports. An uncontended lock and
/// unlock costs a few tens of nanoseconds either way.
public final class Locked<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value

  public init(_ value: Value) { self.value = value }

  public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result)
    throws(Failure)
    -> Result
  {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
