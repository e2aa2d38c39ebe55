/* Handled errors with a stack of their own (crashport_report_error_stack), linked with libcrashport
 * (Tests/EndToEndTests/ErrorStackTests.swift). Three reports, each from report_saved(), called
 * by main after the stack it reports has returned:
 *   StackError   3 addresses saved by backtrace(3) in stack_inner <- stack_middle <- stack_outer
 *   ScriptError  an interpreter's text frames (function, file, line), one with a newline and a
 *                terminal escape, one with a file name of 300 bytes, and an address in no module
 *   DeepError    10^6 addresses
 * Prints "addresses R", "text R", "deep R MS" (the call's result and how long it took), and
 * "invalid R" for NULL frames with a count.
 */
#define _GNU_SOURCE
#include <crashport.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *saved[3];
static volatile int depth_seen;

__attribute__((noinline)) static void stack_inner(void)
{
    backtrace(saved, 3);
    depth_seen++;
}

__attribute__((noinline)) static void stack_middle(void)
{
    stack_inner();
    depth_seen++;
}

__attribute__((noinline)) static void stack_outer(void)
{
    stack_middle();
    depth_seen++;
}

__attribute__((noinline)) static int report_saved(const char *type, const char *message, const crashport_frame *frames,
                                                  size_t count)
{
    int result = crashport_report_error_stack(type, message, NULL, 0, NULL, 0, frames, count);
    depth_seen++;
    return result;
}

int main(void)
{
    stack_outer();
    crashport_frame addresses[3];
    for (int index = 0; index < 3; index++) {
        addresses[index] = (crashport_frame){(uintptr_t)saved[index], NULL, NULL, 0};
    }
    printf("addresses %d\n", report_saved("StackError", "three addresses", addresses, 3));

    char long_file[301];
    memset(long_file, 'f', 300);
    long_file[300] = '\0';
    crashport_frame text[] = {
        {0, "handle_request", "app/views.py", 42},
        {0, "evil\n\x1b[31mname", long_file, 7},
        {0x10, NULL, NULL, 0},
        {0, "<module>", "app/main.py", 1},
    };
    printf("text %d\n", report_saved("ScriptError", "KeyError: 'user'", text, 4));

    size_t deep_count = 1000000;
    crashport_frame *deep = calloc(deep_count, sizeof *deep);
    if (deep == NULL) return 2;
    for (size_t index = 0; index < deep_count; index++) deep[index].address = (uintptr_t)saved[index % 3];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int result = report_saved("DeepError", "a million frames", deep, deep_count);
    clock_gettime(CLOCK_MONOTONIC, &end);
    long ms = (end.tv_sec - start.tv_sec) * 1000 + (end.tv_nsec - start.tv_nsec) / 1000000;
    printf("deep %d %ld\n", result, ms);
    free(deep);
    printf("invalid %d\n", crashport_report_error_stack("X", "y", NULL, 0, NULL, 0, NULL, 1));
    return 0;
}
