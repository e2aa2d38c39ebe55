/* The host level's guard (Sources/Watcher/HostLevel/HostGuard.swift): a process of its own, forked from
 * the sidecar when `crashport watch --host` starts, that bounds how long any dying process is
 * held, whatever state the sidecar is in (stopped, deadlocked, under a debugger).
 *
 * The kernel connects to the coredump socket as the dying process and waits, for as long as the
 * connection stays open, for the answer and for the dump to be read. The guard is the one that
 * accepts: it hands each connection to the sidecar over a SOCK_SEQPACKET pair (SCM_RIGHTS) and
 * keeps its own copy. A connection the sidecar has not taken (a CP_HOST_GUARD_TAKEN message) within
 * `taken_ns`, or not finished (CP_HOST_GUARD_DONE) within `hold_ns` of its arrival, is shut down
 * (shutdown(2) acts on the socket, so the sidecar's copy ends too): the kernel's wait returns and
 * the process ends. The sidecar shuts its copy down itself when it is done, so the guard's copy
 * never holds a process longer.
 *
 * After fork only raw system calls run here (the sidecar has threads: nothing that allocates or
 * locks), with the slots in static storage. The guard leaves the sidecar's session (a terminal's
 * Ctrl-Z does not stop it), ignores SIGINT, SIGTERM and SIGHUP, keeps no descriptor but its three,
 * and ends when the sidecar closes its end of the pair or exits (its pidfd): closing its copies of
 * the listener and of every connection, so a dead sidecar holds nothing and later crashes end at
 * once (the socket refuses). */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CP_HOST_GUARD_SLOTS 4096

struct cp_host_guard_slot {
    int fd; /* -1: free */
    int taken;
    int sent;
    uint64_t id;
    uint64_t arrived_ns;
};

static struct cp_host_guard_slot cp_host_guard_slots[CP_HOST_GUARD_SLOTS];

/* (signal-safe) CLOCK_MONOTONIC in nanoseconds. */
static uint64_t cp_host_guard_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* (signal-safe) One message to the sidecar, with a descriptor or none; never blocks (the
 * guard's end of the channel is non-blocking). */
static int cp_host_guard_send(int channel, uint32_t type, uint32_t reason, uint64_t id, uint64_t arrived, int fd) {
    struct cp_host_guard_message body = {.type = type, .reason = reason, .id = id, .arrived_ns = arrived};
    return cp_send_with_fds(channel, &body, sizeof body, &fd, fd >= 0 ? 1 : 0);
}

/* (signal-safe) Ends a held connection: the kernel's wait returns, the process goes on to die. */
static void cp_host_guard_release(int channel, struct cp_host_guard_slot *slot, uint32_t reason) {
    shutdown(slot->fd, SHUT_RDWR);
    close(slot->fd);
    (void)cp_host_guard_send(channel, CP_HOST_GUARD_RELEASED, reason, slot->id, slot->arrived_ns, -1);
    slot->fd = -1;
}

/* The guard's loop (in the child, after fork): descriptors 3, 4 and 5 are the listener, the
 * channel and the sidecar's pidfd. Never returns. */
static void cp_host_guard_run(uint64_t taken_ns, uint64_t hold_ns) {
    const int listener = 3, channel = 4, sidecar = 5;
    uint64_t next_id = 1;
    for (int index = 0; index < CP_HOST_GUARD_SLOTS; index++) cp_host_guard_slots[index].fd = -1;
    for (;;) {
        uint64_t now = cp_host_guard_now();
        /* Deadlines first: a slot past its own is let go, whatever else is waiting. */
        uint64_t wake = now + 1000000000ull;
        int used = 0, unsent = 0;
        for (int index = 0; index < CP_HOST_GUARD_SLOTS; index++) {
            struct cp_host_guard_slot *slot = &cp_host_guard_slots[index];
            if (slot->fd < 0) continue;
            if (!slot->sent && cp_host_guard_send(channel, CP_HOST_GUARD_ARRIVAL, 0, slot->id, slot->arrived_ns, slot->fd) == 0)
                slot->sent = 1;
            uint64_t hold_end = slot->arrived_ns + hold_ns;
            uint64_t take_end = slot->arrived_ns + taken_ns;
            if (now >= hold_end) {
                cp_host_guard_release(channel, slot, CP_HOST_GUARD_PAST_DEADLINE);
                continue;
            }
            if (!slot->taken && now >= take_end) {
                cp_host_guard_release(channel, slot, CP_HOST_GUARD_NOT_TAKEN);
                continue;
            }
            used++;
            if (!slot->sent) unsent++;
            if (hold_end < wake) wake = hold_end;
            if (!slot->taken && take_end < wake) wake = take_end;
        }
        struct pollfd fds[3] = {
            {.fd = used < CP_HOST_GUARD_SLOTS ? listener : -1, .events = POLLIN},
            {.fd = channel, .events = (short)(POLLIN | (unsent ? POLLOUT : 0))},
            {.fd = sidecar, .events = POLLIN},
        };
        int timeout = (int)((wake - now) / 1000000ull) + 1;
        int ready = poll(fds, 3, timeout);
        if (ready < 0 && errno != EINTR) _exit(1);
        if (ready <= 0) continue;
        /* The sidecar exited: everything it held is let go with this process. */
        if (fds[2].revents) _exit(0);
        if (fds[1].revents & POLLIN) {
            struct cp_host_guard_message message;
            for (;;) {
                ssize_t got = recv(channel, &message, sizeof message, MSG_DONTWAIT);
                if (got == 0) _exit(0); /* the sidecar closed its end: it stops */
                if (got < 0) {
                    if (errno == EINTR) continue;
                    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                    _exit(0);
                }
                if (got != (ssize_t)sizeof message) continue;
                for (int index = 0; index < CP_HOST_GUARD_SLOTS; index++) {
                    struct cp_host_guard_slot *slot = &cp_host_guard_slots[index];
                    if (slot->fd < 0 || slot->id != message.id) continue;
                    if (message.type == CP_HOST_GUARD_TAKEN) slot->taken = 1;
                    if (message.type == CP_HOST_GUARD_DONE) {
                        close(slot->fd);
                        slot->fd = -1;
                    }
                    break;
                }
            }
        } else if (fds[1].revents & (POLLHUP | POLLERR)) {
            _exit(0);
        }
        if (fds[0].revents & POLLIN) {
            for (;;) {
                int free_index = -1;
                for (int index = 0; index < CP_HOST_GUARD_SLOTS && free_index < 0; index++)
                    if (cp_host_guard_slots[index].fd < 0) free_index = index;
                if (free_index < 0) break;
                int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) break;
                struct cp_host_guard_slot *slot = &cp_host_guard_slots[free_index];
                slot->fd = fd;
                slot->id = next_id++;
                slot->arrived_ns = cp_host_guard_now();
                slot->taken = 0;
                slot->sent = cp_host_guard_send(channel, CP_HOST_GUARD_ARRIVAL, 0, slot->id, slot->arrived_ns, fd) == 0;
            }
        }
    }
}

pid_t cp_host_guard_start(int listener, uint64_t taken_ns, uint64_t hold_ns, int *channel) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return -1;
    int sidecar = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (sidecar < 0) {
        int error = errno;
        close(pair[0]);
        close(pair[1]);
        errno = error;
        return -1;
    }
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(pair[0]);
        close(pair[1]);
        close(sidecar);
        errno = error;
        return -1;
    }
    if (child == 0) {
        /* Its three descriptors to 3, 4 and 5 (through high numbers, so none overwrites
         * another), every other one closed: the guard must not keep the sidecar's clients'
         * connections open. */
        int moved[3] = {fcntl(listener, F_DUPFD, 100), fcntl(pair[1], F_DUPFD, 100), fcntl(sidecar, F_DUPFD, 100)};
        if (moved[0] < 0 || moved[1] < 0 || moved[2] < 0) _exit(1);
        for (int index = 0; index < 3; index++)
            if (dup2(moved[index], 3 + index) < 0) _exit(1);
        syscall(SYS_close_range, 6u, ~0u, 0u);
        for (int fd = 3; fd <= 4; fd++) {
            int flags = fcntl(fd, F_GETFL);
            if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        }
        setsid();
        struct sigaction ignore;
        memset(&ignore, 0, sizeof ignore);
        ignore.sa_handler = SIG_IGN;
        sigaction(SIGINT, &ignore, NULL);
        sigaction(SIGTERM, &ignore, NULL);
        sigaction(SIGHUP, &ignore, NULL);
        sigaction(SIGPIPE, &ignore, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_NAME, "crashport-guard", 0, 0, 0);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        cp_host_guard_run(taken_ns, hold_ns);
    }
    close(pair[1]);
    close(sidecar);
    int flags = fcntl(pair[0], F_GETFL);
    if (flags >= 0) fcntl(pair[0], F_SETFL, flags | O_NONBLOCK);
    *channel = pair[0];
    return child;
}

int cp_host_guard_tell(int channel, uint32_t type, uint64_t id) {
    struct cp_host_guard_message message = {.type = type, .reason = 0, .id = id, .arrived_ns = 0};
    ssize_t sent;
    do {
        sent = send(channel, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent == (ssize_t)sizeof message ? 0 : -1;
}

int cp_host_guard_receive(int channel, struct cp_host_guard_message *message, int *fd) {
    union {
        char bytes[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    struct iovec vector = {.iov_base = message, .iov_len = sizeof *message};
    struct msghdr header = {.msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.bytes,
                            .msg_controllen = sizeof control.bytes};
    *fd = -1;
    ssize_t got;
    do {
        got = recvmsg(channel, &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0) return -1;
    if (got == 0) return 0;
    for (struct cmsghdr *part = CMSG_FIRSTHDR(&header); part != NULL; part = CMSG_NXTHDR(&header, part)) {
        if (part->cmsg_level != SOL_SOCKET || part->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (part->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int fds[4];
        memcpy(fds, CMSG_DATA(part), sizeof(int) * (count > 4 ? 4 : count));
        for (size_t index = 0; index < count && index < 4; index++) {
            if (*fd < 0) *fd = fds[index];
            else close(fds[index]);
        }
    }
    if (got != (ssize_t)sizeof *message || (header.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        errno = EBADMSG;
        return -1;
    }
    return 1;
}
