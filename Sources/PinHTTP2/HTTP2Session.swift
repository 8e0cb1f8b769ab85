import CNghttp2

/// One HTTP/2 connection's framing over nghttp2, driven by memory: bytes
/// from the peer go in (`receive`), events come out as values, submissions
/// (requests, responses, resets, GOAWAY) become bytes for the peer
/// (`pendingOutput`). No socket, no clock; nghttp2's HTTP messaging checks
/// (RFC 9113 §8.2: lower-case names, no connection-specific fields,
/// pseudo-headers in place, content-length against DATA) stay on.
///
/// Owns one `nghttp2_session`, freed in `deinit`. Not thread-safe: one
/// connection's session is used on that connection's loop only.
public final class HTTP2Session {
  public enum Role: Sendable { case client, server }

  public struct Failure: Error, Equatable, CustomStringConvertible {
    /// nghttp2's error code (`nghttp2_error`).
    public let code: Int32
    public var description: String { String(cString: nghttp2_strerror(code)) }
  }

  let session: OpaquePointer
  /// What the callbacks write to; a separate object so that its address can
  /// be nghttp2's user data before the session exists.
  private let state: SessionState

  /// - Parameters:
  ///   - maxConcurrentStreams: advertised in our SETTINGS (peers may open at most this many).
  ///   - maxHeaderListSize: advertised, and enforced by nghttp2 on received blocks.
  public init(role: Role, maxConcurrentStreams: UInt32 = 100, maxHeaderListSize: UInt32 = 64 * 1024)
    throws(Failure)
  {
    state = SessionState()
    var callbacks: OpaquePointer?
    guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw Failure(code: -901) }
    defer { nghttp2_session_callbacks_del(callbacks) }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
    var option: OpaquePointer?
    guard nghttp2_option_new(&option) == 0, let option else { throw Failure(code: -901) }
    defer { nghttp2_option_del(option) }
    nghttp2_option_set_max_send_header_block_length(option, 64 * 1024)
    let userData = Unmanaged.passUnretained(state).toOpaque()
    var created: OpaquePointer?
    let result =
      role == .client
      ? nghttp2_session_client_new2(&created, callbacks, userData, option)
      : nghttp2_session_server_new2(&created, callbacks, userData, option)
    guard result == 0, let created else { throw Failure(code: result) }
    session = created
    var settings = [
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams),
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: maxHeaderListSize),
    ]
    let submitted = nghttp2_submit_settings(
      session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    guard submitted == 0 else {
      nghttp2_session_del(created)
      throw Failure(code: submitted)
    }
  }

  deinit { nghttp2_session_del(session) }

  /// Feeds bytes from the peer; returns what they meant. A protocol error
  /// (a bad preface, a malformed frame) throws; the connection is then
  /// finished (`pendingOutput` holds a GOAWAY for the peer).
  public func receive(_ bytes: [UInt8]) throws(Failure) -> [HTTP2Event] {
    let consumed = bytes.withUnsafeBufferPointer { buffer in
      nghttp2_session_mem_recv(session, buffer.baseAddress, buffer.count)
    }
    let events = state.takeEvents()
    guard consumed >= 0 else { throw Failure(code: Int32(consumed)) }
    return events
  }

  /// Everything nghttp2 has to send now (frames, including DATA as flow
  /// control allows); empty when there is nothing.
  public func pendingOutput() throws(Failure) -> [UInt8] {
    var out: [UInt8] = []
    while true {
      var chunk: UnsafePointer<UInt8>?
      let count = nghttp2_session_mem_send(session, &chunk)
      guard count >= 0 else { throw Failure(code: Int32(count)) }
      guard count > 0, let chunk else { return out }
      out.append(contentsOf: UnsafeBufferPointer(start: chunk, count: count))
    }
  }

  /// Whether the connection is still worth reading or writing (false after
  /// GOAWAY both ways, or a fatal error).
  public var isActive: Bool {
    nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
  }

  /// A new request stream (client); `body` nil ends the stream with the headers.
  public func submitRequest(_ headers: [HTTP2Header], body: [UInt8]? = nil) throws(Failure) -> Int32 {
    let stream = try submit(headers, body: body) { nva, count, provider in
      nghttp2_submit_request(session, nil, nva, count, provider, nil)
    }
    if let body { state.outgoing[stream] = OutgoingBody(bytes: body) }
    return stream
  }

  /// The response on `stream` (server); `body` nil ends the stream with the headers.
  public func submitResponse(stream: Int32, _ headers: [HTTP2Header], body: [UInt8]? = nil) throws(Failure) {
    if let body { state.outgoing[stream] = OutgoingBody(bytes: body) }
    _ = try submit(headers, body: body) { nva, count, provider in
      nghttp2_submit_response(session, stream, nva, count, provider)
    }
  }

  /// RST_STREAM with `errorCode` (RFC 9113 §7).
  public func submitReset(stream: Int32, errorCode: UInt32) throws(Failure) {
    let result = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, errorCode)
    guard result == 0 else { throw Failure(code: result) }
  }

  /// GOAWAY naming the last stream this side processed.
  public func submitGoAway(errorCode: UInt32 = 0) throws(Failure) {
    let last = nghttp2_session_get_last_proc_stream_id(session)
    let result = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode, nil, 0)
    guard result == 0 else { throw Failure(code: result) }
  }

  /// Hands `headers` to nghttp2 as `nghttp2_nv`s (it copies them) with a
  /// data provider reading this session's buffered body when there is one.
  private func submit(
    _ headers: [HTTP2Header], body: [UInt8]?,
    _ call: (UnsafePointer<nghttp2_nv>, Int, UnsafePointer<nghttp2_data_provider>?) -> Int32
  ) throws(Failure) -> Int32 {
    // nghttp2 copies names and values during the call; these copies only
    // have to outlive it.
    var copies: [UnsafeMutableBufferPointer<UInt8>] = []
    defer { copies.forEach { $0.deallocate() } }
    func copy(_ bytes: [UInt8]) -> UnsafeMutableBufferPointer<UInt8> {
      let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, bytes.count))
      _ = buffer.initialize(from: bytes)
      copies.append(buffer)
      return buffer
    }
    let nva = headers.map { header in
      nghttp2_nv(
        name: copy(header.name).baseAddress, value: copy(header.value).baseAddress,
        namelen: header.name.count,
        valuelen: header.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
    }
    var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBody)
    let result = nva.withUnsafeBufferPointer { buffer in
      withUnsafePointer(to: &provider) { pointer in
        call(buffer.baseAddress!, buffer.count, body == nil ? nil : pointer)
      }
    }
    guard result >= 0 else { throw Failure(code: result) }
    return result
  }
}

/// A body being sent: nghttp2 reads it as flow control allows.
struct OutgoingBody {
  var bytes: [UInt8]
  var offset = 0
}

/// The callbacks' side of a session: events gathered during one `receive`,
/// header blocks being assembled, and bodies being sent.
final class SessionState {
  var events: [HTTP2Event] = []
  var headerBlocks: [Int32: [HTTP2Header]] = [:]
  var outgoing: [Int32: OutgoingBody] = [:]

  func takeEvents() -> [HTTP2Event] {
    defer { events.removeAll(keepingCapacity: true) }
    return events
  }

  static func from(_ pointer: UnsafeMutableRawPointer?) -> SessionState {
    Unmanaged<SessionState>.fromOpaque(pointer!).takeUnretainedValue()
  }
}

private func onBeginHeaders(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame else { return 0 }
  SessionState.from(user).headerBlocks[frame.pointee.hd.stream_id] = []
  return 0
}

private func onHeader(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?,
  _ nameLength: Int, _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame, let name, let value else { return 0 }
  let header = HTTP2Header(
    name: Array(UnsafeBufferPointer(start: name, count: nameLength)),
    value: Array(UnsafeBufferPointer(start: value, count: valueLength)))
  SessionState.from(user).headerBlocks[frame.pointee.hd.stream_id, default: []].append(header)
  return 0
}

private func onFrameReceived(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame else { return 0 }
  let state = SessionState.from(user)
  let header = frame.pointee.hd
  let endsStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
  switch Int(header.type) {
  case Int(NGHTTP2_HEADERS.rawValue):
    state.events.append(
      .headers(stream: header.stream_id, state.headerBlocks.removeValue(forKey: header.stream_id) ?? []))
    if endsStream { state.events.append(.endStream(stream: header.stream_id)) }
  case Int(NGHTTP2_DATA.rawValue):
    if endsStream { state.events.append(.endStream(stream: header.stream_id)) }
  case Int(NGHTTP2_GOAWAY.rawValue):
    state.events.append(
      .goAway(lastStreamID: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code))
  case Int(NGHTTP2_SETTINGS.rawValue) where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
    var maxStreams: UInt32?
    let settings = frame.pointee.settings
    for index in 0..<settings.niv {
      let entry = settings.iv[index]
      if entry.settings_id == Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue) {
        maxStreams = entry.value
      }
    }
    state.events.append(.settings(maxConcurrentStreams: maxStreams))
  default:
    break
  }
  return 0
}

private func onDataChunk(
  _ session: OpaquePointer?, _ flags: UInt8, _ stream: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let data, length > 0 else { return 0 }
  SessionState.from(user).events.append(
    .data(stream: stream, Array(UnsafeBufferPointer(start: data, count: length))))
  return 0
}

private func onStreamClose(
  _ session: OpaquePointer?, _ stream: Int32, _ errorCode: UInt32, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  let state = SessionState.from(user)
  state.outgoing.removeValue(forKey: stream)
  state.headerBlocks.removeValue(forKey: stream)
  state.events.append(.streamClosed(stream: stream, errorCode: errorCode))
  return 0
}

/// Copies the next part of a stream's buffered body; the end of the buffer
/// ends the stream (END_STREAM on the last DATA frame).
private func readBody(
  _ session: OpaquePointer?, _ stream: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
  _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
  _ user: UnsafeMutableRawPointer?
) -> Int {
  let state = SessionState.from(user)
  guard var body = state.outgoing[stream], let buffer, let flags else {
    flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    return 0
  }
  let count = min(length, body.bytes.count - body.offset)
  body.bytes.withUnsafeBufferPointer { bytes in
    buffer.update(from: bytes.baseAddress! + body.offset, count: count)
  }
  body.offset += count
  if body.offset == body.bytes.count {
    flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    state.outgoing.removeValue(forKey: stream)
  } else {
    state.outgoing[stream] = body
  }
  return count
}
