/* The host level's crashes (Tests/EndToEndTests/HostLevelTests.swift): programs that load no
 * stub, crash in ways no in-process handler sees, and are reported by the kernel's core handler.
 *
 *   host segv             a write through a null pointer in crash_here, called from main
 *   host threads N        N threads parked, then the main thread crashes in crash_here
 *   host daemon FILE      double-forks; the grandchild, once its parent has exited and it is
 *                         reparented, writes its pid to FILE and crashes in crash_here
 *   host heap MB          touches MB MiB of heap, then crashes in crash_here
 *   host flood N          forks N children that crash in crash_here at the same moment (a pipe
 *                         closed releases them all), waits for them, and exits 0
 *   host sparse GB [FILE] maps GB GiB (MAP_NORESERVE) and touches one page in every 64 MiB of it:
 *                         a core streams every byte of it, zeros for the rest, as it goes; writes
 *                         its pid to FILE when given, then crashes in crash_here
 * Built static too (-static): the same crash, in a program no stub could be preloaded into. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Null, through a volatile pointer so that the compiler cannot turn the write into a trap. */
int *volatile nowhere;

__attribute__((noinline)) void crash_here(int depth) { *nowhere = depth; }

__attribute__((noinline)) void call_crash(int depth) {
    crash_here(depth + 1);
    __asm__ volatile("" ::: "memory");
}

static void *park(void *unused) {
    (void)unused;
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "segv";
    if (strcmp(what, "threads") == 0) {
        int count = argc > 2 ? atoi(argv[2]) : 4;
        for (int index = 0; index < count; index++) {
            pthread_t thread;
            pthread_create(&thread, NULL, park, NULL);
        }
        usleep(100000);
    } else if (strcmp(what, "daemon") == 0) {
        /* The classic double fork: the daemon's parent exits (reaped here), and its child, now
         * reparented, crashes once it sees that. */
        pid_t middle = fork();
        if (middle != 0) {
            waitpid(middle, NULL, 0);
            return 0;
        }
        pid_t parent = getpid();
        if (fork() != 0) _exit(0);
        /* A daemon lets go of its caller's descriptors (which wait for it otherwise). */
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        while (getppid() == parent) usleep(10000);
        FILE *file = fopen(argv[2], "w");
        fprintf(file, "%d\n", (int)getpid());
        fclose(file);
    } else if (strcmp(what, "flood") == 0) {
        int count = argc > 2 ? atoi(argv[2]) : 100;
        int gate[2];
        if (pipe(gate) != 0) return 3;
        for (int index = 0; index < count; index++) {
            if (fork() == 0) {
                char byte;
                close(gate[1]);
                (void)!read(gate[0], &byte, 1);
                call_crash(1);
                _exit(0);
            }
        }
        close(gate[0]);
        close(gate[1]);
        while (wait(NULL) > 0) {
        }
        return 0;
    } else if (strcmp(what, "sparse") == 0) {
        size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 1) << 30;
        char *sparse = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (sparse == MAP_FAILED) return 3;
        for (size_t offset = 0; offset < size; offset += (size_t)64 << 20) sparse[offset] = 1;
        if (argc > 3) {
            FILE *file = fopen(argv[3], "w");
            fprintf(file, "%d\n", (int)getpid());
            fclose(file);
        }
    } else if (strcmp(what, "heap") == 0) {
        size_t size = (size_t)(argc > 2 ? atol(argv[2]) : 64) << 20;
        char *heap = malloc(size);
        for (size_t offset = 0; offset < size; offset += 4096) heap[offset] = (char)offset;
    }
    call_crash(1);
    return 0;
}
