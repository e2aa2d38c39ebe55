/*
 * stress.c: crashes that stress the stub.
 *   overflow-thread   runaway recursion on a secondary thread (its own alternate stack)
 *   overflow-main     runaway recursion on the main thread
 *   together N        N threads fault at the same moment
 *   doublefree        abort() from inside malloc (glibc's double-free check)
 *   slow              prints its pid, sleeps a second, then faults (watcher-failure tests)
 *   threads N         starts N idle threads, prints its pid, sleeps a second, then faults
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile int sink;
static pthread_barrier_t start_together;

static void *idle(void *argument) {
    (void)argument;
    for (;;) pause();
    return NULL;
}

__attribute__((noinline)) int recurse(int depth) {
    volatile char pad[128];
    pad[depth % 128] = (char)depth;
    return recurse(depth + 1) + pad[0];
}

static void *overflow_thread(void *argument) {
    (void)argument;
    sink = recurse(0);
    return NULL;
}

__attribute__((noinline)) void fault_now(void) { *(volatile int *)24 = 1; }

static void *fault_together(void *argument) {
    (void)argument;
    pthread_barrier_wait(&start_together);
    fault_now();
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "overflow-thread") == 0) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setstacksize(&attributes, 1 << 20);
        pthread_create(&thread, &attributes, overflow_thread, NULL);
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "overflow-main") == 0) {
        sink = recurse(0);
    } else if (strcmp(mode, "together") == 0) {
        int count = argc > 2 ? atoi(argv[2]) : 4;
        pthread_barrier_init(&start_together, NULL, (unsigned)count);
        pthread_t threads[64];
        for (int i = 0; i < count && i < 64; i++) pthread_create(&threads[i], NULL, fault_together, NULL);
        for (int i = 0; i < count && i < 64; i++) pthread_join(threads[i], NULL);
    } else if (strcmp(mode, "doublefree") == 0) {
        char *volatile block = malloc(64);
        free(block);
        free(block);
    } else if (strcmp(mode, "threads") == 0) {
        int count = argc > 2 ? atoi(argv[2]) : 100;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setstacksize(&attributes, 64 << 10);
        for (int i = 0; i < count; i++) {
            pthread_t thread;
            pthread_create(&thread, &attributes, idle, NULL);
        }
        printf("%d\n", getpid());
        fflush(stdout);
        sleep(1);
        fault_now();
    } else if (strcmp(mode, "slow") == 0) {
        printf("%d\n", getpid());
        fflush(stdout);
        sleep(1);
        fault_now();
    }
    return 0;
}
