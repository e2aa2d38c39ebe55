/* truncator PATH SECONDS: issue 46's attack. Watches PATH with inotify, says "ready PID" once
 * armed, and truncates PATH to nothing the moment whoever opened it next closes it again
 * (IN_OPEN, then IN_CLOSE_NOWRITE): a watcher that maps a file closes it once mapped, so it
 * then reads its mapping past the file's new end. (At IN_OPEN alone the truncation often lands
 * before the watcher's fstat, which then maps nothing.) Exit 0 once it truncated, 3 when the
 * file was not opened and closed within SECONDS, 2 or 4 when a call failed. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    int watch = inotify_init1(IN_CLOEXEC);
    if (watch < 0 || inotify_add_watch(watch, argv[1], IN_OPEN | IN_CLOSE_NOWRITE) < 0) {
        perror("inotify");
        return 2;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    int opened = 0;
    for (;;) {
        struct pollfd ready = {.fd = watch, .events = POLLIN};
        if (poll(&ready, 1, atoi(argv[2]) * 1000) != 1) return 3;
        char buffer[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t count = read(watch, buffer, sizeof buffer);
        if (count <= 0) return 2;
        int closed = 0;
        for (char *at = buffer; at < buffer + count;) {
            const struct inotify_event *event = (const struct inotify_event *)at;
            if (event->mask & IN_OPEN) opened = 1;
            if ((event->mask & IN_CLOSE_NOWRITE) && opened) closed = 1;
            at += sizeof *event + event->len;
        }
        if (closed) break;
    }
    if (truncate(argv[1], 0) != 0) {
        perror("truncate");
        return 4;
    }
    return 0;
}
