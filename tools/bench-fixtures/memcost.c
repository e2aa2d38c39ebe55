/* tools/bench memory: a program that allocates steadily near its memory cgroup's limit, for what
 * --trace-exit and the pressure snapshots (Sources/Watcher/Observing/PressureSampler.swift) cost it.
 * `memcost steady MB N` keeps MB MiB of fresh anonymous memory: N times it maps one more MiB,
 * touches every page and unmaps the oldest (mmap and munmap directly: malloc would reuse its
 * freed chunks without touching the kernel), then prints alloc_ns=<ns per MiB>. `memcost hold
 * MB S` touches MB MiB, says "ready" and sleeps S seconds. `memcost burst` idles half a second
 * in idle_before_burst, then maps and touches one MiB after another in grow_in_a_burst until
 * the OOM killer ends it: from idle to the limit between two of the sampler's looks. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1UL << 20)

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static char *fresh_mib(void)
{
    char *block = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    for (size_t page = 0; page < MIB; page += 4096) block[page] = 1;
    return block;
}

__attribute__((noinline)) static void idle_before_burst(void)
{
    usleep(500000);
}

__attribute__((noinline)) static void grow_in_a_burst(void)
{
    for (;;) fresh_mib();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "burst")) {
        idle_before_burst();
        grow_in_a_burst();
    }
    long megabytes = argc > 2 ? atol(argv[2]) : 32;
    long count = argc > 3 ? atol(argv[3]) : 1000;
    if (megabytes < 1) megabytes = 1;
    char **ring = calloc((size_t)megabytes, sizeof *ring);
    for (long i = 0; i < megabytes; i++) ring[i] = fresh_mib();
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "hold")) {
        printf("ready\n");
        sleep((unsigned)count);
        return 0;
    }
    unsigned long long start = now_ns();
    for (long i = 0; i < count; i++) {
        long slot = i % megabytes;
        munmap(ring[slot], MIB);
        ring[slot] = fresh_mib();
    }
    printf("memcost alloc_ns=%llu\n", (now_ns() - start) / (unsigned long long)count);
    return 0;
}
