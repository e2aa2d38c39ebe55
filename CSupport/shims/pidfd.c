/* What a pidfd tells about a process that is not our child: the peer of a Unix socket as a
 * pidfd (SO_PEERPIDFD, Linux 6.5), whether it still exists (pidfd_send_signal with signal 0),
 * and its exit status (ioctl PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15). glibc 2.36's
 * headers name none of these, so the constants and the kernel's struct are spelled out here, as
 * include/uapi/linux/pidfd.h and asm-generic/socket.h define them. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* struct pidfd_info as first published (PIDFD_INFO_SIZE_VER0, 64 bytes): the kernel fills the
 * fields a caller's size covers, so this older, shorter form keeps working as the struct grows. */
struct cp_pidfd_info {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
};
_Static_assert(sizeof(struct cp_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0");

#define CP_PIDFD_INFO_EXIT (1ull << 3)
#define CP_PIDFS_IOCTL_MAGIC 0xFF
#define CP_PIDFD_GET_INFO _IOWR(CP_PIDFS_IOCTL_MAGIC, 11, struct cp_pidfd_info)

int cp_peer_pidfd(int fd) {
    int pidfd = -1;
    socklen_t length = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) return -1;
    if (length != sizeof pidfd || pidfd < 0) {
        errno = EINVAL;
        return -1;
    }
    return pidfd;
}

int cp_pidfd_exists(int pidfd) {
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0) return 1;
    return errno == ESRCH ? 0 : -1;
}

int cp_pidfd_exit_status(int pidfd, int *status) {
    struct cp_pidfd_info info;
    memset(&info, 0, sizeof info);
    info.mask = CP_PIDFD_INFO_EXIT;
    int result;
    do {
        result = ioctl(pidfd, CP_PIDFD_GET_INFO, &info);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return -1;
    if (!(info.mask & CP_PIDFD_INFO_EXIT)) return 0;
    *status = info.exit_code;
    return 1;
}
