import PinEventLoop
import PinHTTP

/// What a forward connection's machine grows while it serves — its queues,
/// its response buffer and its parser's storage —
/// handed back, emptied, when its session ends, and given to the next
/// session of the same loop (`ForwardStorageShelf`). nginx keeps
/// freed connections on a free list for the same reason: a new connection
/// then allocates none of it, and its first request grows nothing.
extension ForwardMachine {
  /// Taken over by a new machine (`init(router:limits:client:clock:storage:)`),
  /// emptied by `surrenderStorage`.
  struct Storage {
    var pending: RingBuffer<HTTP1Parser.Event>
    var actions: RingBuffer<Action>
    var exchangeActions: ExchangeMachine<Upstream>.Actions
    var output: [UInt8]
    var parser: HTTP1Parser.Spares?

    /// Empty queues (nothing allocated until used) around `output` and
    /// `parser`: a first session's has none of either.
    static func queues(output: [UInt8] = [], parser: HTTP1Parser.Spares? = nil) -> Storage {
      Storage(
        pending: RingBuffer(), actions: RingBuffer(capacity: 16),
        exchangeActions: ExchangeMachine<Upstream>.Actions(capacity: 16), output: output, parser: parser)
    }
  }

  /// Empties the queues in place and takes what a next connection reuses
  /// of the rest: the response buffer (emptied, let go of past
  /// `HTTP1Downstream.keptOutputCapacity`) and the parser's spares.
  mutating func emptyStorage() -> (output: [UInt8], parser: HTTP1Parser.Spares?) {
    pending.removeAll()
    actions.removeAll()
    exchangeActions.removeAll()
    var output = response.takeOutput()
    if output.capacity > HTTP1Downstream.keptOutputCapacity { output = [] }
    output.removeAll(keepingCapacity: true)
    return (output, parser.takeSpares())
  }

  /// This machine's storage, emptied; the machine is done and is left with
  /// none (nothing it held — a head, a body, an action — stays in it).
  mutating func surrenderStorage() -> Storage {
    let (output, spares) = emptyStorage()
    var storage = Storage.queues(output: output, parser: spares)
    swap(&storage.pending, &pending)
    swap(&storage.actions, &actions)
    swap(&storage.exchangeActions, &exchangeActions)
    return storage
  }
}

/// The storage ended forward sessions of one loop handed back, emptied, for
/// the loop's next sessions (`EventLoop.local`); at most `capacity`, so a
/// burst of connections leaves no more than that behind. On its loop only:
/// a session released elsewhere frees its storage instead.
final class ForwardStorageShelf {
  private var spares: [ForwardMachine<UpstreamRef>.Storage] = []
  static let capacity = 32

  /// `loop`'s shelf; nil off the loop (a session made elsewhere, in a test,
  /// starts empty).
  static func of(_ loop: EventLoop) -> ForwardStorageShelf? {
    loop.inLoop ? onLoop(loop) : nil
  }

  /// `loop`'s shelf, asked on the loop (an accept): without asking
  /// Dispatch which queue runs (asserted in debug builds).
  static func onLoop(_ loop: EventLoop) -> ForwardStorageShelf {
    loop.local(ForwardStorageShelf.self) { ForwardStorageShelf() }
  }

  /// The route decision of the session that ended last (`ForwardRouter.Memo`).
  /// One per loop, replaced by each: what an old snapshot's decision holds
  /// stays alive until the loop's next session ends, no longer.
  var routeMemo: ForwardRouter.Memo?

  /// The acquirer of the session that ended last, under the generation of
  /// the snapshot it was made for, kept only when nothing else held it (no
  /// dial of its under way): the loop's next session of the same client
  /// under the same snapshot takes it over (`ForwardSession.acquirer`)
  /// instead of making one, its budget key and its idle-list memo. One per
  /// loop, replaced by each, as `routeMemo` is.
  var acquirerMemo: (generation: UInt64, acquirer: UpstreamAcquirer)?

  /// `acquirerMemo`'s acquirer when it was made for `client` under the
  /// snapshot of `generation` (taken: the shelf no longer holds it).
  func takeAcquirer(client: String, generation: UInt64) -> UpstreamAcquirer? {
    guard let memo = acquirerMemo, memo.generation == generation, memo.acquirer.client.key == client else {
      return nil
    }
    acquirerMemo = nil
    return memo.acquirer
  }

  func take() -> ForwardMachine<UpstreamRef>.Storage? { spares.popLast() }

  /// Ended sessions kept whole for the loop's next connections
  /// (`ForwardSession.serve`), and how many connections one served.
  var retiredSessions = RetiredRecords<ForwardSession>(capacity: ForwardStorageShelf.capacity)
  private(set) var reusedSessions = 0

  /// A retired session of `listener` nothing else holds, counted as reused.
  func takeRetiredSession(of listener: BoundListener) -> ForwardSession? {
    guard let session = retiredSessions.takeUnheld(where: { $0.bound === listener }) else { return nil }
    reusedSessions += 1
    return session
  }

  func put(_ storage: consuming ForwardMachine<UpstreamRef>.Storage) {
    if spares.count < Self.capacity { spares.append(storage) }
  }
}
