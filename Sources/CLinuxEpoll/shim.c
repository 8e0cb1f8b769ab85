#define _GNU_SOURCE
#include <sys/socket.h>

#include "shim.h"

int pp_accept_nonblocking(int fd, void *address, unsigned int *length) {
  return accept4(fd, (struct sockaddr *)address, (socklen_t *)length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
