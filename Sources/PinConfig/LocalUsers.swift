import Glibc

/// User names and ids of this host (`getpwnam_r`, `getpwuid_r`).
public enum LocalUsers {
  public static func name(of uid: UInt32) -> String? {
    withEntry { entry, buffer, result in getpwuid_r(uid, entry, buffer.baseAddress!, buffer.count, result) }
      .map(\.name)
  }

  public static func uid(of name: String) -> UInt32? {
    withEntry { entry, buffer, result in getpwnam_r(name, entry, buffer.baseAddress!, buffer.count, result) }
      .map(\.uid)
  }

  private static func withEntry(
    _ call: (
      UnsafeMutablePointer<passwd>, UnsafeMutableBufferPointer<CChar>,
      UnsafeMutablePointer<UnsafeMutablePointer<passwd>?>
    ) -> Int32
  ) -> (name: String, uid: UInt32)? {
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 16384) { buffer in
      guard call(&entry, buffer, &result) == 0, let found = result, let name = found.pointee.pw_name else {
        return nil
      }
      return (String(cString: name), found.pointee.pw_uid)
    }
  }
}
