/* tools/bench trace: what --trace-exit costs a program, and what the watcher's heartbeat check
 * costs. `tracecost threads N` creates and joins N threads one after another; `fork N` forks,
 * execs /bin/true and waits N times; `syscalls N` makes N getppid calls; `sleep S` beats
 * (crashport_heartbeat, from the preloaded stub) every 100 ms for S seconds; `kill` says ready
 * and waits to be killed. Each prints key_ns=<nanoseconds per operation>. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern void crashport_heartbeat(void) __attribute__((weak));

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long count = argc > 2 ? atol(argv[2]) : 1000;
    unsigned long long start = now_ns();
    if (!strcmp(mode, "threads")) {
        for (long i = 0; i < count; i++) {
            pthread_t thread;
            pthread_create(&thread, NULL, nothing, NULL);
            pthread_join(thread, NULL);
        }
        printf("tracecost thread_ns=%llu\n", (now_ns() - start) / (unsigned long long)count);
    } else if (!strcmp(mode, "fork")) {
        for (long i = 0; i < count; i++) {
            pid_t child = fork();
            if (child == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            }
            waitpid(child, NULL, 0);
        }
        printf("tracecost fork_ns=%llu\n", (now_ns() - start) / (unsigned long long)count);
    } else if (!strcmp(mode, "syscalls")) {
        for (long i = 0; i < count; i++) syscall(SYS_getppid);
        printf("tracecost syscall_ns=%llu\n", (now_ns() - start) / (unsigned long long)count);
    } else if (!strcmp(mode, "sleep")) {
        for (long i = 0; i < count * 10; i++) {
            if (crashport_heartbeat) crashport_heartbeat();
            usleep(100000);
        }
    } else if (!strcmp(mode, "kill")) {
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    return 0;
}
