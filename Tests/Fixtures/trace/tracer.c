/* tracer PROGRAM [ARGS...]: runs PROGRAM traced by this process from before its first
 * instruction (PTRACE_SEIZE while it waits stopped, before it execs), the way a debugger holds a
 * program, for tests of what crashport does with a process someone else already traces. Every
 * signal goes on to the program; the tracer ends the way the program ended. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tracer PROGRAM [ARGS...]\n");
        return 64;
    }
    pid_t child = fork();
    if (child == 0) {
        raise(SIGSTOP);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, WUNTRACED) != child || !WIFSTOPPED(status)) return 70;
    if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) {
        perror("tracer: PTRACE_SEIZE");
        return 71;
    }
    kill(child, SIGCONT);
    for (;;) {
        if (waitpid(child, &status, __WALL) != child) return 72;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        if (WIFSIGNALED(status)) {
            signal(WTERMSIG(status), SIG_DFL);
            raise(WTERMSIG(status));
            return 128 + WTERMSIG(status);
        }
        /* An event stop (the seize's, a group-stop) goes on with no signal; a signal-delivery
         * stop with its signal. */
        int deliver = (status >> 16) != 0 ? 0 : WSTOPSIG(status);
        ptrace(PTRACE_CONT, child, 0, deliver);
    }
}
