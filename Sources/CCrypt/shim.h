// libxcrypt: crypt_rn verifies the hashes of an htpasswd file (bcrypt,
// sha512crypt, yescrypt) for proxy authentication; crypt_checksalt says
// which hashing methods the library considers legacy or disabled.
#include <crypt.h>
