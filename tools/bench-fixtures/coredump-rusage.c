/*
 * coredump-rusage.c: tools/bench's `host` section puts this in front of systemd-coredump in
 * core_pattern, so that the helper the kernel starts per crash can be measured:
 *
 *   |/tmp/.../coredump-rusage /lib/systemd/systemd-coredump %P %u %g %s %t 9223372036854775808 %h %d
 *
 * It forks, the child execs argv[1] with argv[1..] (the same arguments the package's pattern
 * passes, expanded by the kernel) and the core on the same stdin; this process closes its own
 * copy of the pipe at once (so the kernel, which with core_pipe_limit > 0 waits for the pipe's
 * readers to go, waits for systemd-coredump's copies only), waits, and appends
 * `helper pid=%P utime_us=U stime_us=S maxrss_kb=M status=X` to argv[0] + ".log". Its own cost
 * (one fork and a wait4) is a fraction of a millisecond and is not counted.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDIN_FILENO);  /* drops this process's copy of the core pipe */
    int status = 0;
    struct rusage usage;
    memset(&usage, 0, sizeof usage);
    while (wait4(child, &status, 0, &usage) < 0) {
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.log", argv[0]);
    FILE *log = fopen(path, "a");
    if (!log) return 1;
    fprintf(log, "helper pid=%s utime_us=%lld stime_us=%lld maxrss_kb=%ld status=%d\n", argv[2],
            (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
            (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec, usage.ru_maxrss, status);
    fclose(log);
    return 0;
}
