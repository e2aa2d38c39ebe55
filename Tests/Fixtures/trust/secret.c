/* secret.c FILE [attach FILE2]: the test's setuid-root program. Reads FILE (which only root may
 * read) into a global and into a stack buffer, says "ready PID BYTES" on stdout, then waits for
 * stdin to close and exits 0. Built without PIE by the test, so the global's address is known
 * to the attacker (nm). A watcher that reads this process's memory for its real user hands that
 * user the secret. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

char secret_global[4096];

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char secret_stack[4096];
    memset(secret_stack, 0, sizeof secret_stack);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    ssize_t count = read(fd, secret_stack, sizeof secret_stack - 1);
    close(fd);
    if (count <= 0) return 1;
    memcpy(secret_global, secret_stack, (size_t)count);
    printf("ready %d %zd\n", getpid(), count);
    fflush(stdout);
    char line[64];
    while (read(0, line, sizeof line) > 0) {}
    /* Keeps the stack buffer alive until here. */
    return secret_stack[0] == 0 ? 3 : 0;
}
