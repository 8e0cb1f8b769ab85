// What one sock_diag lookup costs in the kernel: the request pinproxy sends
// at accept for a loopback client (SOCK_DIAG_BY_FAMILY for exactly one TCP
// socket, INET_DIAG_NOCOOKIE), 200,000 times against a connected socket,
// and getsockname beside it. Benchmarks/identity-overhead.sh measures the
// whole accept path; this is its kernel part alone.
//   gcc -O2 Benchmarks/sockdiag-cost.c -o /tmp/sockdiag-cost && /tmp/sockdiag-cost
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
int main(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  bind(l, (void*)&a, sizeof a); listen(l, 4);
  socklen_t len = sizeof a; getsockname(l, (void*)&a, &len);
  int c = socket(AF_INET, SOCK_STREAM, 0); connect(c, (void*)&a, sizeof a);
  int s = accept(l, 0, 0);
  struct sockaddr_in peer, here; len = sizeof peer; getpeername(s, (void*)&peer, &len); len = sizeof here; getsockname(s, (void*)&here, &len);
  int nl = socket(AF_NETLINK, SOCK_RAW|SOCK_NONBLOCK|SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  struct { struct nlmsghdr h; struct inet_diag_req_v2 r; } req;
  char buf[1024]; struct sockaddr_nl k = {.nl_family = AF_NETLINK};
  int n = 200000; struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  int ok = 0;
  for (int i = 0; i < n; i++) {
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = sizeof req; req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY; req.h.nlmsg_flags = NLM_F_REQUEST; req.h.nlmsg_seq = i;
    req.r.sdiag_family = AF_INET; req.r.sdiag_protocol = IPPROTO_TCP; req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = peer.sin_port; req.r.id.idiag_dport = here.sin_port;
    req.r.id.idiag_src[0] = peer.sin_addr.s_addr; req.r.id.idiag_dst[0] = here.sin_addr.s_addr;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    sendto(nl, &req, sizeof req, 0, (void*)&k, sizeof k);
    if (recv(nl, buf, sizeof buf, MSG_DONTWAIT) > 0) ok++;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
  printf("%d/%d answered, %.2f us per lookup\n", ok, n, us);
  n = 200000; clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) { len = sizeof here; getsockname(s, (void*)&here, &len); }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("getsockname %.2f us\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n);
}
