/*
 * coredump-activate.c: what systemd (PID 1) does for systemd-coredump.socket, for a machine
 * without systemd as init (tools/bench's `host` section).
 *
 * systemd-coredump (v252, src/coredump/coredump.c) is two processes per crash. The one the kernel
 * starts from core_pattern (process_kernel) reads /proc/%P, then sends that metadata and the core
 * pipe's fd over /run/systemd/coredump (send_iovec: SOCK_SEQPACKET, the fd in SCM_RIGHTS) and
 * exits; only a crash of journald or PID 1 is stored by that process itself. With nothing
 * listening there the connect fails, the helper logs "Failed to connect to coredump service"
 * and the core is lost. The socket unit (ListenSequentialPacket=/run/systemd/coredump,
 * SocketMode=0600, Accept=yes, MaxConnections=16) makes PID 1 accept each connection and start
 * one systemd-coredump@.service instance with it as fd 3 (LISTEN_FDS=1): run() sees one fd and
 * calls process_socket, which receives the metadata and the pipe, then submit_coredump: vacuum,
 * save_external_coredump (the core copied into /var/lib/systemd/coredump, compressed), the
 * stack trace through elfutils, and the journal entry.
 *
 *   coredump-activate SOCKET HANDLER LOG
 *
 * listens on SOCKET as the unit does, prints `ready`, and for each connection starts HANDLER as
 * the service does (fd 3 the connection, LISTEN_FDS=1, LISTEN_PID its pid, stdin /dev/null,
 * the service's Nice=9, IOSchedulingClass=idle and OOMScoreAdjust=500; the sandboxing options are
 * namespaces PID 1 sets up and are left out), waits for it from a small per-connection process,
 * and appends `instance utime_us=U stime_us=S maxrss_kb=M status=X started_ns=T ended_ns=T` to
 * LOG (wait4: the instance and the children it waited for, its stack-trace process among them).
 * It ends, removing SOCKET, when its stdin closes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IOPRIO_CLASS_IDLE 3
#define IOPRIO_CLASS_SHIFT 13
#define IOPRIO_WHO_PROCESS 1

static unsigned long long now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000u + (unsigned long long)now.tv_nsec;
}

static void start_instance(int connection, const char *handler)
{
    setpriority(PRIO_PROCESS, 0, 9);
    syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT);
    int adjust = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adjust >= 0) {
        (void)!write(adjust, "500", 3);
        close(adjust);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    if (connection != 3) {
        dup2(connection, 3);  /* dup2 clears FD_CLOEXEC on the copy */
        close(connection);
    } else {
        fcntl(3, F_SETFD, 0);
    }
    char pid[32];
    snprintf(pid, sizeof pid, "LISTEN_PID=%d", (int)getpid());
    char *environment[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LISTEN_FDS=1", pid, NULL};
    char *arguments[] = {(char *)handler, NULL};
    execve(handler, arguments, environment);
    _exit(127);
}

static void serve(int connection, const char *handler, const char *path)
{
    unsigned long long started = now_ns();
    pid_t instance = fork();
    if (instance < 0) _exit(1);
    if (instance == 0) start_instance(connection, handler);
    close(connection);
    int status = 0;
    struct rusage usage;
    memset(&usage, 0, sizeof usage);
    while (wait4(instance, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    FILE *log = fopen(path, "a");
    if (!log) _exit(1);
    fprintf(log, "instance utime_us=%lld stime_us=%lld maxrss_kb=%ld status=%d started_ns=%llu ended_ns=%llu\n",
            (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
            (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec, usage.ru_maxrss, status, started,
            now_ns());
    fclose(log);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: coredump-activate SOCKET HANDLER LOG\n");
        return 2;
    }
    const char *socket_path = argv[1], *handler = argv[2], *log = argv[3];
    int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (listener < 0 || strlen(socket_path) >= sizeof address.sun_path) return 2;
    strcpy(address.sun_path, socket_path);
    unlink(socket_path);
    mode_t old = umask(0177);
    int bound = bind(listener, (struct sockaddr *)&address, sizeof address);
    umask(old);
    if (bound < 0 || chmod(socket_path, 0600) < 0 || listen(listener, SOMAXCONN) < 0) {
        perror("coredump-activate: listen");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    struct pollfd fds[2] = {{.fd = listener, .events = POLLIN}, {.fd = STDIN_FILENO, .events = POLLIN}};
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        if (poll(fds, 2, 100) < 0 && errno != EINTR) break;
        if (fds[1].revents) {
            char byte;
            if (read(STDIN_FILENO, &byte, 1) <= 0) break;
        }
        if (fds[0].revents & POLLIN) {
            int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
            if (connection < 0) continue;
            pid_t waiter = fork();
            if (waiter == 0) {
                close(listener);
                serve(connection, handler, log);
            }
            close(connection);
        }
    }
    unlink(socket_path);
    while (wait(NULL) > 0) {
    }
    return 0;
}
