#define _GNU_SOURCE
#include <sys/socket.h>

#include "shim.h"

int pp_accept_nonblocking(int fd, void *address, unsigned int *length) {
  return accept4(fd, (struct sockaddr *)address, (socklen_t *)length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

#include <linux/netlink.h>
#include <linux/sock_diag.h>

int pp_sock_diag_open(void) {
  return socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

long pp_sock_diag_send(int fd, const void *message, unsigned long length) {
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  return sendto(fd, message, length, 0, (struct sockaddr *)&kernel, sizeof kernel);
}

long pp_sock_diag_receive(int fd, void *buffer, unsigned long capacity) {
  return recv(fd, buffer, capacity, MSG_DONTWAIT);
}
