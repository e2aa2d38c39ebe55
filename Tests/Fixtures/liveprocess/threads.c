// A live target for InspectionTests: three named threads, a known 64-byte pattern in a global
// buffer, and 16 readable bytes just before an unmapped page. Prints "PID PATTERN EDGE" once
// everything is in place, then sleeps until killed.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

unsigned char pattern[64];
static pthread_barrier_t ready;

static void *worker(void *name) {
    pthread_setname_np(pthread_self(), (const char *)name);
    pthread_barrier_wait(&ready);
    for (;;) pause();
    return NULL;
}

int main(void) {
    for (int i = 0; i < 64; i++) pattern[i] = (unsigned char)(i * 7 + 3);
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return 1;
    munmap(pages + page, page);
    unsigned char *edge = pages + page - 16;
    memset(edge, 0xAB, 16);

    static const char *names[] = {"cp-alpha", "cp-beta", "cp-gamma"};
    pthread_barrier_init(&ready, NULL, 4);
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) pthread_create(&threads[i], NULL, worker, (void *)names[i]);
    pthread_barrier_wait(&ready);
    printf("%d %lx %lx\n", (int)getpid(), (unsigned long)(uintptr_t)pattern, (unsigned long)(uintptr_t)edge);
    fflush(stdout);
    for (;;) pause();
}
