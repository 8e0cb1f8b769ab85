import Foundation

/// A value behind a lock: the one lock type of the project.
///
/// Built on a pthread mutex rather than the standard library's `Mutex`: on
/// Linux `Mutex` locks with raw futex calls that ThreadSanitizer cannot see,
/// so every access it guards was reported as a data race and real races
/// would have drowned in those reports.
///
/// The mutex and the value live in memory of their own, reached through
/// pointers, not in a stored `var`: a class's `var` handed out `inout` is
/// checked for exclusive access at run time (a thread-local access set), which
/// cost more than the lock itself on the fingerprint cache's hit path. The lock
/// already makes the access exclusive. Both share one allocation aligned to,
/// and padded to, whole cache lines, so two locks taken on two cores never
/// share a line (the fingerprint cache's shards are locked side by side);
/// a per-connection lock opts out (`cacheLineAligned: false`).
public final class Locked<Value>: @unchecked Sendable {
  @usableFromInline static var line: Int { 64 }
  // Usable from inlined code: `withLock` is inlined into its callers in
  // other modules, where a generic call through the module boundary cost
  // more than the lock itself (a thunk and a closure context per call).
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
  @usableFromInline let value: UnsafeMutablePointer<Value>

  /// `cacheLineAligned: false` for a lock of one client's state, made and
  /// let go of per connection: memory aligned past 16 bytes is served by
  /// malloc's slow aligned path (about 650 instructions, more than the rest
  /// of such an object's life), and a lock one loop takes is not contended.
  ///
  /// Inlinable, as `withLock` is: called from another module through the
  /// generic entry, it copied the value in through its type's metadata
  /// (about 600 instructions for a local peer's lock, made per connection).
  @inlinable
  public init(_ value: Value, cacheLineAligned: Bool = true) {
    let line = cacheLineAligned ? Self.line : 1
    let alignment = max(line, MemoryLayout<Value>.alignment, MemoryLayout<pthread_mutex_t>.alignment)
    let valueOffset = (MemoryLayout<pthread_mutex_t>.stride + alignment - 1) / alignment * alignment
    let byteCount = (valueOffset + MemoryLayout<Value>.stride + line - 1) / line * line
    let raw = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: alignment)
    mutex = raw.initializeMemory(as: pthread_mutex_t.self, to: pthread_mutex_t())
    precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init")
    self.value = (raw + valueOffset).initializeMemory(as: Value.self, to: value)
  }

  deinit {
    pthread_mutex_destroy(mutex)
    value.deinitialize(count: 1)
    UnsafeMutableRawPointer(mutex).deallocate()
  }

  @inlinable @inline(__always)
  public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result)
    throws(Failure)
    -> Result
  {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body(&value.pointee)
  }
}
