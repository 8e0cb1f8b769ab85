import CLinuxEpoll
import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What a registration asked to be told about.
public struct Interest: OptionSet, Sendable {
  public let rawValue: UInt8
  public init(rawValue: UInt8) { self.rawValue = rawValue }
  public static let read = Interest(rawValue: 1)
  public static let write = Interest(rawValue: 2)

  var epollEvents: UInt32 {
    (contains(.read) ? PP_EPOLLIN : 0) | (contains(.write) ? PP_EPOLLOUT : 0)
  }
}

/// Whatever owns a registered fd: told on the loop when it became ready.
/// `events` are epoll's bits (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR).
protocol ReadinessHandler: AnyObject {
  func ready(_ events: UInt32)
}

/// Work a handler leaves for the end of the batch it runs in (nginx's
/// posted events): run after every handler of the batch has returned, so
/// never inside the call that posted it, and without a queue item (a
/// `queue.async` closure is a heap block and a trip through libdispatch).
protocol PostedWork: AnyObject {
  func runPosted()
}

/// Where one fd sits in its loop's `Readiness`: a slot index and the slot's
/// generation when it was taken, so an event still in a batch for a slot
/// that was released (its fd closed, the number maybe reused) is dropped.
struct ReadinessToken: Equatable {
  let slot: UInt32
  let generation: UInt32
  var raw: UInt64 { UInt64(generation) << 32 | UInt64(slot) }
}

/// The readiness of every socket of one loop: an epoll instance the loop
/// owns, watched by one Dispatch read source on the loop's queue. The
/// source's handler drains ready events in batches and calls each fd's
/// handler, so one wake-up of the loop serves every socket that became
/// ready meanwhile — instead of one Dispatch source per socket, each
/// created, suspended, resumed and cancelled through libdispatch's manager
/// thread (the leading cost per request before; docs/ARCHITECTURE.md, "Event
/// loops and timers").
///
/// Registrations are level-triggered: a handler may leave bytes unread (its
/// read budget ran out) and is told again in the next batch. Confined to
/// the loop's queue: every member runs there.
final class Readiness: @unchecked Sendable {
  private struct Slot {
    var generation: UInt32 = 0
    var handler: (any ReadinessHandler)?
  }

  let epollFD: Int32
  private let queue: DispatchQueue
  /// When the batch being handled was read (uptime nanoseconds; 0 outside
  /// a batch), and the thread handling it: the loop's clock for that work
  /// (`now`), read once per batch as nginx reads its time once per turn,
  /// instead of once per timer armed, request timed and connection pooled.
  /// Atomics: `now` may be asked from any thread, and only the loop's own
  /// thread, inside a batch, gets the kept value.
  private let batchStarted = Atomic<UInt64>(0)
  private let batchThread = Atomic<UInt>(0)
  private var source: DispatchSourceRead?
  /// Signalled when a turn's budget ran out with events left: its handler
  /// drains again as a fresh item of the queue. A source, not a
  /// `queue.async` closure: merging data into it allocates nothing, where
  /// each async closure is a heap block (a keep-alive client at full speed
  /// would pay one every few requests).
  private var resumption: DispatchSourceUserDataAdd?
  /// Posted during the batch being handled (`post`), and the list being run.
  private var posted: [any PostedWork] = []
  private var running: [any PostedWork] = []
  private var slots: [Slot] = []
  private var free: [UInt32] = []
  private let batch: UnsafeMutablePointer<pp_ready>
  /// Events handled per wake-up before the rest waits for a fresh turn of
  /// the queue, so timers and `execute`d work are not starved by a flood
  /// (four full batches).
  static let eventsPerTurn = 256
  static let batchSize = 64
  /// How long a turn that handled events waits for the next ones, at most,
  /// while the turn is younger than `waitingBudget`. The answer to what a
  /// turn sent (an upstream's response to the request it forwarded, a
  /// client's next request) usually comes within tens of microseconds:
  /// handled in the same turn, it costs no wake-up of libdispatch's manager
  /// thread and of a worker (two thread hand-offs, about 3 thousand
  /// instructions a keep-alive request before), much as nginx's worker
  /// waits in `epoll_wait` rather than return to a scheduler. The waiting
  /// call is the turn's only call: events already there return at once, so
  /// no call is spent first to see an empty set (two system calls a
  /// keep-alive request). Bounded, so work queued on the loop meanwhile (a
  /// timer's firing, an `execute`) waits at most the budget plus one wait
  /// and a turn's events; not a busy wait: the thread sleeps in the kernel.
  static let waitMilliseconds: Int32 = 1
  static let waitingBudget: UInt64 = 8_000_000

  init(queue: DispatchQueue) {
    self.queue = queue
    epollFD = pp_epoll_create()
    precondition(epollFD >= 0, "epoll_create1 failed: errno \(errno)")
    batch = .allocate(capacity: Readiness.batchSize)
    let source = DispatchSource.makeReadSource(fileDescriptor: epollFD, queue: queue)
    // Held strongly, not weakly: a weak reference gives the object a side
    // table, and then every retain and release of it (the loop's clock is
    // read, and retained, a few times per request) takes the runtime's slow
    // path. The cycle ends at `shutdown()`: a cancelled source lets go of
    // its handlers.
    source.setEventHandler { [self] in drain() }
    let epollFD = self.epollFD
    source.setCancelHandler { _ = Glibc.close(epollFD) }
    source.resume()
    self.source = source
    let resumption = DispatchSource.makeUserDataAddSource(queue: queue)
    resumption.setEventHandler { [self] in drain() }
    resumption.resume()
    self.resumption = resumption
  }

  /// The loop is going away: stop watching (the cancel handler closes the
  /// epoll fd; the cancelled sources let go of their handlers, which hold this object).
  func shutdown() {
    source?.cancel()
    source = nil
    resumption?.cancel()
    resumption = nil
  }

  deinit { batch.deallocate() }

  /// Adds `fd`; the handler is held strongly until `deregister`.
  func register(_ fd: Int32, _ interest: Interest, handler: any ReadinessHandler) throws(SocketError)
    -> ReadinessToken
  {
    assertOnQueue(queue)
    let slot: UInt32
    if let reused = free.popLast() {
      slot = reused
    } else {
      slot = UInt32(slots.count)
      slots.append(Slot())
    }
    slots[Int(slot)].handler = handler
    let token = ReadinessToken(slot: slot, generation: slots[Int(slot)].generation)
    guard pp_epoll_ctl(epollFD, PP_EPOLL_CTL_ADD, fd, interest.epollEvents, token.raw) == 0 else {
      let code = errno
      release(token)
      throw SocketError(operation: "epoll_ctl add", code: code)
    }
    return token
  }

  func modify(_ fd: Int32, _ token: ReadinessToken, _ interest: Interest) throws(SocketError) {
    assertOnQueue(queue)
    guard pp_epoll_ctl(epollFD, PP_EPOLL_CTL_MOD, fd, interest.epollEvents, token.raw) == 0 else {
      throw SocketError(operation: "epoll_ctl mod", code: errno)
    }
  }

  /// Removes `fd` (still open: the caller closes it after this) and drops
  /// the handler; events for it later in the current batch are ignored.
  func deregister(_ fd: Int32, _ token: ReadinessToken) {
    assertOnQueue(queue)
    _ = pp_epoll_ctl(epollFD, PP_EPOLL_CTL_DEL, fd, 0, 0)
    release(token)
  }

  /// Releases `token`'s slot without telling epoll: for a socket about to be
  /// closed. Closing the last descriptor of a file removes it from every
  /// epoll set (epoll(7)), and the process never duplicates a socket, so the
  /// `EPOLL_CTL_DEL` would be one more system call per connection for
  /// nothing (nginx skips it the same way when it closes). An event for the
  /// socket already fetched in this batch meets a released slot, whose
  /// generation no longer matches, and is dropped.
  func forgetBeforeClose(_ token: ReadinessToken) {
    assertOnQueue(queue)
    release(token)
  }

  private func release(_ token: ReadinessToken) {
    let index = Int(token.slot)
    guard slots[index].generation == token.generation else { return }
    slots[index].handler = nil
    slots[index].generation &+= 1
    free.append(token.slot)
  }

  /// Whether the caller runs inside a batch, on the loop's thread: work
  /// may then be posted to the batch's end.
  var inBatch: Bool {
    batchStarted.load(ordering: .relaxed) != 0 && batchThread.load(ordering: .relaxed) == UInt(pthread_self())
  }

  /// Runs `work` at the end of the batch being handled (only inside one:
  /// see `inBatch`).
  func post(_ work: any PostedWork) {
    assertOnQueue(queue)
    posted.append(work)
  }

  /// What the batch's handlers posted, and what that posted in turn.
  private func runPosted() {
    while !posted.isEmpty {
      swap(&posted, &running)
      for work in running { work.runPosted() }
      running.removeAll(keepingCapacity: true)
    }
  }

  /// Now, in uptime nanoseconds: when the batch being handled was read, on
  /// the loop's thread inside a batch; else the clock, read now. A batch
  /// lasts microseconds (a turn's budget bounds it), so a deadline counted
  /// from it is early by no more than that.
  var now: UInt64 {
    inBatch ? batchStarted.load(ordering: .relaxed) : DispatchTime.now().uptimeNanoseconds
  }

  /// Handles what is ready, in batches, until epoll reports nothing (or the
  /// turn's budget ran out: then the rest continues as a new queue item).
  private func drain() {
    assertOnQueue(queue)
    var handled = 0
    var turnStarted: UInt64 = 0
    var batchTime: UInt64 = 0
    while handled < Readiness.eventsPerTurn {
      let waits = handled > 0 && batchTime &- turnStarted < Readiness.waitingBudget
      let count = pp_epoll_wait(
        epollFD, batch, Int32(Readiness.batchSize), waits ? Readiness.waitMilliseconds : 0)
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else { return }
      handled += Int(count)
      batchTime = DispatchTime.now().uptimeNanoseconds
      if turnStarted == 0 { turnStarted = batchTime }
      batchThread.store(UInt(pthread_self()), ordering: .relaxed)
      batchStarted.store(batchTime, ordering: .relaxed)
      defer { batchStarted.store(0, ordering: .relaxed) }
      for index in 0..<Int(count) {
        let event = batch[index]
        let slot = Int(truncatingIfNeeded: event.token & 0xFFFF_FFFF)
        guard slot < slots.count, slots[slot].generation == UInt32(truncatingIfNeeded: event.token >> 32),
          let handler = slots[slot].handler
        else { continue }
        handler.ready(event.events)
      }
      runPosted()
    }
    resumption?.add(data: 1)
  }
}
