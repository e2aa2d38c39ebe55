/*
 * memory_attach.c: attachments from memory (crashport_attach_bytes, _text, _ring, _append,
 * crashport_detach_memory), then a crash.
 *
 *   memory_attach crash      a text, bytes with a content type of their own, a 64 KiB log ring
 *                            with 10000 lines appended (it wrapped), one attached and detached
 *   memory_attach threads    four threads append to the ring and set the text as fast as they
 *                            can while the main thread crashes
 *   memory_attach limits     each limit said (printed), then a crash with an 8 MiB buffer set
 *   memory_attach error      the same as crash, but a handled error and a clean exit
 */
#include <crashport.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void attach_all(void)
{
    printf("text %d\n", crashport_attach_text("state.txt", "state: serving\nqueue: 3\n"));
    unsigned char blob[256];
    for (int i = 0; i < 256; i++) blob[i] = (unsigned char)i;
    printf("bytes %d\n", crashport_attach_bytes("blob.bin", "application/x-ledger-state", blob, sizeof blob));
    printf("ring %d\n", crashport_attach_ring("app.log", NULL, 64 * 1024));
    char line[64];
    for (int i = 0; i < 10000; i++) {
        int length = snprintf(line, sizeof line, "line %05d\n", i);
        if (crashport_attach_append("app.log", line, (size_t)length) != 0) printf("append failed\n");
    }
    int set = crashport_attach_text("gone.txt", "never in a report");
    printf("gone %d %d\n", set, crashport_detach_memory("gone.txt"));
}

static void *hammer(void *argument)
{
    long id = (long)argument;
    char line[64];
    for (unsigned long i = 0;; i++) {
        int length = snprintf(line, sizeof line, "thread %ld line %lu\n", id, i);
        crashport_attach_append("app.log", line, (size_t)length);
        if (i % 64 == 0) crashport_attach_text("state.txt", id % 2 ? "odd thread's state\n" : "even thread's state\n");
    }
    return NULL;
}

__attribute__((noinline)) static int crash(void)
{
    int *volatile nothing = NULL;
    return *nothing;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "crash";
    crashport_install(NULL);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(mode, "threads") == 0) {
        crashport_attach_ring("app.log", "text/plain", 4096);
        for (long i = 0; i < 4; i++) {
            pthread_t thread;
            pthread_create(&thread, NULL, hammer, (void *)i);
        }
        struct timespec wait = {0, 50 * 1000000L};
        nanosleep(&wait, NULL);
        return crash();
    }
    if (strcmp(mode, "limits") == 0) {
        size_t big = 8u << 20;
        unsigned char *bytes = malloc(big);
        memset(bytes, 'x', big);
        printf("8 MiB: %d\n", crashport_attach_bytes("big.bin", NULL, bytes, big));
        free(bytes);
        printf("slash: %d\n", crashport_attach_text("a/b", "x") == -EINVAL);
        printf("dots: %d\n", crashport_attach_text("..", "x") == -EINVAL);
        /* The watcher's own file's name: kept, but never in the watcher's file's place. */
        printf("reserved: %d\n", crashport_attach_text("system.log", "forged: all is well\n"));
        printf("empty: %d\n", crashport_attach_text("", "x") == -EINVAL);
        printf("long: %d\n", crashport_attach_text("0123456789012345678901234567890123456789012345678901234567890123", "x") ==
                                 -ENAMETOOLONG);
        printf("append to a buffer: %d\n", crashport_attach_append("big.bin", "x", 1) == -EINVAL);
        printf("append to none: %d\n", crashport_attach_append("none", "x", 1) == -ENOENT);
        printf("empty ring: %d\n", crashport_attach_ring("ring", NULL, 0) == -EINVAL);
        char name[16];
        int full = 0;
        for (int i = 0; i < 16; i++) {
            snprintf(name, sizeof name, "n%d", i);
            full = crashport_attach_text(name, "x");
        }
        printf("seventeenth: %d\n", full == -ENOSPC);
        printf("type cut: %d\n",
               crashport_attach_bytes("big.bin", "application/a-content-type-that-is-far-longer-than-sixty-three-bytes-x", "y", 1) ==
                   CRASHPORT_TRUNCATED);
        printf("set again: %d\n", crashport_attach_bytes("big.bin", NULL, "z", 1));
        return crash();
    }
    attach_all();
    if (strcmp(mode, "error") == 0) {
        printf("error %d\n", crashport_report_error("LedgerError", "a handled error with memory attachments"));
        return 0;
    }
    return crash();
}
