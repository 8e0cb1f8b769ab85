// Counts a process's heap allocations for Benchmarks/compare, loaded with
// LD_PRELOAD into a pinproxy started only for that count (never into the
// process whose CPU is measured).
//
// MALLOC_COUNT_FILE names a file of 16 bytes this library maps shared: the
// first 8 count every malloc, calloc, realloc and aligned allocation, the
// next 8 those made by code inside libcrypto or libssl (OpenSSL allocates
// through CRYPTO_malloc, which calls malloc from within libcrypto). The
// benchmark reads the file before and after a load and divides by requests.
//
// The real allocator is glibc's, reached through its __libc_* entry points,
// so no dlsym call (which itself allocates) is needed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static uint64_t fallback[2];
static uint64_t *counts = fallback;
static uintptr_t ranges[16][2];
static int range_count;

// The executable ranges of libcrypto and libssl, from /proc/self/maps.
// DT_NEEDED libraries are mapped before any constructor runs.
static void find_openssl(void) {
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  // procfs hands out a page or so per read: read to the end.
  static char text[1 << 18];
  size_t length = 0;
  for (;;) {
    ssize_t got = read(fd, text + length, sizeof text - 1 - length);
    if (got <= 0) break;
    length += (size_t)got;
  }
  close(fd);
  if (length == 0) return;
  text[length] = 0;
  for (char *line = text; line && *line && range_count < 16;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = 0;
    unsigned long low, high;
    char permissions[5];
    if (sscanf(line, "%lx-%lx %4s", &low, &high, permissions) == 3 && permissions[2] == 'x' &&
        (strstr(line, "libcrypto") || strstr(line, "libssl"))) {
      ranges[range_count][0] = low;
      ranges[range_count][1] = high;
      range_count++;
    }
    line = next;
  }
}

__attribute__((constructor)) static void start(void) {
  const char *path = getenv("MALLOC_COUNT_FILE");
  if (!path) return;
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0) return;
  if (ftruncate(fd, 16) == 0) {
    void *mapped = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped != MAP_FAILED) counts = mapped;
  }
  close(fd);
  find_openssl();
}

static inline void count(void *caller) {
  __atomic_fetch_add(&counts[0], 1, __ATOMIC_RELAXED);
  uintptr_t address = (uintptr_t)caller;
  for (int index = 0; index < range_count; index++) {
    if (address >= ranges[index][0] && address < ranges[index][1]) {
      __atomic_fetch_add(&counts[1], 1, __ATOMIC_RELAXED);
      return;
    }
  }
}

void *malloc(size_t size) {
  count(__builtin_return_address(0));
  return __libc_malloc(size);
}

void *calloc(size_t number, size_t size) {
  count(__builtin_return_address(0));
  return __libc_calloc(number, size);
}

void *realloc(void *pointer, size_t size) {
  count(__builtin_return_address(0));
  return __libc_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  count(__builtin_return_address(0));
  void *pointer = __libc_memalign(alignment, size);
  if (!pointer) return 12;  // ENOMEM
  *out = pointer;
  return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
  count(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
  count(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}
