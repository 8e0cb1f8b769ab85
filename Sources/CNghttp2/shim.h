// libnghttp2 (Debian's libnghttp2-dev). Its API is plain functions, enums
// and structs, which Swift imports as they are; this header only includes
// it, and is where static inline shims for any macro it needs would go.
#ifndef PINPROXY_CNGHTTP2_SHIM_H
#define PINPROXY_CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>

#endif
