/* planter DIRECTORY NAME SECONDS: a user's plant in their own reports directory. Watches
 * DIRECTORY (inotify IN_MOVED_TO), says "ready PID" once armed, and the moment a report is
 * renamed into place (its first step done: any name not starting with '.') makes a FIFO named
 * NAME inside it, where the report's second step will write its marker. Exit 0 once it planted,
 * 3 when no report came within SECONDS, 2 or 4 when a call failed. */
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4) return 2;
    int watch = inotify_init1(IN_CLOEXEC);
    if (watch < 0 || inotify_add_watch(watch, argv[1], IN_MOVED_TO) < 0) {
        perror("inotify");
        return 2;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        struct pollfd ready = {.fd = watch, .events = POLLIN};
        if (poll(&ready, 1, atoi(argv[3]) * 1000) != 1) return 3;
        char buffer[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t count = read(watch, buffer, sizeof buffer);
        if (count <= 0) return 2;
        for (char *at = buffer; at < buffer + count;) {
            const struct inotify_event *event = (const struct inotify_event *)at;
            if (event->len > 0 && event->name[0] != '.') {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s/%s/%s", argv[1], event->name, argv[2]);
                if (mkfifo(path, 0600) != 0) {
                    perror("mkfifo");
                    return 4;
                }
                return 0;
            }
            at += sizeof *event + event->len;
        }
    }
}
