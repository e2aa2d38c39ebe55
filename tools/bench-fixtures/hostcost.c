/*
 * hostcost.c: the program tools/bench's `host` section crashes, once under `crashport watch
 * --host` and once under systemd-coredump, each as the machine's core handler. No stub, no
 * handler of its own: the kernel's core_pattern is the only thing that sees the crash.
 *
 *   hostcost crash THREADS HEAP_MB   fork a child that allocates HEAP_MB MB and touches every
 *                                    page of it, starts THREADS - 1 threads that each touch about
 *                                    5 KB of stack and park, then (all threads parked) stamps
 *                                    CLOCK_MONOTONIC into memory shared with this parent and
 *                                    faults in the main thread. The parent's waitpid() returns
 *                                    once the kernel has finished the dump and the child is a
 *                                    zombie: that delta is how long the dying process was held.
 *                                    Prints `hostcost pid=P fault_at_ns=T reaped_at_ns=T
 *                                    held_ns=N signal=S core_dumped=0|1`.
 *
 * The heap is made to compress as real heaps roughly do: the first quarter of each page is
 * pseudo-random (xorshift64), the rest zero, so zstd keeps about a quarter of it. An all-zero heap
 * would cost a compressing handler nothing; an all-random one more than any real program.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static pthread_barrier_t parked;

static void *park(void *argument)
{
    (void)argument;
    volatile char stack[5000];  /* as Tests/Fixtures/corpus/threads.c: a few KB of stack in use */
    for (size_t i = 0; i < sizeof stack; i++) stack[i] = (char)i;
    pthread_barrier_wait(&parked);
    for (;;) pause();
    return NULL;
}

static void touch_heap(size_t megabytes)
{
    size_t size = megabytes << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    if (size == 0) return;
    unsigned char *heap = malloc(size);
    if (!heap) {
        perror("hostcost: malloc");
        _exit(2);
    }
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (size_t offset = 0; offset < size; offset += page) {
        uint64_t *words = (uint64_t *)(heap + offset);
        for (size_t i = 0; i < page / 4 / sizeof *words; i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            words[i] = state;
        }
        memset(heap + offset + page / 4, 0, page - page / 4);
    }
    /* Kept reachable so that the compiler cannot drop it. */
    __asm__ volatile("" : : "r"(heap) : "memory");
}

static int crash(int threads, size_t megabytes)
{
    volatile uint64_t *stamp = mmap(NULL, sizeof *stamp, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (stamp == MAP_FAILED) {
        perror("hostcost: mmap");
        return 2;
    }
    *stamp = 0;
    pid_t child = fork();
    if (child < 0) {
        perror("hostcost: fork");
        return 2;
    }
    if (child == 0) {
        /* A pipe or socket handler is not bound by RLIMIT_CORE (except 1, the kernel's recursion
           guard); raised anyway so that a file pattern would dump too. */
        struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};
        setrlimit(RLIMIT_CORE, &unlimited);
        touch_heap(megabytes);
        pthread_barrier_init(&parked, NULL, (unsigned)threads);
        for (int i = 1; i < threads; i++) {
            pthread_t thread;
            if (pthread_create(&thread, NULL, park, NULL) != 0) {
                perror("hostcost: pthread_create");
                _exit(2);
            }
        }
        pthread_barrier_wait(&parked);
        *stamp = now_ns();
        *(volatile int *)0 = 1;
        _exit(3);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
    }
    uint64_t reaped = now_ns();
    if (*stamp == 0) {
        fprintf(stderr, "hostcost: the child ended before faulting (status %#x)\n", status);
        return 2;
    }
    printf("hostcost pid=%d fault_at_ns=%llu reaped_at_ns=%llu held_ns=%llu signal=%d core_dumped=%d\n", (int)child,
           (unsigned long long)*stamp, (unsigned long long)reaped, (unsigned long long)(reaped - *stamp),
           WIFSIGNALED(status) ? WTERMSIG(status) : 0, WIFSIGNALED(status) && WCOREDUMP(status) ? 1 : 0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "crash") == 0) return crash(atoi(argv[2]), (size_t)atol(argv[3]));
    fprintf(stderr, "usage: hostcost crash THREADS HEAP_MB\n");
    return 2;
}
