/*
 * crash.c: the crash corpus. `crash MODE` dies the way MODE names, through a fixed chain of
 * functions (main -> level_one -> level_two -> crash_MODE) that the end-to-end tests expect to
 * see, in that order, in the report. Built -O2 with and without frame pointers; the calls go
 * through a function pointer and are followed by work, so the compiler can neither inline nor
 * tail-call them away.
 *
 * Modes that do not crash exercise pass-through: exit codes, stdout, stdin, arguments.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;

NOINLINE void crash_null(void) { *(volatile int *)0 = 42; }

NOINLINE void crash_abort(void) { abort(); }

NOINLINE void crash_fpe(void) {
    volatile int zero = 0;
    sink = 100 / zero;
}

NOINLINE void crash_ill(void) { __builtin_trap(); }

NOINLINE void crash_bus(void) {
    char path[] = "/tmp/crashport-bus-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 4096) != 0) _exit(3);
    volatile char *page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) _exit(3);
    if (ftruncate(fd, 0) != 0) _exit(3); /* the mapping now lies beyond the end of the file */
    unlink(path);
    sink = page[0];
}

NOINLINE void crash_kill(void) { kill(getpid(), SIGSEGV); }

NOINLINE void level_two(void (*crash)(void)) {
    crash();
    sink++;
}

NOINLINE void level_one(void (*crash)(void)) {
    level_two(crash);
    sink++;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "null";
    static const struct { const char *name; void (*crash)(void); } crashes[] = {
        {"null", crash_null}, {"abort", crash_abort}, {"fpe", crash_fpe},
        {"ill", crash_ill},   {"bus", crash_bus},     {"kill", crash_kill},
    };
    for (size_t i = 0; i < sizeof crashes / sizeof crashes[0]; i++) {
        if (strcmp(mode, crashes[i].name) == 0) {
            level_one(crashes[i].crash);
            sink++;
            return 0;
        }
    }
    if (strcmp(mode, "exit") == 0) return argc > 2 ? atoi(argv[2]) : 0;
    if (strcmp(mode, "echo") == 0) { /* stdin to stdout, arguments after it to stderr */
        char buffer[4096];
        size_t count;
        while ((count = fread(buffer, 1, sizeof buffer, stdin)) > 0) fwrite(buffer, 1, count, stdout);
        for (int i = 2; i < argc; i++) fprintf(stderr, "arg:%s\n", argv[i]);
        const char *value = getenv("CORPUS_VALUE");
        fprintf(stderr, "env:%s\n", value ? value : "(unset)");
        return 0;
    }
    if (strcmp(mode, "marker") == 0) { /* proves the program started */
        FILE *file = fopen(argv[2], "w");
        if (file) fclose(file);
        return 0;
    }
    if (strcmp(mode, "garbage") == 0) { /* hostile bytes on the crashport socket, then a crash */
        const char *fd_text = getenv("CRASHPORT_FD");
        if (fd_text) {
            int fd = atoi(fd_text);
            unsigned char junk[64];
            memset(junk, 0xAB, sizeof junk);
            send(fd, junk, sizeof junk, 0);                      /* bad magic */
            unsigned header[4] = {0x54525043u, 99u, 16u, 2u};    /* bad version */
            send(fd, header, sizeof header, 0);
            unsigned short_header[4] = {0x54525043u, 3u, 9999u, 2u}; /* size disagrees (CP_VERSION 3) */
            send(fd, short_header, sizeof short_header, 0);
            unsigned crash_header[4] = {0x54525043u, 3u, 16u, 2u};   /* a CRASH too short */
            send(fd, crash_header, sizeof crash_header, 0);
        }
        level_one(crash_null);
        return 0;
    }
    fprintf(stderr, "crash: unknown mode %s\n", mode);
    return 2;
}
