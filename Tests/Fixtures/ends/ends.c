/* ends: a sidecar client that ends in a chosen way (Tests/EndToEndTests/AbnormalEndTests.swift).
 * It says "ready PID" on stdout, then waits for a line on stdin, then:
 *   crumbs      (two breadcrumbs and an annotation before "ready") waits to be killed
 *   hog         allocates and touches memory until something stops it (a memory cgroup's limit)
 *   exit N      exit(N): GOODBYE from the stub's on_exit hook
 *   _exit N     _exit(N): GOODBYE from the stub's interposed _exit
 *   raw N       the exit_group system call itself: no GOODBYE, an exit the stub never sees
 *   exec        execs itself as "quit": the connection (close-on-exec) closes with the process
 *               alive; the new image connects again, says nothing on stdout, and exits 0
 * Linked with libcrashport for the API. */
#define _GNU_SOURCE
#include <crashport.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) static void hog(void)
{
    for (;;) {
        char *block = malloc(1 << 20);
        if (block == NULL) continue;
        memset(block, 0x5a, 1 << 20);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "crumbs";
    int status = argc > 2 ? atoi(argv[2]) : 0;
    if (strcmp(mode, "quit") == 0) return 0;
    if (strcmp(mode, "crumbs") == 0) {
        crashport_annotate("stage", "serving");
        crashport_breadcrumb("boot", "config loaded");
        crashport_breadcrumb("net", "listening on :8080");
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 2;
    if (strcmp(mode, "crumbs") == 0) {
        for (;;) pause();
    }
    if (strcmp(mode, "hog") == 0) hog();
    if (strcmp(mode, "exit") == 0) exit(status);
    if (strcmp(mode, "_exit") == 0) _exit(status);
    if (strcmp(mode, "raw") == 0) syscall(SYS_exit_group, status);
    if (strcmp(mode, "exec") == 0) execl("/proc/self/exe", argv[0], "quit", (char *)NULL);
    return 1;
}
