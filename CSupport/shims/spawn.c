/* Starting a program: the fork and the child's side of every child crashport starts (Sources/
 * Processes/ChildProcess.swift decides what each child gets and waits for it; nothing here
 * waits).
 *
 * One fork for every child, so that each gets exactly what its caller asked, in one order:
 * crashport's handlers reset, then (held) the hold, the working directory, the process group or
 * session, the OOM score, the user's ids, the standard descriptors, the signal mask, execve.
 *
 * Between fork and execve the child runs only async-signal-safe calls (crashport has other
 * threads; their locks may be held in the copy): sigaction, sigprocmask, read, write, open,
 * close, dup2, fcntl, chdir, setpgid, setsid, setgroups, setgid, setuid, execve, _exit. Every
 * signal stays blocked until the exec's own mask is set, and crashport's handlers are reset to
 * SIG_DFL first (as glibc's posix_spawn does), so a signal in that window never runs crashport's
 * code in the child. A failure before or at the exec comes back through a close-on-exec pipe
 * (the step and its errno), so the caller can give the error posix_spawn would.
 *
 * A held child (`crashport run --trace-exit`, doctor's ptrace test) blocks in read(2) on a
 * pipe until the parent, having seized it (or failed to), writes one byte: so not one
 * instruction of the program runs untraced (posix_spawn returns only after the exec, when a
 * program may already be dead). A pipe, not a stop: a SIGSTOP/SIGCONT dance would leave traces
 * the program could see (a SIGCONT pending across the exec if its mask blocks SIGCONT, a
 * CLD_STOPPED/CLD_CONTINUED for crashport's own parent, a group-stop that a later detach
 * re-enters); a blocked read leaves none, and PTRACE_SEIZE works on a running process. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* In a forked child: every handler crashport (or its runtime) installed back to SIG_DFL, so a
 * signal before the exec never runs crashport's code there (sigaction only: async-signal-safe). */
static void spawn_reset_handlers(void) {
    for (int signal = 1; signal < NSIG; signal++) {
        struct sigaction action;
        if (sigaction(signal, NULL, &action) != 0) continue;
        if (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
            action.sa_handler = SIG_DFL;
            action.sa_flags = 0;
            sigaction(signal, &action, NULL);
        }
    }
}

/* Writes all of a small buffer (async-signal-safe: write and errno only). */
static void spawn_write_all(int fd, const void *bytes, size_t size) {
    const char *next = bytes;
    while (size > 0) {
        ssize_t written = write(fd, next, size);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        next += written;
        size -= (size_t)written;
    }
}

/* In the child: a failed step, told to the parent when it listens, then the end. */
static void spawn_fail(int report, int step, int status) {
    if (report >= 0) {
        int failure[2] = {step, errno ? errno : EIO};
        spawn_write_all(report, failure, sizeof failure);
    }
    _exit(status);
}

/* In the child: descriptor `target` set up as asked; 0, or -1 with errno. */
static int spawn_standard(const cp_spawn_request *request, int target) {
    int source;
    switch (request->standard[target]) {
    case CP_SPAWN_DESCRIPTOR:
        source = request->descriptor[target];
        /* dup2 onto itself keeps close-on-exec: cleared by hand, as posix_spawn does. */
        if (source == target) return fcntl(target, F_SETFD, 0) == 0 ? 0 : -1;
        return dup2(source, target) == target ? 0 : -1;
    case CP_SPAWN_NULL:
        source = open("/dev/null", (target == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        break;
    case CP_SPAWN_APPEND:
        /* O_NONBLOCK: a FIFO the user put there fails the open (ENXIO) instead of holding it. */
        source = open(request->append_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        break;
    default:
        return 0;
    }
    if (source < 0) return -1;
    int moved = dup2(source, target);
    close(source);
    return moved == target ? 0 : -1;
}

/* The child, from the fork to the exec (async-signal-safe calls only). */
static void spawn_child(const cp_spawn_request *request, int hold, int report, const sigset_t *parent_mask) {
    spawn_reset_handlers();
    for (int index = 0; index < request->default_count; index++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = SIG_DFL;
        sigaction(request->default_signals[index], &action, NULL);
    }
    if (hold >= 0) {
        char go = 0;
        ssize_t got;
        do {
            got = read(hold, &go, 1);
        } while (got < 0 && errno == EINTR);
        /* EOF: crashport died, or gave up on it, before releasing it: the program must not run
         * unwatched. */
        if (got != 1) _exit(CP_SPAWN_EXIT_NOT_RELEASED);
        close(hold);
    }
    if (request->directory && chdir(request->directory) != 0) spawn_fail(report, CP_SPAWN_STEP_CHDIR, 127);
    if (request->group == CP_SPAWN_OWN_GROUP && setpgid(0, 0) != 0) spawn_fail(report, CP_SPAWN_STEP_SETPGID, 127);
    if (request->group == CP_SPAWN_OWN_SESSION) setsid();
    if (request->reset_oom_score) {
        /* The sidecar's unit protects it from the OOM killer (OOMScoreAdjust); what it starts
         * for a user must not be: back to 0 (raising it needs no privilege). */
        int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (oom >= 0) {
            (void)!write(oom, "0", 1);
            close(oom);
        }
    }
    if (request->drop_ids && ((unsigned)getuid() != request->uid || (unsigned)getgid() != request->gid)) {
        if (setgroups((size_t)request->group_count, (const gid_t *)request->groups) != 0 ||
            setgid((gid_t)request->gid) != 0 || setuid((uid_t)request->uid) != 0)
            spawn_fail(report, CP_SPAWN_STEP_IDS, CP_SPAWN_EXIT_IDS);
    }
    for (int target = 0; target < 3; target++)
        if (spawn_standard(request, target) != 0) spawn_fail(report, CP_SPAWN_STEP_STANDARD, CP_SPAWN_EXIT_STANDARD);
    sigprocmask(SIG_SETMASK, request->signal_mask ? (const sigset_t *)request->signal_mask : parent_mask, NULL);
    execve(request->path, request->argv, request->envp);
    spawn_fail(report, CP_SPAWN_STEP_EXEC, 127);
}

pid_t cp_spawn(const cp_spawn_request *request, int *release_fd, int *report_fd) {
    int hold[2] = {-1, -1}, report[2] = {-1, -1};
    *release_fd = -1;
    *report_fd = -1;
    if ((request->held && pipe2(hold, O_CLOEXEC) != 0) || (request->report && pipe2(report, O_CLOEXEC) != 0)) {
        int saved = errno;
        for (int index = 0; index < 2; index++) {
            if (hold[index] >= 0) close(hold[index]);
            if (report[index] >= 0) close(report[index]);
        }
        errno = saved;
        return -1;
    }
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t child = fork();
    if (child == 0) {
        if (hold[1] >= 0) close(hold[1]);
        if (report[0] >= 0) close(report[0]);
        spawn_child(request, hold[0], report[1], &previous);
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (hold[0] >= 0) close(hold[0]);
    if (report[1] >= 0) close(report[1]);
    if (child < 0) {
        if (hold[1] >= 0) close(hold[1]);
        if (report[0] >= 0) close(report[0]);
        errno = saved;
        return -1;
    }
    *release_fd = hold[1];
    *report_fd = report[0];
    return child;
}

int cp_spawn_outcome(int release_fd, int report_fd, int *step) {
    if (release_fd >= 0) {
        char go = 1;
        spawn_write_all(release_fd, &go, 1);
        close(release_fd);
    }
    *step = 0;
    if (report_fd < 0) return 0;
    /* EOF when the exec closed the pipe; two ints when a step failed. */
    int failure[2] = {0, 0};
    size_t got = 0;
    while (got < sizeof failure) {
        ssize_t count = read(report_fd, (char *)failure + got, sizeof failure - got);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        got += (size_t)count;
    }
    close(report_fd);
    if (got < sizeof failure) return 0;
    *step = failure[0];
    return failure[1] != 0 ? failure[1] : EIO;
}

int cp_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

void cp_name_thread(const char *name) {
    char shown[16];
    strncpy(shown, name, sizeof shown - 1);
    shown[sizeof shown - 1] = 0;
    pthread_setname_np(pthread_self(), shown);
}
