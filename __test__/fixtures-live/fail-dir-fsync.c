// LD_PRELOAD shim for the store tests: the first N fsync(2) calls on a
// directory fail with EIO (N from DSH_FAIL_DIR_FSYNC), as a directory
// fsync on a failing disk does. Every other call goes to libc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

static int (*real_fsync)(int);
static int failures = -1;

int fsync(int fd) {
  if (real_fsync == NULL) real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (failures < 0) {
    const char *n = getenv("DSH_FAIL_DIR_FSYNC");
    failures = n == NULL ? 0 : atoi(n);
  }
  struct stat st;
  if (failures > 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    failures -= 1;
    errno = EIO;
    return -1;
  }
  return real_fsync(fd);
}
