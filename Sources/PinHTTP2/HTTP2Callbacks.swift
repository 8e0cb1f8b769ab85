import CNghttp2

// What `HTTP2Session` hands nghttp2: its header lists, the state its
// callbacks write to (events, header blocks under their bounds, bodies
// being sent), and the callbacks themselves. Nothing here is public.

/// Header fields as `nghttp2_nv`s for the length of one call: nghttp2
/// copies names and values during the call, so the copies made here only
/// have to outlive it.
enum HeaderList {
  /// `headers` as nghttp2's name/value list, valid during `call`. Two
  /// allocations whatever the count: every name and value copied once
  /// into one buffer (nghttp2 takes `uint8_t *` but copies the bytes
  /// itself when submitting, without `NGHTTP2_NV_FLAG_NO_COPY_*`), and the
  /// list pointing into it.
  static func withNVs(_ headers: [HTTP2Header], _ call: (UnsafePointer<nghttp2_nv>, Int) -> Int32) -> Int32 {
    var placeholder = nghttp2_nv()
    guard !headers.isEmpty else { return call(&placeholder, 0) }
    let total = headers.reduce(0) { $0 + $1.name.count + $1.value.count }
    let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, total), alignment: 1)
    defer { bytes.deallocate() }
    let list = UnsafeMutableBufferPointer<nghttp2_nv>.allocate(capacity: headers.count)
    defer { list.deallocate() }
    var offset = 0
    func place(_ field: [UInt8]) -> UnsafeMutablePointer<UInt8> {
      let start = bytes.baseAddress!.advanced(by: offset)
      field.withUnsafeBytes {
        if let source = $0.baseAddress { start.copyMemory(from: source, byteCount: $0.count) }
      }
      offset += field.count
      return start.assumingMemoryBound(to: UInt8.self)
    }
    for (index, header) in headers.enumerated() {
      let name = place(header.name)
      let value = place(header.value)
      (list.baseAddress! + index).initialize(
        to: nghttp2_nv(
          name: name, value: value, namelen: header.name.count, valuelen: header.value.count,
          flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
    }
    return call(list.baseAddress!, headers.count)
  }
}

/// A header block being received, with its running size for the bounds.
struct HeaderBlock {
  /// Room for a usual block's fields at once, not grown field by field.
  var fields: [HTTP2Header] = {
    var fields: [HTTP2Header] = []; fields.reserveCapacity(16); return fields
  }()
  var bytes = 0

  mutating func append(_ field: HTTP2Header, size: Int) {
    fields.append(field)
    bytes = size
  }
}

/// A body being sent: nghttp2 reads it as flow control allows. Read bytes
/// are dropped from the front once they are half the buffer.
struct OutgoingBody {
  var bytes: [UInt8]
  var offset = 0
  /// No more bytes will come: the end of the buffer ends the stream.
  var ended: Bool
  var trailers: [HTTP2Header] = []
  /// nghttp2 was told to wait (`NGHTTP2_ERR_DEFERRED`); new bytes resume it.
  var deferred = false

  var count: Int { bytes.count - offset }

  mutating func append(_ more: some Collection<UInt8>) {
    if offset > 0 && offset >= bytes.count / 2 {
      bytes.removeFirst(offset)
      offset = 0
    }
    bytes.append(contentsOf: more)
  }
}

/// The callbacks' side of a session: events gathered during one `receive`,
/// header blocks being assembled, and bodies being sent.
final class SessionState {
  var events: [HTTP2Event] = []
  /// The header block being received, and its stream. HEADERS and its
  /// CONTINUATION frames arrive with no other frame between them (RFC 9113
  /// §6.10; nghttp2 holds peers to it), so there is at most one at a time:
  /// no table keyed by stream, looked up for every field.
  var receiving: (stream: Int32, block: HeaderBlock)?

  /// Forgets the block being received if it is `stream`'s.
  func dropBlock(of stream: Int32) {
    if receiving?.stream == stream { receiving = nil }
  }
  var outgoing: [Int32: OutgoingBody] = [:]
  /// Bytes of `outgoing` not yet taken by nghttp2, all streams together.
  var outgoingBytes = 0
  /// Bounds of one received header block (RFC 9113 §6.5.2 counts a field as
  /// name + value + 32 bytes), checked as each field is decoded.
  let maxHeaderBytes: Int
  let maxHeaderFields: Int

  init(maxHeaderBytes: Int, maxHeaderFields: Int) {
    self.maxHeaderBytes = maxHeaderBytes
    self.maxHeaderFields = maxHeaderFields
  }

  func store(_ stream: Int32, _ body: OutgoingBody) {
    drop(stream)
    outgoing[stream] = body
    outgoingBytes += body.count
  }

  func drop(_ stream: Int32) {
    if let body = outgoing.removeValue(forKey: stream) { outgoingBytes -= body.count }
  }

  /// The events gathered, handed over whole: the array moves out rather
  /// than being copied and then emptied in place (which, shared with the
  /// caller's copy, allocated afresh every time, even when empty).
  func takeEvents() -> [HTTP2Event] {
    guard !events.isEmpty else { return [] }
    var taken: [HTTP2Event] = []
    swap(&taken, &events)
    return taken
  }

  static func from(_ pointer: UnsafeMutableRawPointer?) -> SessionState {
    Unmanaged<SessionState>.fromOpaque(pointer!).takeUnretainedValue()
  }
}

func onBeginHeaders(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame else { return 0 }
  SessionState.from(user).receiving = (frame.pointee.hd.stream_id, HeaderBlock())
  return 0
}

func onHeader(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?,
  _ nameLength: Int, _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame, let name, let value else { return 0 }
  let state = SessionState.from(user)
  let stream = frame.pointee.hd.stream_id
  // Checked before anything is copied: an HPACK block of a few bytes can
  // name a 4 KB table entry thousands of times (an "HPACK bomb"), so the
  // bound must hold on the decoded list, not on the frames.
  if state.receiving?.stream != stream { state.receiving = (stream, HeaderBlock()) }
  let size = state.receiving!.block.bytes + nameLength + valueLength + 32
  let count = state.receiving!.block.fields.count + 1
  guard size <= state.maxHeaderBytes, count <= state.maxHeaderFields else {
    state.receiving = nil
    state.events.append(.oversizedHeaders(stream: stream))
    // nghttp2 resets the stream (RST_STREAM) and decodes the rest of the
    // block without calling back, keeping the HPACK state in step.
    return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
  }
  let header = HTTP2Header(
    name: Array(UnsafeBufferPointer(start: name, count: nameLength)),
    value: Array(UnsafeBufferPointer(start: value, count: valueLength)))
  state.receiving!.block.append(header, size: size)
  return 0
}

func onFrameReceived(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let frame else { return 0 }
  let state = SessionState.from(user)
  let header = frame.pointee.hd
  let endsStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
  switch Int(header.type) {
  case Int(NGHTTP2_HEADERS.rawValue):
    var fields: [HTTP2Header] = []
    if let receiving = state.receiving, receiving.stream == header.stream_id {
      state.receiving = nil
      fields = receiving.block.fields
    }
    state.events.append(.headers(stream: header.stream_id, fields))
    if endsStream { state.events.append(.endStream(stream: header.stream_id)) }
  case Int(NGHTTP2_DATA.rawValue):
    if endsStream { state.events.append(.endStream(stream: header.stream_id)) }
  case Int(NGHTTP2_GOAWAY.rawValue):
    state.events.append(
      .goAway(lastStreamID: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code))
  case Int(NGHTTP2_PING.rawValue) where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
    state.events.append(.pingAcknowledged)
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

/// A frame nghttp2 found invalid (it resets the stream or ends the session).
func onInvalidFrame(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ error: Int32,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  SessionState.from(user).events.append(.refused(stream: frame?.pointee.hd.stream_id ?? 0))
  return 0
}

/// A header field RFC 9113 §8.2 forbids (upper case, CR/LF/NUL, a
/// connection-specific field). Answering anything but this error would make
/// nghttp2 drop the field and go on; the stream must be reset instead, and
/// its message never delivered.
func onInvalidHeader(
  _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?,
  _ nameLength: Int, _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  if let frame {
    let state = SessionState.from(user)
    state.dropBlock(of: frame.pointee.hd.stream_id)
    state.events.append(.refused(stream: frame.pointee.hd.stream_id))
  }
  return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
}

func onDataChunk(
  _ session: OpaquePointer?, _ flags: UInt8, _ stream: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
  _ user: UnsafeMutableRawPointer?
) -> Int32 {
  guard let data, length > 0 else { return 0 }
  SessionState.from(user).events.append(
    .data(stream: stream, Array(UnsafeBufferPointer(start: data, count: length))))
  return 0
}

func onStreamClose(
  _ session: OpaquePointer?, _ stream: Int32, _ errorCode: UInt32, _ user: UnsafeMutableRawPointer?
) -> Int32 {
  let state = SessionState.from(user)
  state.drop(stream)
  state.dropBlock(of: stream)
  state.events.append(.streamClosed(stream: stream, errorCode: errorCode))
  return 0
}

/// Copies the next part of a stream's body. An empty buffer defers the
/// stream until more comes (`sendBody`) unless the body ended: then the last
/// DATA frame carries END_STREAM, or the trailers do.
func readBody(
  _ session: OpaquePointer?, _ stream: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
  _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
  _ user: UnsafeMutableRawPointer?
) -> Int {
  let state = SessionState.from(user)
  guard var body = state.outgoing[stream], let buffer, let flags else {
    flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    return 0
  }
  let count = min(length, body.count)
  if count == 0 && !body.ended {
    body.deferred = true
    state.outgoing[stream] = body
    return Int(NGHTTP2_ERR_DEFERRED.rawValue)
  }
  body.bytes.withUnsafeBufferPointer { bytes in
    buffer.update(from: bytes.baseAddress! + body.offset, count: count)
  }
  body.offset += count
  state.outgoingBytes -= count
  if body.ended && body.count == 0 {
    flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    state.outgoing.removeValue(forKey: stream)
    if !body.trailers.isEmpty {
      flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
      let result = HeaderList.withNVs(body.trailers) { nva, count in
        nghttp2_submit_trailer(session, stream, nva, count)
      }
      if result != 0 { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    }
  } else {
    state.outgoing[stream] = body
  }
  return count
}
