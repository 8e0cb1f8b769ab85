// epoll and accept4 as Swift can use them. Glibc's Swift module does not
// export <sys/epoll.h>, and `struct epoll_event` is packed on x86_64, which
// Swift cannot lay out; so the loop sees a plain (token, events) pair and
// these `static inline` wrappers convert. Nothing here adds behaviour.
#ifndef PINPROXY_CEPOLL_SHIM_H
#define PINPROXY_CEPOLL_SHIM_H

#include <stdint.h>
#include <sys/epoll.h>

/// One ready registration, as `pp_epoll_wait` reports it.
typedef struct pp_ready {
  uint64_t token;
  uint32_t events;
} pp_ready;

static const uint32_t PP_EPOLLIN = EPOLLIN;
static const uint32_t PP_EPOLLOUT = EPOLLOUT;
static const uint32_t PP_EPOLLERR = EPOLLERR;
static const uint32_t PP_EPOLLHUP = EPOLLHUP;
static const int PP_EPOLL_CTL_ADD = EPOLL_CTL_ADD;
static const int PP_EPOLL_CTL_MOD = EPOLL_CTL_MOD;
static const int PP_EPOLL_CTL_DEL = EPOLL_CTL_DEL;
/// The most events one `pp_epoll_wait` reports (its stack buffer).
#define PP_EPOLL_BATCH 64

static inline int pp_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static inline int pp_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
  struct epoll_event event;
  event.events = events;
  event.data.u64 = token;
  return epoll_ctl(epfd, op, fd, &event);
}

/// A wait of at most `timeout_ms` (0: none): at most `capacity`
/// (≤ PP_EPOLL_BATCH) ready registrations into `out`; returns their count,
/// or -1 with errno.
static inline int pp_epoll_wait(int epfd, pp_ready *out, int capacity, int timeout_ms) {
  struct epoll_event events[PP_EPOLL_BATCH];
  if (capacity > PP_EPOLL_BATCH) capacity = PP_EPOLL_BATCH;
  int count = epoll_wait(epfd, events, capacity, timeout_ms);
  for (int i = 0; i < count; i++) {
    out[i].token = events[i].data.u64;
    out[i].events = events[i].events;
  }
  return count;
}

/// accept4 with the flags every accepted socket gets: non-blocking,
/// close-on-exec. Defined in shim.c: <sys/socket.h> included here would
/// shadow Glibc's own module's socket declarations in Swift.
int pp_accept_nonblocking(int fd, void *address, unsigned int *length);

/// A `NETLINK_SOCK_DIAG` socket (non-blocking, close-on-exec) for asking
/// the kernel who owns a socket of this host (man 7 sock_diag); -1 with errno.
int pp_sock_diag_open(void);
/// Sends one request to the kernel. The kernel answers a request for one
/// socket before this returns, so the answer is already queued.
long pp_sock_diag_send(int fd, const void *message, unsigned long length);
/// Reads one queued answer without waiting; -1 with errno (EAGAIN: none).
long pp_sock_diag_receive(int fd, void *buffer, unsigned long capacity);

#endif
