/* A prefork server (Tests/EndToEndTests/RunCountsTests.swift): the parent forks two workers
 * and waits for them; worker 1 dereferences NULL at once (during launch), worker 0 exits 0; the
 * parent then exits 0, as a server whose supervisor lets a worker die would. Under `crashport
 * run` the worker's crash is the run's: its report, `stats` and `list --program` agree. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int *volatile nowhere;

__attribute__((noinline)) void handle_request(int worker)
{
    if (worker == 1) *nowhere = worker;
}

int main(void)
{
    pid_t workers[2];
    for (int worker = 0; worker < 2; worker++) {
        workers[worker] = fork();
        if (workers[worker] < 0) return 2;
        if (workers[worker] == 0) {
            handle_request(worker);
            _exit(0);
        }
    }
    for (int worker = 0; worker < 2; worker++) {
        int status = 0;
        if (waitpid(workers[worker], &status, 0) < 0) return 2;
        printf("worker %d %s %d\n", worker, WIFSIGNALED(status) ? "signal" : "exit",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    return 0;
}
