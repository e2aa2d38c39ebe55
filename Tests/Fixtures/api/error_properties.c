/* Handled errors with their own properties and files (crashport_report_error_with), linked with
 * libcrashport (Tests/EndToEndTests/ErrorPropertiesTests.swift):
 *   threads       two threads report 3 errors each, every round released at once by a barrier,
 *                 each with its own thread and round properties (and a global annotation);
 *                 prints "thread T round N RESULT" per report
 *   files DIR     an error with DIR/error.log as its own file (DIR/app.log attached for every
 *                 report), then one past every limit (20 properties, a cut key and value, 6
 *                 files, one of them a path too long), then a plain crashport_report_error,
 *                 then bad arguments; prints each result
 */
#define _GNU_SOURCE
#include <crashport.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3

static pthread_barrier_t round_start;

static void *reporter(void *argument)
{
    const char *name = argument;
    for (int round = 0; round < ROUNDS; round++) {
        char message[64], round_text[16], request[64];
        snprintf(message, sizeof message, "thread %s round %d", name, round);
        snprintf(round_text, sizeof round_text, "%d", round);
        snprintf(request, sizeof request, "req-%s-%d", name, round);
        crashport_property properties[] = {
            {"thread", name}, {"round", round_text}, {"request", request}, {name, "only mine"}};
        pthread_barrier_wait(&round_start);
        int result = crashport_report_error_with("ThreadError", message, properties, 4, NULL, 0);
        printf("thread %s round %d %d\n", name, round, result);
    }
    return NULL;
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    if (file == NULL) exit(3);
    fputs(text, file);
    fclose(file);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "threads") == 0) {
        crashport_annotate("app", "fixture");
        pthread_barrier_init(&round_start, NULL, 2);
        pthread_t a, b;
        pthread_create(&a, NULL, reporter, "A");
        pthread_create(&b, NULL, reporter, "B");
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "files") == 0) {
        char own[4096], global[4096];
        snprintf(own, sizeof own, "%s/error.log", argv[2]);
        snprintf(global, sizeof global, "%s/app.log", argv[2]);
        write_file(own, "the request that failed\n");
        write_file(global, "the program's log\n");
        crashport_attach_file(global);
        crashport_annotate("user", "alice");
        const char *files[] = {own};
        crashport_property properties[] = {{"order", "1234"}, {"user", "bob"}, {"note", "multi\nline"}};
        printf("own %d\n", crashport_report_error_with("OrderError", "order 1234 refused", properties, 3, files, 1));

        /* Past every limit: 20 properties (the first 16 kept), a key of 100 bytes and a value of
         * 2000 (cut), 6 files (4 kept; one of the others too long for a path). */
        static char keys[20][128], long_value[2001], long_path[1500];
        crashport_property many[20];
        for (int index = 0; index < 20; index++) {
            snprintf(keys[index], sizeof keys[index], "key%02d", index);
            many[index] = (crashport_property){keys[index], "v"};
        }
        memset(keys[1], 'k', 100);
        keys[1][100] = '\0';
        memset(long_value, 'x', 2000);
        many[2].value = long_value;
        memset(long_path, 'p', sizeof long_path - 1);
        long_path[0] = '/';
        const char *six[] = {own, long_path, global, "/nonexistent/a", "/nonexistent/b", "/nonexistent/c"};
        printf("limits %d\n", crashport_report_error_with("LimitError", "past every limit", many, 20, six, 6));

        printf("plain %d\n", crashport_report_error("PlainError", "no properties of its own"));

        crashport_property empty[] = {{"", "x"}};
        crashport_property null_key[] = {{NULL, "x"}};
        const char *null_file[] = {NULL};
        printf("invalid %d %d %d %d\n", crashport_report_error_with("E", "m", empty, 1, NULL, 0),
               crashport_report_error_with("E", "m", null_key, 1, NULL, 0),
               crashport_report_error_with("E", "m", NULL, 0, null_file, 1),
               crashport_report_error_with("E", "m", NULL, 2, NULL, 0));
        return 0;
    }
    fprintf(stderr, "usage: error_properties threads | files DIR\n");
    return 2;
}
