// Loopback TCP without Tessera: one thread sends 4 MiB as 1024 pieces of PIECE bytes at STRIDE
// from a page-cached file, one of several ways, and another thread receives it into one
// buffer; printed: median wall time per transfer and each thread's CPU per transfer.
// Measurement behind docs/noncontiguous.md ("How the target moves the pieces", the variants).
//
//   gcc -O2 -o loopback-pieces loopback-pieces.c -lpthread
//   ./loopback-pieces MODE ITERATIONS [PIECE [RCVLOWAT [WAITALL [RECV_CHUNK [STRIDE]]]]]
//
// MODE 0: one sendfile of the first 4 MiB (the contiguous baseline);
//      1: vmsplice of the pieces' pages of a shared mapping into a 1 MiB pipe, splice to the
//         socket (Tessera's by-reference path);
//      2: splice file -> pipe once per piece, pipe -> socket per 1 MiB;
//      3: writev of the pieces from the mapping (the socket copies them);
//      4: sendfile once per piece under TCP_CORK.
// The file is /work/tmp-ncr/obj (same file system as the OSD's objects), written with pwrite
// in one call (ext4 then caches it in 2 MiB folios here), or WRITE_CHUNK bytes at a time when
// that variable is set (WRITE_CHUNK=4096: one page per folio).
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

#define N 1024
static size_t PIECE = 4096;
static size_t TOTAL;
static size_t STRIDE;
static int file_fd;
static char *map;
static int mode;
static int iters;
static int lowat = 0, waitall = 0, rcvchunk = 0;
static double s_cpu, r_cpu;

static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void die(const char *m) { perror(m); exit(1); }

static void send_all_pipe(int p0, int sock, size_t n, int more) {
  while (n) {
    ssize_t r = splice(p0, NULL, sock, NULL, n, SPLICE_F_MOVE | (more ? SPLICE_F_MORE : 0));
    if (r <= 0) die("splice->sock");
    n -= r;
  }
}

static void *sender(void *arg) {
  int sock = *(int *)arg;
  int p[2];
  if (pipe(p)) die("pipe");
  fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  struct iovec iov[N];
  for (int i = 0; i < N; i++) { iov[i].iov_base = map + i * STRIDE; iov[i].iov_len = PIECE; }
  double c0 = now(CLOCK_THREAD_CPUTIME_ID);
  for (int it = 0; it < iters; it++) {
    char b;
    if (read(sock, &b, 1) != 1) die("req");
    if (mode == 0) {  // sendfile contiguous
      off_t off = 0; size_t left = TOTAL;
      while (left) { ssize_t r = sendfile(sock, file_fd, &off, left); if (r <= 0) die("sendfile"); left -= r; }
    } else if (mode == 1) {  // vmsplice pieces
      int i = 0; size_t sent = 0;
      struct iovec v[N]; memcpy(v, iov, sizeof v);
      while (sent < TOTAL) {
        ssize_t r = vmsplice(p[1], v + i, N - i, SPLICE_F_NONBLOCK);
        if (r <= 0) die("vmsplice");
        sent += r;
        send_all_pipe(p[0], sock, r, sent < TOTAL);
        size_t left = r;
        while (left) { if (left >= v[i].iov_len) { left -= v[i].iov_len; i++; } else { v[i].iov_base = (char *)v[i].iov_base + left; v[i].iov_len -= left; left = 0; } }
      }
    } else if (mode == 2) {  // splice file -> pipe per piece, flush pipe when full
      size_t inpipe = 0;
      for (int i = 0; i < N; i++) {
        loff_t off = i * STRIDE; size_t left = PIECE;
        while (left) { ssize_t r = splice(file_fd, &off, p[1], NULL, left, SPLICE_F_MOVE); if (r <= 0) die("splice file"); left -= r; inpipe += r; }
        if (inpipe >= (1 << 20) || i == N - 1) { send_all_pipe(p[0], sock, inpipe, i != N - 1); inpipe = 0; }
      }
    } else if (mode == 3) {  // writev pieces (socket copies)
      int i = 0; struct iovec v[N]; memcpy(v, iov, sizeof v); size_t sent = 0;
      while (sent < TOTAL) {
        ssize_t r = writev(sock, v + i, N - i); if (r <= 0) die("writev"); sent += r;
        size_t left = r;
        while (left) { if (left >= v[i].iov_len) { left -= v[i].iov_len; i++; } else { v[i].iov_base = (char *)v[i].iov_base + left; v[i].iov_len -= left; left = 0; } }
      }
    } else if (mode == 4) {  // sendmsg MSG_SPLICE_PAGES is kernel-internal; try sendfile per piece with MSG_MORE via TCP_CORK
      int one = 1, zero = 0;
      setsockopt(sock, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
      for (int i = 0; i < N; i++) { off_t off = i * STRIDE; size_t left = PIECE; while (left) { ssize_t r = sendfile(sock, file_fd, &off, left); if (r <= 0) die("sf"); left -= r; } }
      setsockopt(sock, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero);
    }
  }
  s_cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

int main(int argc, char **argv) {
  mode = atoi(argv[1]); iters = atoi(argv[2]);
  if (argc > 3) PIECE = atol(argv[3]);
  if (argc > 4) lowat = atoi(argv[4]);
  if (argc > 5) waitall = atoi(argv[5]);
  if (argc > 6) rcvchunk = atoi(argv[6]);
  TOTAL = N * PIECE;
  STRIDE = argc > 7 ? atol(argv[7]) : PIECE * 16;
  size_t span = N * PIECE * 17 + (1<<20);
  unlink("/work/tmp-ncr/obj"); file_fd = open("/work/tmp-ncr/obj", O_RDWR | O_CREAT, 0644);
  struct stat; if (ftruncate(file_fd, span)) die("trunc");
  map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, file_fd, 0);
  if (map == MAP_FAILED) die("mmap");
  { char *w = malloc(span); memset(w, 1, span);
    size_t chunk = getenv("WRITE_CHUNK") ? atol(getenv("WRITE_CHUNK")) : span;
    for (size_t at = 0; at < span; at += chunk) { size_t n = span - at < chunk ? span - at : chunk; if (pwrite(file_fd, w, n, at) != (ssize_t)n) die("pwrite"); }
    free(w); }
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  socklen_t al = sizeof a;
  if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (void *)&a, &al)) die("listen");
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (void *)&a, sizeof a)) die("connect");
  int s = accept(ls, NULL, NULL);
  int one = 1; setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (lowat) setsockopt(c, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
  pthread_t t; pthread_create(&t, NULL, sender, &s);
  char *buf = malloc(TOTAL); memset(buf, 0, TOTAL);
  double *w = malloc(iters * sizeof(double));
  double c0 = now(CLOCK_THREAD_CPUTIME_ID);
  long calls = 0;
  for (int it = 0; it < iters; it++) {
    double t0 = now(CLOCK_MONOTONIC);
    if (write(c, "x", 1) != 1) die("w");
    size_t got = 0;
    while (got < TOTAL) {
      size_t want = TOTAL - got; if (rcvchunk && want > (size_t)rcvchunk) want = rcvchunk;
      ssize_t r = recv(c, buf + got, want, waitall ? MSG_WAITALL : 0); if (r <= 0) die("recv"); got += r; calls++;
    }
    w[it] = now(CLOCK_MONOTONIC) - t0;
  }
  r_cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
  pthread_join(t, NULL);
  // median wall
  for (int i = 0; i < iters; i++) for (int j = i + 1; j < iters; j++) if (w[j] < w[i]) { double x = w[i]; w[i] = w[j]; w[j] = x; }
  printf("stride %zu ", STRIDE); printf("mode %d piece %zu: wall median %.0f us, sender cpu %.0f us, receiver cpu %.0f us, recv calls/iter %.1f\n", mode, PIECE, w[iters / 2] * 1e6, s_cpu / iters * 1e6, r_cpu / iters * 1e6, (double)calls / iters);
  return 0;
}
