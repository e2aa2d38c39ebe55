/* recvmsg(2) with SCM_CREDENTIALS and SCM_RIGHTS, whose CMSG_* macros Swift cannot use, and
 * pidfd_open(2), which glibc 2.36 reaches only through the variadic syscall(2). */
#define _GNU_SOURCE
#include <pthread.h>
#include "crashport_shims.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

long cp_receive_message(int fd, void *buffer, unsigned long capacity, int *truncated, int *pid, unsigned *uid,
                        int *fds, int max_fds, int *fd_count, int flags) {
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

int cp_read_signal(int fd, int *code) {
    struct signalfd_siginfo info;
    if (read(fd, &info, sizeof info) != (ssize_t)sizeof info) return 0;
    *code = info.ssi_code;
    return (int)info.ssi_signo;
}
