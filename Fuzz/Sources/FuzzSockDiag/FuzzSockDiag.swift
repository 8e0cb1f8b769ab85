import FuzzSupport
import PinEventLoop

/// Bytes as the kernel's answer to a sock_diag request (`SockDiagMessage`):
/// the first byte picks an IPv4 or IPv6 tuple, the rest is the datagram.
/// Properties: decoding never traps; an owner is only ever reported for an
/// answer to this very request that names exactly the tuple asked about;
/// and the request for the tuple is always 72 bytes naming it.
let v4 = SocketTuple(
  source: [127, 0, 0, 1], sourcePort: 40001, destination: [127, 0, 0, 1], destinationPort: 3128)
let v6 = SocketTuple(
  source: Array(repeating: 0, count: 15) + [1], sourcePort: 40001,
  destination: Array(repeating: 0, count: 15) + [1], destinationPort: 3128)

func fuzzSockDiag(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let first = bytes.first else { return 0 }
  let tuple = first & 1 == 0 ? v4 : v6
  let datagram = Array(bytes.dropFirst())
  let request = SockDiagMessage.request(tuple, sequence: 9)
  require(request.count == SockDiagMessage.requestBytes, "request size \(request.count)")
  require(Array(request[28..<(28 + tuple.source.count)]) == tuple.source.array, "request names the source")
  let answer = datagram.withUnsafeBytes { SockDiagMessage.decodeAnswer($0, sequence: 9, tuple: tuple) }
  if case .owner(let owner) = answer {
    require(owner.inode != 0, "an owner without an inode")
    // The answer that named it is in the datagram, with the tuple's ports and addresses.
    let ports: [UInt8] = [0x9c, 0x41, 0x0c, 0x38]
    require(
      (0...max(0, datagram.count - 4)).contains {
        datagram.count >= 4 && Array(datagram[$0..<($0 + 4)]) == ports
      },
      "an owner for an answer that does not name the ports")
  }
  return 0
}

@_cdecl("FuzzSockDiag_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzSockDiag(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzSockDiag(data, size) }
