/*
 * threads.c: `threads N` starts N threads that each use a few KB of stack and then park in
 * park_here(); when all are parked, the main thread faults in crash_main(). For the
 * whole-process capture tests (every thread unwound to its parking function) and the capture
 * benchmark (1 / 100 / 500 threads).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_barrier_t all_parked;
volatile int sink;

NOINLINE void park_here(void) {
    pthread_barrier_wait(&all_parked);
    for (;;) pause();
}

NOINLINE void use_stack(int depth) {
    char buffer[1024];
    memset(buffer, depth, sizeof buffer);
    sink += buffer[depth % sizeof buffer];
    if (depth > 0) use_stack(depth - 1); else park_here();
    sink++;
}

static void *thread_main(void *argument) {
    (void)argument;
    use_stack(4); /* about 5 KB of stack in use */
    return NULL;
}

NOINLINE void crash_main(void) { *(volatile int *)8 = 1; }

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 64;
    pthread_barrier_init(&all_parked, NULL, (unsigned)count + 1);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 256 * 1024);
    for (int i = 0; i < count; i++) {
        pthread_t thread;
        if (pthread_create(&thread, &attributes, thread_main, NULL) != 0) {
            perror("pthread_create");
            return 3;
        }
        char name[16];
        snprintf(name, sizeof name, "parked-%d", i);
        pthread_setname_np(thread, name);
    }
    pthread_barrier_wait(&all_parked);
    crash_main();
    sink++;
    return 0;
}
