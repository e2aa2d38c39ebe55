/* Starting a program held before its exec, for `crashport run --trace-exit`: the tracer seizes
 * the child while it still runs crashport's code, so not one instruction of the program runs
 * untraced (posix_spawn returns only after the exec, when a program may already be dead).
 *
 * The child is held by a pipe, not by a stop: it blocks in read(2) until the parent, having
 * seized it (or failed to), writes one byte. A SIGSTOP/SIGCONT dance would leave traces the
 * program could see: a SIGCONT pending across the exec if its mask blocks SIGCONT, a
 * CLD_STOPPED/CLD_CONTINUED for crashport's own parent, a group-stop that a later detach
 * re-enters. A blocked read leaves none; PTRACE_SEIZE works on a running process.
 *
 * Between fork and execve the child runs only async-signal-safe calls (crashport has other
 * threads; their locks may be held in the copy): sigaction, sigprocmask, read, write, close,
 * execve, _exit. Every signal stays blocked until the exec's own mask is set, and crashport's
 * handlers are reset to SIG_DFL first (as glibc's posix_spawn does), so a signal in that window
 * never runs crashport's code in the child. An exec failure's errno comes back through a
 * close-on-exec pipe, so the caller can give the same error posix_spawn would. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
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

pid_t cp_spawn_held(const char *path, char *const argv[], char *const envp[], const void *signal_mask,
                    int *release_fd, int *error_fd) {
    int release[2], report[2];
    if (pipe2(release, O_CLOEXEC) != 0) return -1;
    if (pipe2(report, O_CLOEXEC) != 0) {
        int saved = errno;
        close(release[0]);
        close(release[1]);
        errno = saved;
        return -1;
    }
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t child = fork();
    if (child == 0) {
        /* The child: async-signal-safe calls only, from here to execve. */
        close(release[1]);
        close(report[0]);
        spawn_reset_handlers();
        char go = 0;
        ssize_t got;
        do {
            got = read(release[0], &go, 1);
        } while (got < 0 && errno == EINTR);
        /* EOF: crashport died before releasing it; the program must not run unwatched. */
        if (got != 1) _exit(125);
        close(release[0]);
        sigprocmask(SIG_SETMASK, (const sigset_t *)signal_mask, NULL);
        execve(path, argv, envp);
        int failure = errno;
        spawn_write_all(report[1], &failure, sizeof failure);
        _exit(127);
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    close(release[0]);
    close(report[1]);
    if (child < 0) {
        close(release[1]);
        close(report[0]);
        errno = saved;
        return -1;
    }
    *release_fd = release[1];
    *error_fd = report[0];
    return child;
}

int cp_spawn_release(pid_t child, int release_fd, int error_fd) {
    char go = 1;
    spawn_write_all(release_fd, &go, 1);
    close(release_fd);
    /* EOF when the exec closed the pipe; four bytes when it failed. */
    int failure = 0;
    size_t got = 0;
    while (got < sizeof failure) {
        ssize_t count = read(error_fd, (char *)&failure + got, sizeof failure - got);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        got += (size_t)count;
    }
    close(error_fd);
    if (got < sizeof failure) return 0;
    /* The child is exiting with 127 (held at its exit event if it is traced): let it go and
     * reap it, so no zombie and no traced thread is left behind. */
    for (;;) {
        int status = 0;
        pid_t waited = waitpid(child, &status, __WALL);
        if (waited < 0 && errno == EINTR) continue;
        if (waited < 0) break;
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        ptrace(PTRACE_CONT, child, NULL, NULL);
    }
    return failure != 0 ? failure : EIO;
}

/* Starts a program in the background, in a session of its own, as uid/gid (when they differ
 * from ours: a root sidecar starting a user's upload), stdin from /dev/null and stdout/stderr
 * appended to log_path, opened by the child after it took the user's ids (so the file is the
 * user's). The child calls only async-signal-safe functions before execve. Returns its pid or
 * -1; the caller reaps it. */
pid_t cp_spawn_detached(const char *path, char *const argv[], char *const envp[], const char *log_path, unsigned uid,
                        unsigned gid) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t child = fork();
    if (child == 0) {
        spawn_reset_handlers();
        setsid();
        /* The sidecar's unit protects it from the OOM killer (OOMScoreAdjust); what it starts for
         * a user must not be: back to 0 (raising it needs no privilege). */
        int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (oom >= 0) {
            (void)!write(oom, "0", 1);
            close(oom);
        }
        if (uid != (unsigned)getuid() || gid != (unsigned)getgid()) {
            if (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0) _exit(126);
        }
        int input = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* O_NONBLOCK: a FIFO the user put there fails the open (ENXIO) instead of holding it. */
        int output = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (input < 0 || output < 0) _exit(125);
        dup2(input, 0);
        dup2(output, 1);
        dup2(output, 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(path, argv, envp);
        _exit(127);
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    errno = saved;
    return child;
}

int cp_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

void cp_name_thread(const char *name) {
    char shown[16];
    strncpy(shown, name, sizeof shown - 1);
    shown[sizeof shown - 1] = 0;
    pthread_setname_np(pthread_self(), shown);
}
