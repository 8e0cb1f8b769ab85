import COpenSSL

/// The process's relation to OpenSSL's global state.
public enum OpenSSLProcess {
  /// Keeps OpenSSL's global state until the process ends, instead of the
  /// clean-up OpenSSL registers with atexit: event loops may still release
  /// certificate stores and contexts while the process exits, and after
  /// that clean-up every such release would touch freed locks. Call it
  /// first thing in `main`, before anything touches OpenSSL (later it has
  /// no effect).
  public static func keepGlobalStateUntilExit() { _ = pp_openssl_init_keep_at_exit() }
}
