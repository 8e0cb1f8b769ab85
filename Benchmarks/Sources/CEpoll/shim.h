// epoll for the load generator: Glibc's Swift module does not include it.
#ifndef PINPROXY_CEPOLL_SHIM_H
#define PINPROXY_CEPOLL_SHIM_H
#include <sys/epoll.h>
#endif
