// nghttp2 for the HTTP/2 side of the data path (PinHTTP).
#ifndef PINPROXY_CNGHTTP2_SHIM_H
#define PINPROXY_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#endif
