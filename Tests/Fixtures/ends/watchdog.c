/* watchdog: a service that hangs in serve_forever until its watchdog ends it
 * (Tests/EndToEndTests/WatchdogTests.swift, where a tiny init, pid 1 of its own pid namespace,
 * sends the SIGABRT as systemd's WatchdogSec= would). Says "ready PID" on stdout first, with
 * SIGABRT blocked until serve_forever waits for it (sigsuspend): however early the init sends
 * it, it arrives in serve_forever. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static void serve_forever(void)
{
    sigset_t none;
    sigemptyset(&none);
    for (;;) {
        sigsuspend(&none);
    }
}

int main(void)
{
    sigset_t abort_only;
    sigemptyset(&abort_only);
    sigaddset(&abort_only, SIGABRT);
    sigprocmask(SIG_BLOCK, &abort_only, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    serve_forever();
    return 0;
}
