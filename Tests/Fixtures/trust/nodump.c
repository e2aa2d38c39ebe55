/* nodump.c FILE: reads FILE into a stack buffer, makes itself not dumpable
 * (prctl(PR_SET_DUMPABLE, 0), as ssh-agent and gpg-agent do to keep their keys from their own
 * user's other processes), says "ready PID", waits for a line on stdin, then crashes with
 * SIGSEGV. Its crash report must carry none of its memory. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char secret[4096];
    memset(secret, 0, sizeof secret);
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || read(fd, secret, sizeof secret - 1) <= 0) return 1;
    close(fd);
    if (prctl(PR_SET_DUMPABLE, 0) != 0) return 1;
    printf("ready %d\n", getpid());
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 1;
    volatile char *p = secret;
    *(volatile int *)(p[0] == 0 ? 0 : 8) = 1;
    return 0;
}
