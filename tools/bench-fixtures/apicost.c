/* tools/bench api: what the app-facing API costs the program.
 *   apicost calls             ns per crashport_annotate (replacing one key), per
 *                             crashport_breadcrumb, per crashport_attach_append of a 64-byte
 *                             line to a 64 KiB ring, and per buffered fwrite of the same line
 *                             (what a log line costs anyway), medians of 21 batches of 100,000
 *                             calls; and us per crashport_attach_bytes of 1 MiB (21 x 100)
 *   apicost errors N THREADS  THREADS - 1 parked threads, then N crashport_report_error calls
 *                             (N <= 10: the stub's burst), 0.3 s apart, each timed from call to
 *                             return: how long the calling thread is blocked (run it under crashport)
 * Prints "apicost" and key=value words. */
#define _GNU_SOURCE
#include <crashport.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *values, int count)
{
    qsort(values, (size_t)count, sizeof *values, by_value);
    return values[count / 2];
}

static void *park(void *argument)
{
    (void)argument;
    pause();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "calls") == 0) {
        enum { batches = 21, calls = 100000 };
        uint64_t annotate[batches], breadcrumb[batches], append[batches], fwrite_ns[batches], set_ns[batches];
        char line[64];
        memset(line, 'x', sizeof line - 1);
        line[sizeof line - 1] = '\n';
        static char state[1 << 20];
        crashport_attach_ring("app.log", NULL, 64 * 1024);
        FILE *sink = fopen("/dev/null", "w");
        if (sink == NULL) return 1;
        setvbuf(sink, NULL, _IOFBF, 1 << 16);
        char value[32];
        for (int batch = 0; batch < batches; batch++) {
            uint64_t start = now_ns();
            for (int call = 0; call < calls; call++) {
                value[0] = (char)('a' + call % 26);
                value[1] = '\0';
                crashport_annotate("request", value);
            }
            annotate[batch] = (now_ns() - start) / calls;
            start = now_ns();
            for (int call = 0; call < calls; call++) crashport_breadcrumb("http", "GET /inventory 200");
            breadcrumb[batch] = (now_ns() - start) / calls;
            start = now_ns();
            for (int call = 0; call < calls; call++) crashport_attach_append("app.log", line, sizeof line);
            append[batch] = (now_ns() - start) / calls;
            start = now_ns();
            for (int call = 0; call < calls; call++) fwrite(line, 1, sizeof line, sink);
            fwrite_ns[batch] = (now_ns() - start) / calls;
            start = now_ns();
            for (int call = 0; call < 100; call++) crashport_attach_bytes("state.bin", NULL, state, sizeof state);
            set_ns[batch] = (now_ns() - start) / 100;
        }
        fclose(sink);
        printf("apicost annotate_ns=%llu breadcrumb_ns=%llu append_ns=%llu fwrite_ns=%llu attach_1mib_ns=%llu\n",
               (unsigned long long)median(annotate, batches), (unsigned long long)median(breadcrumb, batches),
               (unsigned long long)median(append, batches), (unsigned long long)median(fwrite_ns, batches),
               (unsigned long long)median(set_ns, batches));
        return 0;
    }
    if (argc > 3 && strcmp(argv[1], "errors") == 0) {
        int count = atoi(argv[2]), threads = atoi(argv[3]);
        if (count < 1 || count > 10) return 2;
        for (int thread = 1; thread < threads; thread++) {
            pthread_t parked;
            pthread_create(&parked, NULL, park, NULL);
        }
        usleep(100 * 1000);
        uint64_t blocked[10];
        for (int call = 0; call < count; call++) {
            /* Each call meets an idle watcher: the one before it has had its report written
             * (`crashport run` writes reports on its one thread, in order). */
            usleep(300 * 1000);
            uint64_t start = now_ns();
            int result = crashport_report_error("BenchError", "measured");
            blocked[call] = now_ns() - start;
            if (result != 0) {
                fprintf(stderr, "crashport_report_error: %d\n", result);
                return 1;
            }
        }
        printf("apicost error_blocked_ns=%llu\n", (unsigned long long)median(blocked, count));
        return 0;
    }
    return 2;
}
