/* threads-segv: three threads, then a store to an unmapped address in the main thread, three
 * named frames deep, with no stub loaded: the kernel's core handler is all that sees it.
 * KernelCoreCaptureTests compares what the core and its report say with what this program knows:
 * the fault address, the thread count, the functions on each stack. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define FAULT_ADDRESS ((volatile int *)(uintptr_t)0xdead0000)

static atomic_int started;

__attribute__((noinline)) void worker_wait(void) {
    atomic_fetch_add(&started, 1);
    for (;;) pause();
}

static void *worker(void *arg) {
    (void)arg;
    worker_wait();
    return NULL;
}

__attribute__((noinline)) void crash_here(volatile int *p) { *p = 42; }

__attribute__((noinline)) void crash_caller(volatile int *p) {
    crash_here(p);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

int main(void) {
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, worker, NULL);
    while (atomic_load(&started) < 2) usleep(1000);
    crash_caller(FAULT_ADDRESS);
    return 0;
}
