// Preloaded into the ThreadSanitizer unit-test process (scripts/sanitizers.sh)
// so that it treats OpenSSL as `pinproxy` does (OpenSSLProcess): its global
// state is kept until the process ends. Without it, a loop still releasing an
// upstream connection's certificate store while XCTest exits can run after
// OpenSSL's atexit clean-up and crash on its freed locks, after every test
// has passed.
#include <openssl/crypto.h>

__attribute__((constructor)) static void keep_openssl_until_exit(void) {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
