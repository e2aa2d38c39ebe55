/* The kernel's core handler as crashport serves it (the host level, Sources/Watcher/HostLevel/):
 * the coredump socket is an AF_UNIX stream socket the kernel connects to as the dying process
 * (Linux 6.16; 6.17 adds a request protocol on it, include/uapi/linux/coredump.h), the pidfd it
 * hands over says whether the peer is dumping and as whom (PIDFD_INFO_COREDUMP, Linux 6.16), and
 * the pipe helper passes its stdin and pidfd to the running sidecar with SCM_RIGHTS. glibc 2.36's
 * headers name none of the kernel's parts, so they are spelled out here as the uapi defines them. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* struct pidfd_info up to coredump_mask (PIDFD_INFO_SIZE_VER1, 72 bytes). */
struct cp_pidfd_info_v1 {
    uint64_t mask;
    uint64_t cgroupid;
    uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
    int32_t exit_code;
    uint32_t coredump_mask;
    uint32_t spare;
};
_Static_assert(sizeof(struct cp_pidfd_info_v1) == 72, "PIDFD_INFO_SIZE_VER1");

#define CP_PIDFD_INFO_PID (1ull << 0)
#define CP_PIDFD_INFO_CREDS (1ull << 1)
#define CP_PIDFD_INFO_COREDUMP (1ull << 4)
#define CP_PIDFD_GET_INFO_V1 _IOWR(0xFF, 11, struct cp_pidfd_info_v1)

int cp_stream_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    unsigned length = 0;
    if (cp_unix_address(path, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    /* Bound with a umask that leaves the socket root's alone (0600): the kernel connects as the
     * dying process whatever the mode, and nobody else may. */
    mode_t previous = umask(0177);
    int result = bind(fd, (struct sockaddr *)&address, length);
    umask(previous);
    if (result != 0 || listen(fd, backlog) != 0) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

int cp_stream_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

int cp_pidfd_coredump_info(int pidfd, struct cp_coredump_info *info) {
    struct cp_pidfd_info_v1 raw;
    memset(&raw, 0, sizeof raw);
    raw.mask = CP_PIDFD_INFO_PID | CP_PIDFD_INFO_CREDS | CP_PIDFD_INFO_COREDUMP;
    int result;
    do {
        result = ioctl(pidfd, CP_PIDFD_GET_INFO_V1, &raw);
    } while (result < 0 && errno == EINTR);
    if (result < 0) return -1;
    memset(info, 0, sizeof *info);
    info->pid = (int)raw.pid;
    info->ruid = raw.ruid;
    info->rgid = raw.rgid;
    if (!(raw.mask & CP_PIDFD_INFO_COREDUMP)) return 0;
    info->coredump_mask = raw.coredump_mask;
    return 1;
}

int cp_send_with_fds(int fd, const void *bytes, unsigned long length, const int *fds, int count) {
    if (count < 0 || count > 4) {
        errno = EINVAL;
        return -1;
    }
    union {
        char bytes[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1};
    if (count > 0) {
        message.msg_control = control.bytes;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
        memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
    }
    ssize_t sent;
    do {
        sent = sendmsg(fd, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent == (ssize_t)length ? 0 : -1;
}

int cp_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int cp_limit_core_to_one(int pid) {
    struct rlimit one = {1, 1};
    return prlimit(pid, RLIMIT_CORE, &one, NULL);
}

/* Waits for `events` on fd, or for anything on `answer`, until deadline_ns (CLOCK_MONOTONIC):
 * 1 when fd is ready, 0 at the deadline, 2 when answer spoke or closed, -1 with errno. */
static int cp_relay_wait(int fd, short events, int answer, uint64_t deadline_ns) {
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t current = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
        if (current >= deadline_ns) return 0;
        struct pollfd fds[2] = {{.fd = fd, .events = events}, {.fd = answer, .events = POLLIN}};
        int ready = poll(fds, 2, (int)((deadline_ns - current) / 1000000ull) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return -1;
        if (fds[1].revents) return 2;
        if (fds[0].revents) return 1;
    }
}

int cp_relay_core(int from, int to, int answer, uint64_t deadline_ns) {
    for (;;) {
        int ready = cp_relay_wait(from, POLLIN, answer, deadline_ns);
        if (ready != 1) return ready == 0 ? 2 : ready == 2 ? 1 : -1;
        ready = cp_relay_wait(to, POLLOUT, answer, deadline_ns);
        if (ready != 1) return ready == 0 ? 2 : ready == 2 ? 1 : -1;
        ssize_t moved = splice(from, NULL, to, NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (moved == 0) return 0;
        if (moved < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return errno == EPIPE ? 1 : -1;
        }
    }
}
