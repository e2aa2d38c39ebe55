/*
 * stubcost.c: what libcrashport costs a program that never crashes. Built twice by tools/bench:
 * linked with libcrashport (-DWITH_STUB) and without. Prints one line of key=value figures:
 *   install_us   crashport_install() on a socketpair (WITH_STUB only)
 *   thread_ns    median of 15 rounds of (create + join of 200 threads) / 200
 *   rss_kb_per_thread  RSS growth per parked thread (200 parked threads)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_STUB
#include "crashport.h"
#endif

static double now_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec * 1e9 + time.tv_nsec;
}

static void *quick(void *argument) { return argument; }

static pthread_barrier_t parked;
static void *park(void *argument) {
    pthread_barrier_wait(&parked);
    pause();
    return argument;
}

static long rss_kb(void) {
    FILE *file = fopen("/proc/self/status", "r");
    char line[256];
    long value = 0;
    while (file && fgets(line, sizeof line, file)) {
        if (strncmp(line, "VmRSS:", 6) == 0) value = atol(line + 6);
    }
    if (file) fclose(file);
    return value;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    double install_us = 0;
#ifdef WITH_STUB
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) return 1;
    crashport_options options = CRASHPORT_OPTIONS_DEFAULT;
    options.fd = pair[0];
    double start = now_ns();
    if (crashport_install(&options) != 0) return 2;
    install_us = (now_ns() - start) / 1e3;
#endif
    enum { threads = 200, rounds = 15 };
    double per_thread[rounds];
    pthread_t handles[threads];
    for (int round = 0; round < rounds; round++) {
        double start = now_ns();
        for (int i = 0; i < threads; i++) pthread_create(&handles[i], NULL, quick, NULL);
        for (int i = 0; i < threads; i++) pthread_join(handles[i], NULL);
        per_thread[round] = (now_ns() - start) / threads;
    }
    qsort(per_thread, rounds, sizeof per_thread[0], compare);
    long before = rss_kb();
    pthread_barrier_init(&parked, NULL, threads + 1);
    for (int i = 0; i < threads; i++) pthread_create(&handles[i], NULL, park, NULL);
    pthread_barrier_wait(&parked);
    long after = rss_kb();
    printf("install_us=%.1f thread_ns=%.0f rss_kb_per_thread=%.2f\n", install_us, per_thread[rounds / 2],
           (double)(after - before) / threads);
    return 0;
}
