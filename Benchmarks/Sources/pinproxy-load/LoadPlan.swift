import CEpoll
import Foundation
import Histogram
import PinHTTP

#if canImport(Glibc)
  import Glibc
#endif

/// One run: like wrk, one epoll loop per core, each driving its share of
/// the connections with non-blocking sockets; each loop records latencies in
/// its own histogram, merged at the end.
final class LoadPlan: @unchecked Sendable {
  let host: String
  let port: Int
  let request: [UInt8]
  let keepAlive: Bool
  let deadline: Date
  private let lock = NSLock()
  private var remaining: Int?
  private let budgeted: Bool
  /// The deadline on the monotonic clock, cheap to compare per request.
  let deadlineUptime: UInt64

  init(host: String, port: Int, request: [UInt8], keepAlive: Bool, deadline: Date, budget: Int?) {
    self.host = host
    self.port = port
    self.request = request
    self.keepAlive = keepAlive
    self.deadline = deadline
    remaining = budget
    budgeted = budget != nil
    let seconds = min(deadline.timeIntervalSinceNow, 86_400 * 365)
    deadlineUptime = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, seconds) * 1e9)
  }

  func run(connections: Int) -> LoadResult {
    let started = Date()
    let threads = max(1, min(ProcessInfo.processInfo.activeProcessorCount, connections))
    let group = DispatchGroup()
    nonisolated(unsafe) var results: [WorkerResult] = []
    let resultsLock = NSLock()
    for index in 0..<threads {
      let share = connections / threads + (index < connections % threads ? 1 : 0)
      group.enter()
      let thread = Thread { [self] in
        let result = EpollWorker(plan: self, connections: share).run()
        resultsLock.withLock { results.append(result) }
        group.leave()
      }
      thread.start()
    }
    group.wait()
    return LoadResult(workers: results, elapsed: Date().timeIntervalSince(started), connections: connections)
  }

  func ticket() -> Bool {
    guard budgeted else { return true }
    return lock.withLock {
      guard let left = remaining else { return true }
      guard left > 0 else { return false }
      remaining = left - 1
      return true
    }
  }

  func connectSocket() -> Int32 {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var info: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &info) == 0, let info else { return -1 }
    defer { freeaddrinfo(info) }
    let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
    guard fd >= 0 else { return -1 }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
      close(fd)
      return -1
    }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
    return fd
  }
}

/// One epoll loop and its connections.
final class EpollWorker {
  struct Slot {
    var fd: Int32 = -1
    var parser = HTTP1Parser(role: .response, limits: HTTPLimits(maxHeaderBytes: 64 * 1024))
    var started: UInt64 = 0
    var status = 0
    var keep = true
    var active = false
    var fast = FastResponse()
    var usingParser = false
  }

  let plan: LoadPlan
  let epoll: Int32
  var slots: [Slot]
  var result = WorkerResult()
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 8)

  init(plan: LoadPlan, connections: Int) {
    self.plan = plan
    epoll = epoll_create1(0)
    slots = Array(repeating: Slot(), count: connections)
  }

  deinit {
    buffer.deallocate()
    close(epoll)
  }

  func run() -> WorkerResult {
    for index in slots.indices { startRequest(index) }
    var events = [epoll_event](repeating: epoll_event(), count: 64)
    while slots.contains(where: \.active) {
      let count = epoll_wait(epoll, &events, Int32(events.count), 100)
      if count < 0 && errno != EINTR { break }
      for event in events.prefix(Int(max(0, count))) { readable(Int(event.data.u32)) }
      if Date() >= plan.deadline {
        for index in slots.indices where slots[index].active { finish(index) }
      }
    }
    return result
  }

  /// Sends the next request on slot `index`, connecting first when needed.
  private func startRequest(_ index: Int) {
    guard DispatchTime.now().uptimeNanoseconds < plan.deadlineUptime, plan.ticket() else {
      return finish(index)
    }
    if slots[index].fd < 0 {
      let fd = plan.connectSocket()
      guard fd >= 0 else {
        result.errors["connect", default: 0] += 1
        return finish(index)
      }
      slots[index].fd = fd
      result.connectionsOpened += 1
      var event = epoll_event()
      event.events = EPOLLIN.rawValue
      event.data.u32 = UInt32(index)
      epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }
    slots[index].active = true
    slots[index].status = 0
    slots[index].keep = plan.keepAlive
    slots[index].parser.expectResponse(to: "GET")
    slots[index].fast.reset()
    slots[index].usingParser = false
    slots[index].started = DispatchTime.now().uptimeNanoseconds
    let sent = plan.request.withUnsafeBytes {
      send(slots[index].fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
    }
    if sent != plan.request.count { fail(index, "write") }
  }

  private func readable(_ index: Int) {
    guard slots[index].active else { return }
    while true {
      let count = recv(slots[index].fd, buffer.baseAddress, buffer.count, 0)
      if count < 0 {
        if errno == EAGAIN || errno == EWOULDBLOCK { return }
        return fail(index, "read")
      }
      if count > 0 && !slots[index].usingParser {
        switch slots[index].fast.feed(UnsafeRawBufferPointer(rebasing: buffer[..<count])) {
        case .partial: continue
        case .complete(let status, let bodyBytes, let keepAlive):
          slots[index].status = status
          result.bodyBytes += bodyBytes
          if !keepAlive { slots[index].keep = false }
          return complete(index)
        case .unsupported(let sofar):
          slots[index].usingParser = true
          do {
            if apply(try slots[index].parser.feed(sofar), index) { return complete(index) }
          } catch {
            return fail(index, "malformed")
          }
          continue
        }
      }
      let events: [HTTP1Parser.Event]
      do {
        if count == 0 {
          slots[index].keep = false
          events = try slots[index].parser.finish()
          if events.isEmpty { return fail(index, "closed") }
        } else {
          events = try slots[index].parser.feed(Array(UnsafeRawBufferPointer(rebasing: buffer[..<count])))
        }
      } catch {
        return fail(index, "malformed")
      }
      if apply(events, index) { return complete(index) }
      if count == 0 { return fail(index, "closed") }
    }
  }

  /// Records what the strict parser reported; true once the final response ended.
  private func apply(_ events: [HTTP1Parser.Event], _ index: Int) -> Bool {
    for event in events {
      switch event {
      case .response(let head) where head.status >= 200:
        slots[index].status = head.status
        if !head.keepAlive { slots[index].keep = false }
      case .body(let bytes): result.bodyBytes += bytes.count
      case .end where slots[index].status >= 200: return true
      default: break
      }
    }
    return false
  }

  private func complete(_ index: Int) {
    _ = result.latencies.record(DispatchTime.now().uptimeNanoseconds - slots[index].started)
    result.completed += 1
    let status = slots[index].status
    if !(200..<300).contains(status) { result.errors["status \(status / 100)xx", default: 0] += 1 }
    if !slots[index].keep { closeSocket(index) }
    startRequest(index)
  }

  private func fail(_ index: Int, _ kind: String) {
    result.errors[kind, default: 0] += 1
    closeSocket(index)
    startRequest(index)
  }

  private func finish(_ index: Int) {
    closeSocket(index)
    slots[index].active = false
  }

  private func closeSocket(_ index: Int) {
    guard slots[index].fd >= 0 else { return }
    epoll_ctl(epoll, EPOLL_CTL_DEL, slots[index].fd, nil)
    close(slots[index].fd)
    slots[index].fd = -1
    slots[index].parser = HTTP1Parser(role: .response, limits: HTTPLimits(maxHeaderBytes: 64 * 1024))
  }
}

struct WorkerResult {
  var completed = 0
  var bodyBytes = 0
  var connectionsOpened = 0
  var errors: [String: Int] = [:]
  var latencies = Histogram<UInt64>(
    highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
}

struct LoadResult {
  let workers: [WorkerResult]
  let elapsed: Double
  let connections: Int

  func report(json: Bool, upstreamHandshakes: Int?) -> String {
    var latencies = Histogram<UInt64>(
      highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    var completed = 0
    var bytes = 0
    var opened = 0
    var errors: [String: Int] = [:]
    for worker in workers {
      latencies.add(worker.latencies)
      completed += worker.completed
      bytes += worker.bodyBytes
      opened += worker.connectionsOpened
      errors.merge(worker.errors, uniquingKeysWith: +)
    }
    func ms(_ percentile: Double) -> Double { Double(latencies.valueAtPercentile(percentile)) / 1e6 }
    let rate = Double(completed) / elapsed
    let megabytes = Double(bytes) / elapsed / 1e6
    if json {
      let object: [String: Any] = [
        "requests": completed, "seconds": elapsed, "requests_per_second": rate,
        "megabytes_per_second": megabytes,
        "p50_ms": ms(50), "p99_ms": ms(99), "p999_ms": ms(99.9), "connections_opened": opened,
        "errors": errors,
        "upstream_handshakes": upstreamHandshakes as Any,
      ]
      let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
      return String(decoding: data, as: UTF8.self)
    }
    var lines = [
      String(
        format: "%d requests in %.2f s over %d connections (%d opened)", completed, elapsed, connections,
        opened),
      String(format: "requests/s: %.0f   MB/s: %.2f", rate, megabytes),
      String(format: "latency ms: p50 %.3f   p99 %.3f   p99.9 %.3f", ms(50), ms(99), ms(99.9)),
      "errors: "
        + (errors.isEmpty
          ? "none"
          : errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")),
    ]
    if let upstreamHandshakes {
      lines.append("upstream handshakes (from the proxy's /metrics): \(upstreamHandshakes)")
    }
    return lines.joined(separator: "\n")
  }
}
