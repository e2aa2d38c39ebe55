// daemon.c: a classic daemon: daemon(3) forks away from its parent (which exits 0 at once) and
// puts its standard streams on /dev/null; the daemon then waits for a line on the FIFO named by
// argv[1] and crashes in serve_forever.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) void serve_forever(const char *fifo, int *slot) {
    FILE *in = fopen(fifo, "r");
    char line[16];
    if (in && fgets(line, sizeof line, in)) *slot = 1;  // slot is NULL: the daemon's bug
    exit(3);
}

int main(int argc, char **argv) {
    if (argc < 2 || daemon(1, 0) != 0) return 1;
    serve_forever(argv[1], NULL);
}
