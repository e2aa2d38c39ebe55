/* recvmsg(2) with SCM_CREDENTIALS and SCM_RIGHTS, whose CMSG_* macros Swift cannot use, and
 * pidfd_open(2), which glibc 2.36 reaches only through the variadic syscall(2). */
#define _GNU_SOURCE
#include <pthread.h>
#include "crashport_shims.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

long cp_receive_message(int fd, void *buffer, unsigned long capacity, int *truncated, int *pid, unsigned *uid,
                        unsigned *gid, int *fds, int max_fds, int *fd_count, int flags) {
    union {
        char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } control;
    struct iovec vector = {.iov_base = buffer, .iov_len = capacity};
    struct msghdr message = {
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control.bytes,
    };
    *truncated = 0;
    *pid = 0;
    *uid = (unsigned)-1;
    *gid = (unsigned)-1;
    *fd_count = 0;
    long count;
    do {
        count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC | flags);
    } while (count < 0 && errno == EINTR);
    if (count < 0) return -1;
    if (message.msg_flags & MSG_TRUNC) *truncated = 1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == SCM_CREDENTIALS && header->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof credentials);
            *pid = credentials.pid;
            *uid = credentials.uid;
            *gid = credentials.gid;
        } else if (header->cmsg_type == SCM_RIGHTS) {
            int passed = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < passed; i++) {
                int received;
                memcpy(&received, CMSG_DATA(header) + i * sizeof(int), sizeof received);
                if (*fd_count < max_fds) fds[(*fd_count)++] = received;
                else close(received);
            }
        }
    }
    if (message.msg_flags & MSG_CTRUNC) {
        /* Descriptors beyond our control buffer were discarded by the kernel; say so upstream
         * by flagging truncation: the message is not trusted. */
        *truncated = 1;
    }
    return count;
}

int cp_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

long cp_read_process_memory(int pid, uint64_t address, void *buffer, unsigned long size) {
    struct iovec local = {.iov_base = buffer, .iov_len = size};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)address, .iov_len = size};
    return (long)process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

int cp_block_signals_to_fd(const int *signals, int count, void *previous_mask_out) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) sigaddset(&set, signals[i]);
    if (pthread_sigmask(SIG_BLOCK, &set, (sigset_t *)previous_mask_out) != 0) return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int cp_read_signal(int fd, int *code, int *sender) {
    struct signalfd_siginfo info;
    if (read(fd, &info, sizeof info) != (ssize_t)sizeof info) return 0;
    *code = info.ssi_code;
    *sender = (int)info.ssi_pid;
    return (int)info.ssi_signo;
}

int cp_unix_address(const char *name, void *address, unsigned *length) {
    struct sockaddr_un *unix_address = address;
    memset(unix_address, 0, sizeof *unix_address);
    unix_address->sun_family = AF_UNIX;
    size_t size = strlen(name);
    if (size == 0 || (name[0] == '@' && size == 1)) {
        errno = EINVAL;
        return -1;
    }
    if (size >= sizeof unix_address->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(unix_address->sun_path, name, size);
    if (name[0] == '@') {
        unix_address->sun_path[0] = '\0'; /* abstract: the name is exactly the bytes given */
        *length = (unsigned)(offsetof(struct sockaddr_un, sun_path) + size);
    } else {
        *length = (unsigned)(offsetof(struct sockaddr_un, sun_path) + size + 1);
    }
    return 0;
}

int cp_unix_listen(const char *name, int backlog) {
    struct sockaddr_un address;
    unsigned length = 0;
    if (cp_unix_address(name, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0 ||
        bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, backlog) != 0) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

int cp_unix_connect(const char *name) {
    struct sockaddr_un address;
    unsigned length = 0;
    if (cp_unix_address(name, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int result;
    do {
        result = connect(fd, (struct sockaddr *)&address, length);
    } while (result != 0 && errno == EINTR);
    if (result != 0) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

int cp_unix_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    return fd;
}

int cp_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct ucred peer;
    socklen_t length = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return -1;
    *pid = peer.pid;
    *uid = peer.uid;
    *gid = peer.gid;
    return 0;
}

int cp_is_listening_seqpacket(int fd) {
    int value = 0;
    socklen_t length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &length) != 0 || value != AF_UNIX) return 0;
    length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &length) != 0 || value != SOCK_SEQPACKET) return 0;
    length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) != 0 || value != 1) return 0;
    return 1;
}

int cp_notify(const char *path, const char *text) {
    struct sockaddr_un address;
    unsigned length = 0;
    if (cp_unix_address(path, &address, &length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t sent = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&address, length);
    int error = errno;
    close(fd);
    errno = error;
    return sent < 0 ? -1 : 0;
}

static long long cp_journal_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* The entry in a sealed memfd, passed over the connected socket fd: journald reads it whole. */
static int cp_journal_send_memfd(int fd, const void *bytes, unsigned long length) {
    int memory = memfd_create("crashport-journal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memory < 0) return -1;
    const char *at = bytes;
    unsigned long left = length;
    while (left > 0) {
        ssize_t wrote = write(memory, at, left);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) {
            int error = errno;
            close(memory);
            errno = error;
            return -1;
        }
        at += wrote;
        left -= (unsigned long)wrote;
    }
    if (fcntl(memory, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        int error = errno;
        close(memory);
        errno = error;
        return -1;
    }
    char nothing = 0;
    int status = cp_send_with_fds(fd, &nothing, 0, &memory, 1);
    int error = errno;
    close(memory);
    errno = error;
    return status;
}

int cp_journal_send(const char *path, const void *bytes, unsigned long length, int timeout_ms) {
    struct sockaddr_un address;
    unsigned address_length = 0;
    if (cp_unix_address(path, &address, &address_length) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    long long deadline = cp_journal_now_ms() + timeout_ms;
    int status = -1;
    if (connect(fd, (struct sockaddr *)&address, address_length) == 0) {
        for (;;) {
            ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent == (ssize_t)length) {
                status = 0;
                break;
            }
            if (sent < 0 && errno == EINTR) continue;
            if (sent < 0 && (errno == EMSGSIZE || errno == ENOBUFS)) {
                status = cp_journal_send_memfd(fd, bytes, length);
                if (status == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) break;
            } else if (sent >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                break;
            }
            long long left = deadline - cp_journal_now_ms();
            if (left <= 0) {
                errno = ETIMEDOUT;
                break;
            }
            struct pollfd wait = {.fd = fd, .events = POLLOUT};
            (void)poll(&wait, 1, (int)left);
        }
    }
    int error = errno;
    close(fd);
    errno = error;
    return status;
}
