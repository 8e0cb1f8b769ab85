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
  /// Where `sendPending` gathers frames; kept between calls (bounded there).
  private var outputScratch: [UInt8] = []

  /// - Parameters:
  ///   - maxConcurrentStreams: advertised in our SETTINGS (peers may open at most this many).
  ///   - maxHeaderListSize: advertised (SETTINGS_MAX_HEADER_LIST_SIZE) and enforced here, field by
  ///     field as HPACK decodes them: nghttp2 itself never checks it on what it receives.
  ///   - limits: flow-control windows, the header field count and the flood mitigations (`HTTP2Limits`).
  public init(
    role: Role, maxConcurrentStreams: UInt32 = 100, maxHeaderListSize: UInt32 = 64 * 1024,
    limits: HTTP2Limits = HTTP2Limits()
  ) throws(Failure) {
    state = SessionState(maxHeaderBytes: Int(maxHeaderListSize), maxHeaderFields: limits.maxHeaderFields)
    var callbacks: OpaquePointer?
    guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw Failure(code: -901) }
    defer { nghttp2_session_callbacks_del(callbacks) }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, onInvalidFrame)
    nghttp2_session_callbacks_set_on_invalid_header_callback(callbacks, onInvalidHeader)
    var option: OpaquePointer?
    guard nghttp2_option_new(&option) == 0, let option else { throw Failure(code: -901) }
    defer { nghttp2_option_del(option) }
    nghttp2_option_set_max_send_header_block_length(option, 64 * 1024)
    // Window updates follow what the reader took (`consume`), so that a
    // slow reader holds back its own stream, not the whole connection.
    nghttp2_option_set_no_auto_window_update(option, 1)
    // CVE-2023-44487 (rapid reset) and CVE-2024-28182 (CONTINUATION flood):
    // nghttp2 answers a peer over these bounds with GOAWAY.
    nghttp2_option_set_stream_reset_rate_limit(option, limits.resetBurst, limits.resetsPerSecond)
    nghttp2_option_set_max_continuations(option, limits.maxContinuations)
    // The peer may ask our HPACK encoder for a larger table (SETTINGS_HEADER_TABLE_SIZE); we keep
    // RFC 7541's default whatever it says. The decoder's table is bounded by the 4096 we advertise.
    nghttp2_option_set_max_deflate_dynamic_table_size(option, 4096)
    // SETTINGS entries per frame and frames we owe an acknowledgement (PING, SETTINGS): past
    // these nghttp2 ends the connection instead of queueing answers a peer never reads.
    nghttp2_option_set_max_settings(option, 32)
    nghttp2_option_set_max_outbound_ack(option, 1000)
    // Push is off (ENABLE_PUSH 0); a server that reserves streams anyway gets none kept.
    nghttp2_option_set_max_reserved_remote_streams(option, 0)
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
      nghttp2_settings_entry(
        settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: limits.streamWindow),
      // Server push is never wanted: a proxy has nobody to give a pushed stream to.
      nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
    ]
    if role == .server { settings.removeLast() }
    var submitted = nghttp2_submit_settings(
      session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    if submitted == 0 {
      submitted = nghttp2_session_set_local_window_size(
        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(limits.connectionWindow))
    }
    guard submitted == 0 else {
      nghttp2_session_del(created)
      throw Failure(code: submitted)
    }
  }

  deinit { nghttp2_session_del(session) }

  /// Feeds bytes from the peer; returns what they meant. A protocol error
  /// (a bad preface, a malformed frame) throws; the connection is then
  /// finished (`pendingOutput` holds a GOAWAY for the peer).
  ///
  /// nghttp2 reads `bytes` only during the call (DATA is copied into the
  /// events, partial frames into its own state), so a reused read buffer
  /// can be passed as it is.
  public func receive(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> [HTTP2Event] {
    let consumed = nghttp2_session_mem_recv(
      session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
    let events = state.takeEvents()
    guard consumed >= 0 else { throw Failure(code: Int32(consumed)) }
    return events
  }

  /// The same for bytes already in an array (tests, fuzzers).
  public func receive(_ bytes: [UInt8]) throws(Failure) -> [HTTP2Event] {
    let result: Result<[HTTP2Event], Failure> = bytes.withUnsafeBytes { buffer in
      do throws(Failure) {
        return .success(try receive(buffer))
      } catch {
        return .failure(error)
      }
    }
    return try result.get()
  }

  /// Events that arose while frames were being sent rather than received:
  /// a stream closes when the RST_STREAM nghttp2 queued for it (a malformed
  /// or oversized message) goes out. Read after `pendingOutput`.
  public func takeEvents() -> [HTTP2Event] { state.takeEvents() }

  /// Everything nghttp2 has to send now (frames, including DATA as flow
  /// control allows); empty when there is nothing.
  public func pendingOutput() throws(Failure) -> [UInt8] {
    var out: [UInt8] = []
    try sendPending { out = Array($0) }
    return out
  }

  /// Everything nghttp2 has to send now, gathered into one buffer the
  /// session keeps (frames come a few at a time; one write of them all
  /// makes one TLS record, not one per frame) and handed to `send` once,
  /// valid during the call; not called when there is nothing. A gathered
  /// buffer past 64 KiB is let go afterwards rather than kept idle.
  public func sendPending(_ send: (UnsafeRawBufferPointer) -> Void) throws(Failure) {
    // `send` may end the connection and with it the last owner of this
    // session; the buffer is put back after it returns.
    try withExtendedLifetime(self) { () throws(Failure) in try gatherAndSend(send) }
  }

  private func gatherAndSend(_ send: (UnsafeRawBufferPointer) -> Void) throws(Failure) {
    var out: [UInt8] = []
    swap(&out, &outputScratch)
    defer {
      if out.capacity <= 64 * 1024 {
        out.removeAll(keepingCapacity: true)
        outputScratch = out
      }
    }
    while true {
      var chunk: UnsafePointer<UInt8>?
      let count = nghttp2_session_mem_send(session, &chunk)
      guard count >= 0 else { throw Failure(code: Int32(count)) }
      guard count > 0, let chunk else { break }
      out.append(contentsOf: UnsafeRawBufferPointer(start: chunk, count: count))
    }
    if !out.isEmpty { out.withUnsafeBytes { send($0) } }
  }

  /// Whether the connection is still worth reading or writing (false after
  /// GOAWAY both ways, or a fatal error).
  public var isActive: Bool {
    nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
  }

  /// A new request stream (client). `body` nil ends the stream with the
  /// headers unless `streaming`, in which case the body follows through
  /// `sendBody` and `endBody`.
  public func submitRequest(_ headers: [HTTP2Header], body: [UInt8]? = nil, streaming: Bool = false)
    throws(Failure) -> Int32
  {
    let hasBody = body != nil || streaming
    let stream = try submit(headers, hasBody: hasBody) { nva, count, provider in
      nghttp2_submit_request(session, nil, nva, count, provider, nil)
    }
    if hasBody { state.store(stream, OutgoingBody(bytes: body ?? [], ended: !streaming)) }
    return stream
  }

  /// The response on `stream` (server); `body` nil ends the stream with the
  /// headers unless `streaming` (then `sendBody` and `endBody` follow).
  public func submitResponse(
    stream: Int32, _ headers: [HTTP2Header], body: [UInt8]? = nil, streaming: Bool = false
  )
    throws(Failure)
  {
    let hasBody = body != nil || streaming
    if hasBody { state.store(stream, OutgoingBody(bytes: body ?? [], ended: !streaming)) }
    do {
      _ = try submit(headers, hasBody: hasBody) { nva, count, provider in
        nghttp2_submit_response(session, stream, nva, count, provider)
      }
    } catch {
      state.drop(stream)
      throw error
    }
  }

  /// More body for a stream submitted `streaming`: buffered here and sent as
  /// the peer's flow-control window allows.
  ///
  /// The buffer is changed in place in the dictionary: a copy taken out and
  /// put back would copy every buffered byte on each call.
  public func sendBody(stream: Int32, _ bytes: some Collection<UInt8>) {
    guard state.outgoing[stream]?.ended == false else { return }
    state.outgoing[stream]?.append(bytes)
    state.outgoingBytes += bytes.count
    resume(stream)
  }

  /// Ends a streaming body; non-empty `trailers` follow it in a HEADERS frame.
  public func endBody(stream: Int32, trailers: [HTTP2Header] = []) {
    guard state.outgoing[stream]?.ended == false else { return }
    state.outgoing[stream]?.ended = true
    state.outgoing[stream]?.trailers = trailers
    resume(stream)
  }

  /// Body bytes of `stream` still waiting for flow-control window.
  public func bufferedBodyBytes(stream: Int32) -> Int { state.outgoing[stream]?.count ?? 0 }

  /// Body bytes of all streams still waiting for flow-control window.
  public var bufferedBodyBytesTotal: Int { state.outgoingBytes }

  /// Tells nghttp2 that `count` bytes of `stream`'s DATA were taken by the
  /// reader: only then do WINDOW_UPDATEs let the peer send more.
  public func consume(stream: Int32, _ count: Int) {
    guard count > 0 else { return }
    _ = nghttp2_session_consume(session, stream, count)
  }

  /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
  public var peerMaxConcurrentStreams: UInt32 {
    nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
  }

  /// A PING (RFC 9113 §6.7); its acknowledgement arrives as `.pingAcknowledged`.
  public func submitPing() throws(Failure) {
    let result = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    guard result == 0 else { throw Failure(code: result) }
  }

  private func resume(_ stream: Int32) {
    guard state.outgoing[stream]?.deferred == true else { return }
    state.outgoing[stream]?.deferred = false
    _ = nghttp2_session_resume_data(session, stream)
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
    _ headers: [HTTP2Header], hasBody: Bool,
    _ call: (UnsafePointer<nghttp2_nv>, Int, UnsafePointer<nghttp2_data_provider>?) -> Int32
  ) throws(Failure) -> Int32 {
    var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBody)
    let result = HeaderList.withNVs(headers) { nva, count in
      withUnsafePointer(to: &provider) { pointer in call(nva, count, hasBody ? pointer : nil) }
    }
    guard result >= 0 else { throw Failure(code: result) }
    return result
  }
}
