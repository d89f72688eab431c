/* Test-only LD_PRELOAD shim: close() of a file whose path contains
 * $FAIL_CLOSE_MATCH fails with EDQUOT after really closing it, as NFS and
 * Lustre report quota errors at close. The first $FAIL_CLOSE_SKIP matching
 * closes succeed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int close(int fd) {
  static int (*real_close)(int) = NULL;
  static int skipped = 0;
  if (!real_close) real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  const char* match = getenv("FAIL_CLOSE_MATCH");
  char link[64], path[PATH_MAX];
  ssize_t n = -1;
  if (match && *match) {
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
  }
  const int rc = real_close(fd);
  if (n <= 0) return rc;
  path[n] = '\0';
  if (!strstr(path, match)) return rc;
  const char* skip = getenv("FAIL_CLOSE_SKIP");
  if (skip && skipped < atoi(skip)) {
    ++skipped;
    return rc;
  }
  errno = EDQUOT;
  return -1;
}
