/* Files: what glibc declares only under _GNU_SOURCE (fallocate's hole punching, O_TMPFILE), for
 * the sidecar's spill file (Sources/Watcher/Reporting/CaptureSpill.swift). */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <fcntl.h>

int cp_open_unnamed(const char *directory) {
    return open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

int cp_punch_hole(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}
