/* waiter: says "ready" on stdout, waits for a line on stdin, then crashes in a named function
 * (a NULL store): a program whose crash the test times, so that the sidecar can be stopped,
 * restarted or flooded between the program's start (when the stub connects) and its crash.
 * With "fork" the crash happens in a forked child, which shares the parent's connection; the
 * parent waits for it and exits with its status. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void crash_after_input(volatile int *target)
{
    *target = 42;
}

int main(int argc, char **argv)
{
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 2;
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t child = fork();
        if (child == 0) {
            crash_after_input(NULL);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    }
    crash_after_input(NULL);
    return 0;
}
