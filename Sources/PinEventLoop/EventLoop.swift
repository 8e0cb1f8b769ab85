import Dispatch
import Foundation
import Synchronization

/// One serial queue: everything a connection does happens on its loop.
/// Its sockets' readiness comes from one epoll instance the loop owns
/// (`Readiness`), its timeouts from one table (`TimerTable`).
public final class EventLoop: Sendable {
  public let queue: DispatchQueue
  public let name: String
  /// Its place in its group (0 alone): what per-loop state is indexed by.
  public let index: Int
  let timers: TimerTable
  let readiness: Readiness
  /// Where every socket of the loop reads into, and where TLS decrypts into:
  /// reused, not a fresh 64 KiB array per read. Touched only on the loop.
  public nonisolated(unsafe) let readBuffer = UnsafeMutableRawBufferPointer.allocate(
    byteCount: 64 * 1024, alignment: 16)
  public nonisolated(unsafe) let plaintextBuffer = UnsafeMutableRawBufferPointer.allocate(
    byteCount: 64 * 1024, alignment: 16)
  private static let identity = DispatchSpecificKey<ObjectIdentifier>()
  /// Objects the code above keeps per loop, one per type (`local(_:make:)`).
  /// Touched only on the loop.
  private nonisolated(unsafe) var locals: [ObjectIdentifier: AnyObject] = [:]

  public init(name: String, index: Int = 0) {
    self.name = name
    self.index = index
    queue = DispatchQueue(label: "pinproxy.loop.\(name)")
    readiness = Readiness(queue: queue)
    timers = TimerTable(queue: queue, clock: readiness)
    queue.setSpecific(key: EventLoop.identity, value: ObjectIdentifier(self))
  }

  deinit {
    readiness.shutdown()
    readBuffer.deallocate()
    plaintextBuffer.deallocate()
  }

  public func execute(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }

  /// This loop's object of type `Value`, made by `make` the first time it is
  /// asked for: state that code above the loop keeps per loop without the
  /// loop knowing its type (the forward sessions' spare machine storage).
  /// On the loop only.
  public func local<Value: AnyObject>(_ type: Value.Type, make: () -> Value) -> Value {
    preconditionInLoop()
    if let found = locals[ObjectIdentifier(type)] { return unsafeDowncast(found, to: type) }
    let made = make()
    locals[ObjectIdentifier(type)] = made
    return made
  }

  /// Every entry point of a loop-confined object states its queue with
  /// this. Checked in debug builds (every unit, end-to-end and sanitizer
  /// test runs one); a release build does not ask Dispatch again for each
  /// of the dozens of calls a request makes (issue 57: 61 per request).
  @inline(__always)
  public func preconditionInLoop() { assertOnQueue(queue) }

  /// Whether the caller runs on this loop's queue (for entry points that may
  /// be called from anywhere and must not `sync` onto their own queue).
  public var inLoop: Bool { DispatchQueue.getSpecific(key: EventLoop.identity) == ObjectIdentifier(self) }

  /// Runs `work` on the loop and waits for it; at once when already there.
  public func runAndWait<T>(_ work: () throws -> T) rethrows -> T {
    inLoop ? try work() : try queue.sync(execute: work)
  }

  /// A one-shot timeout on this loop, accurate to about 100 ms. Arming and
  /// cancelling only touch a table: per-request Dispatch timer sources each
  /// woke libdispatch's manager thread and were the leading cost per request.
  /// Any `seconds` is safe: NaN and negatives fire at once, and the delay
  /// saturates at about 292 years instead of overflowing.
  public func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
    timers.add(deadline: EventLoop.deadline(after: seconds), work)
  }

  /// The same at `deadline` (uptime nanoseconds, the loop's clock): a
  /// deadline a machine keeps, armed without turning it into a delay first.
  public func schedule(at deadline: UInt64, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
    timers.add(deadline: deadline, work)
  }

  /// A timer that is not armed yet and can be armed again and again with
  /// `LoopTimer.schedule(after:)`: a timeout armed once per request (the
  /// next request's head, the upstream's response) then costs a table
  /// update, not a new closure and timer object each time.
  public func makeTimer(_ work: @escaping @Sendable () -> Void) -> LoopTimer {
    timers.makeTimer(work)
  }

  /// The same, its work given once later (`LoopTimer.setWork`): an owner
  /// keeps the timer in a `let`, made before the work can capture the
  /// owner. (A `lazy var` timer was retained and released at every access,
  /// four a request.) Arming it before it has work does nothing.
  public func makeTimer() -> LoopTimer { timers.makeTimer(nil) }

  /// Now, in uptime nanoseconds, read once per batch of readiness events
  /// on the loop (see `Readiness.now`); the clock itself elsewhere.
  public var now: UInt64 { readiness.now }

  /// Now plus `seconds`, in uptime nanoseconds, saturating.
  public static func deadline(after seconds: Double, now: UInt64 = DispatchTime.now().uptimeNanoseconds)
    -> UInt64
  {
    let nanoseconds = seconds * 1e9
    let delay: UInt64 =
      nanoseconds.isNaN || nanoseconds <= 0
      ? 0 : nanoseconds >= 9.2e18 ? UInt64(Int64.max) : UInt64(nanoseconds)
    let (sum, overflow) = now.addingReportingOverflow(delay)
    return overflow ? UInt64.max : sum
  }
}

/// A timeout registered with a loop; cancelling is idempotent.
///
/// A re-armable timer's work may hold its owner strongly (no weak
/// reference, which would move every retain and release of the owner to
/// the runtime's slow path): the owner then ends the cycle with
/// `invalidate()` when it ends.
public final class LoopTimer: @unchecked Sendable {
  let id: UInt64
  let table: TimerTable
  /// What runs when it fires, kept for `schedule(after:)` (nil for one-shot
  /// timers, and once invalidated). Guarded by the table's lock.
  var work: (@Sendable () -> Void)?
  let reusable: Bool
  /// A re-armable timer's deadline, kept in the timer itself (guarded by
  /// the table's lock): re-arming and cancelling it, once or twice per
  /// request, change this field and touch no table.
  var deadline: UInt64?
  /// Its slot in the table's list of re-armable timers (from its first
  /// arming until `invalidate()`; -1 outside it). The list holds it as the
  /// owner's cycle already does: the work holds the owner, the owner holds
  /// the timer.
  var slot = -1

  /// Its work was given (at `makeTimer`, or once by `setWork`).
  var workGiven: Bool

  /// `reusable`: made by `EventLoop.makeTimer` (its work kept for
  /// re-arming), not a one-shot entry of `EventLoop.schedule`.
  init(id: UInt64, table: TimerTable, work: (@Sendable () -> Void)?, reusable: Bool) {
    self.id = id
    self.table = table
    self.work = work
    self.reusable = reusable
    workGiven = work != nil
  }

  /// Gives a timer from `EventLoop.makeTimer()` its work; once only.
  public func setWork(_ work: @escaping @Sendable () -> Void) { table.setWork(self, work) }

  public func cancel() { reusable ? table.disarm(self) : table.remove(id) }

  /// Cancels it for good and lets go of its work (and what the work holds);
  /// arming it afterwards does nothing.
  public func invalidate() { table.invalidate(self) }

  /// Gives an invalidated timer from `EventLoop.makeTimer()` work again,
  /// unarmed: its owner is used again whole (a loop's retired forward
  /// session serving a new connection) and keeps its timer.
  public func revive(_ work: @escaping @Sendable () -> Void) { table.revive(self, work) }

  /// Arms (or re-arms) a timer made by `EventLoop.makeTimer`: it fires
  /// `seconds` from now, once, unless cancelled or re-armed first.
  public func schedule(after seconds: Double) {
    precondition(reusable, "schedule(after:) needs a timer from EventLoop.makeTimer")
    table.arm(self, deadline: EventLoop.deadline(after: seconds, now: table.clock.now))
  }

  /// Arms (or re-arms) a timer made by `EventLoop.makeTimer` for `deadline`
  /// (uptime nanoseconds, the loop's clock): a deadline a machine keeps.
  public func schedule(at deadline: UInt64) {
    precondition(reusable, "schedule(at:) needs a timer from EventLoop.makeTimer")
    table.arm(self, deadline: deadline)
  }
}

/// The timeouts of one loop, behind one Dispatch timer armed for the
/// earliest deadline (never sooner than `tickNanoseconds` after its last firing, so a
/// loop with many timers sweeps at most ten times a second). A deadline
/// pushed later (a keep-alive connection's idle timer, re-armed per
/// request) moves nothing: the firing that finds it not due re-arms for
/// the earliest deadline then. An idle loop with one far deadline wakes
/// once, at it, rather than every 100 ms.
///
/// Not confined to a queue: timers are armed and cancelled from any thread,
/// so every field is guarded by `lock` (the Dispatch timer's handler runs on `queue`).
final class TimerTable: @unchecked Sendable {
  private let queue: DispatchQueue
  /// Guards every field, and the fields of its timers. A `Mutex` (a futex
  /// word, inline): `NSLock` cost a class call and a pthread mutex per
  /// lock, and a connection takes this one several times.
  private let lock = Mutex(())
  /// A struct, not a tuple: a closure stored in a tuple inside a generic
  /// container is re-abstracted, and that allocated a thunk on every
  /// re-arm (three per keep-alive request).
  private struct Entry {
    let deadline: UInt64
    let work: @Sendable () -> Void
  }
  private var entries: [UInt64: Entry] = [:]
  /// The re-armable timers armed at least once and not invalidated, each
  /// in the slot it holds (`LoopTimer.slot`); each holds its own deadline
  /// (nil: not armed). Slots, not a dictionary: listing and unlisting a
  /// connection's timers hashes nothing. As many slots as timers were ever
  /// listed at once (a bound the connection limit sets); freed ones are
  /// reused first.
  private var rearmable: [LoopTimer?] = []
  private var freeSlots: [Int] = []
  private var nextID: UInt64 = 0
  private var source: DispatchSourceTimer?
  /// When `source` fires next (uptime nanoseconds); nil when it is not armed.
  private var armedFor: UInt64?
  /// When `source` last fired: the earliest it may fire again is `tickNanoseconds` later.
  private var lastFired: UInt64 = 0
  /// The shortest time between two firings (100 ms).
  static let tickNanoseconds: UInt64 = 100_000_000

  /// The loop's clock (`EventLoop.now`).
  let clock: Readiness

  init(queue: DispatchQueue, clock: Readiness) { (self.queue, self.clock) = (queue, clock) }

  func add(deadline: UInt64, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
    let id = lock.withLock { _ in
      nextID &+= 1
      entries[nextID] = Entry(deadline: deadline, work: work)
      armIfEarlier(deadline)
      return nextID
    }
    return LoopTimer(id: id, table: self, work: nil, reusable: false)
  }

  /// Arms the Dispatch timer for `deadline` when it is not armed or armed
  /// later (inside `lock`); never sooner than `tickNanoseconds` after its last firing.
  private func armIfEarlier(_ deadline: UInt64) {
    let target = max(deadline, lastFired &+ TimerTable.tickNanoseconds)
    if let armedFor, armedFor <= target { return }
    let timer: DispatchSourceTimer
    if let source {
      timer = source
    } else {
      timer = DispatchSource.makeTimerSource(queue: queue)
      timer.setEventHandler { [weak self] in self?.fire() }
      source = timer
      timer.resume()
    }
    timer.schedule(
      deadline: DispatchTime(uptimeNanoseconds: target), repeating: .never, leeway: .milliseconds(20))
    armedFor = target
  }

  /// A timer with its own id and no deadline yet.
  func makeTimer(_ work: (@Sendable () -> Void)?) -> LoopTimer {
    let id = lock.withLock { _ in
      nextID &+= 1
      return nextID
    }
    return LoopTimer(id: id, table: self, work: work, reusable: true)
  }

  func setWork(_ timer: LoopTimer, _ work: @escaping @Sendable () -> Void) {
    lock.withLock { _ in
      precondition(timer.reusable && !timer.workGiven, "setWork: once, on a timer from EventLoop.makeTimer()")
      (timer.work, timer.workGiven) = (work, true)
    }
  }

  /// Arms `timer` for `deadline`, replacing its earlier deadline if any;
  /// nothing once it was invalidated.
  func arm(_ timer: LoopTimer, deadline: UInt64) {
    lock.withLock { _ in
      guard timer.work != nil else { return }
      if timer.slot < 0 {
        if let free = freeSlots.popLast() {
          rearmable[free] = timer
          timer.slot = free
        } else {
          timer.slot = rearmable.count
          rearmable.append(timer)
        }
      }
      timer.deadline = deadline
      armIfEarlier(deadline)
    }
  }

  /// A re-armable timer is not armed any more (it stays listed).
  func disarm(_ timer: LoopTimer) {
    lock.withLock { _ in timer.deadline = nil }
  }

  func revive(_ timer: LoopTimer, _ work: @escaping @Sendable () -> Void) {
    lock.withLock { _ in
      precondition(
        timer.reusable && timer.workGiven && timer.work == nil, "revive: an invalidated timer only")
      (timer.work, timer.deadline) = (work, nil)
    }
  }

  func invalidate(_ timer: LoopTimer) {
    var listed: LoopTimer?
    var work: (@Sendable () -> Void)?
    lock.withLock { _ in
      if timer.slot >= 0 {
        swap(&listed, &rearmable[timer.slot])
        freeSlots.append(timer.slot)
      }
      swap(&work, &timer.work)
      (timer.deadline, timer.slot) = (nil, -1)
    }
    // A work may hold the last reference to its owner: it is let go of
    // only after the lock (an owner's deinit may cancel timers of its own).
    // Ended with `consume`, not passed to a generic function to be kept:
    // a closure handed to one is re-abstracted into a new allocation.
    _ = consume listed
    _ = consume work
  }

  func remove(_ id: UInt64) {
    let removed = lock.withLock { _ in entries.removeValue(forKey: id) }
    _ = consume removed
  }

  /// Runs (on the loop) every timer whose deadline has passed, earliest
  /// first. Each is taken from the table only when its turn comes: one that
  /// the work of an earlier one cancelled or re-armed does not run. Then
  /// arms for the earliest deadline left, if any.
  private func fire() {
    let now = DispatchTime.now().uptimeNanoseconds
    let (dueCount, onlyDue, due) = lock.withLock { _ -> (Int, Due, [Due]) in
      (armedFor, lastFired) = (nil, now)
      // Most firings have one timer due: it runs without building a list
      // (an idle loop's firing allocates nothing).
      var dueCount = 0
      var onlyDue = Due.oneShot(0)
      for (id, entry) in entries where entry.deadline <= now {
        dueCount += 1
        onlyDue = .oneShot(id)
      }
      for case let timer? in rearmable where timer.deadline.map({ $0 <= now }) == true {
        dueCount += 1
        onlyDue = .rearmable(timer)
      }
      let due: [Due] =
        dueCount > 1
        ? (entries.compactMap { $0.value.deadline <= now ? (Due.oneShot($0.key), $0.value.deadline) : nil }
          + rearmable.compactMap { timer in
            timer.flatMap { timer in timer.deadline.flatMap { $0 <= now ? (Due.rearmable(timer), $0) : nil } }
          })
          .sorted { $0.1 < $1.1 }.map(\.0)
        : []
      return (dueCount, onlyDue, due)
    }
    if dueCount == 1 {
      run(onlyDue, dueAt: now)
    } else {
      for id in due { run(id, dueAt: now) }
    }
    lock.withLock { _ in
      // The earliest deadline left, one-shot or re-armable (no list made).
      var earliest: UInt64?
      for entry in entries.values where earliest.map({ entry.deadline < $0 }) ?? true {
        earliest = entry.deadline
      }
      for case let timer? in rearmable {
        if let deadline = timer.deadline, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
      }
      if let earliest { armIfEarlier(earliest) }
    }
  }

  /// A timer found due: a one-shot one by its id in `entries`, a
  /// re-armable one itself.
  private enum Due {
    case oneShot(UInt64)
    case rearmable(LoopTimer)
  }

  /// Runs a due timer if it is still due at `now` (an earlier timer's work
  /// may have cancelled, re-armed or invalidated it), taking it out of the
  /// table first.
  private func run(_ due: Due, dueAt now: UInt64) {
    var work: (@Sendable () -> Void)?
    lock.withLock { _ in
      switch due {
      case .oneShot(let id):
        work = entries[id].flatMap { $0.deadline <= now ? $0.work : nil }
        if work != nil { entries[id] = nil }
      case .rearmable(let timer):
        if timer.slot >= 0, let deadline = timer.deadline, deadline <= now {
          // Fired: not armed until armed again (its work usually does).
          timer.deadline = nil
          work = timer.work
        }
      }
    }
    work?()
  }

  deinit { source?.cancel() }
}

/// N loops; new connections are spread round-robin.
public final class EventLoopGroup: Sendable {
  public let loops: [EventLoop]
  private let counter = Counter()

  public init(count: Int = ProcessInfo.processInfo.activeProcessorCount) {
    loops = (0..<max(1, count)).map { EventLoop(name: "\($0)", index: $0) }
    EventLoopGroup.armDispatchTimers()
  }

  /// libdispatch creates the timerfd behind its timers the first time one is
  /// armed. Were that first time a moment when the process is out of file
  /// descriptors (a connection flood), creation fails and no timer of the
  /// process fires again: header timeouts, and the accept backoff that would
  /// end the flood, would all stop. So one timer is armed and fired at start.
  static func armDispatchTimers() {
    let fired = DispatchSemaphore(value: 0)
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { fired.signal() }
    _ = fired.wait(timeout: .now() + 2)
  }

  public func next() -> EventLoop { loops[counter.increment() % loops.count] }

  /// The loop count `eventLoops: 0` means: one per two cores, at least one.
  /// A loop per core lost on both counts on a 2-core box shared with the
  /// load's clients and origin (Benchmarks/compare, one loop against two:
  /// 0.93× the CPU per keep-alive request and 0.79× per new connection,
  /// with more requests/s): fewer, busier loops get more sockets per
  /// readiness batch and fewer thread wake-ups per request.
  public static func automaticCount(cores: Int = ProcessInfo.processInfo.activeProcessorCount) -> Int {
    max(1, cores / 2)
  }
}

/// Round-robin position over a group's loops, taken from any thread.
final class Counter: Sendable {
  private let value = Atomic<Int>(0)

  func increment() -> Int { value.add(1, ordering: .relaxed).newValue & Int.max }
}
