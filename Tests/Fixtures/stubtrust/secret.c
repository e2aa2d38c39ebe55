/* secret: a program holding a secret in its stack when it crashes, for StubTrustTests. It reads
 * SECRET_FILE (a root-only file when the program is installed setuid root) into a buffer in
 * main's frame, says "euid <euid> read <bytes>" on stderr and "ready <pid>" on stdout, waits
 * for a line on stdin, and then crashes (a NULL store) in a function called with the secret
 * still live on the stack.
 *
 * Built with -DHIDE_MEMORY it first makes itself non-dumpable (prctl(PR_SET_DUMPABLE, 0)), as
 * ssh-agent does. Built with -DSOCKET_PATH="..." it calls crashport_install() with that socket
 * itself, as a program that hard-codes where its sidecar is (an abstract name anyone may bind);
 * without it, the stub's constructor installs from CRASHPORT_SOCKET, as for any linked program. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "crashport.h"

__attribute__((noinline)) static void crash_holding(volatile char *secret)
{
    *(volatile char *)0 = secret[0];
}

int main(void)
{
#ifdef HIDE_MEMORY
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 3;
#endif
#ifdef SOCKET_PATH
    crashport_options options = CRASHPORT_OPTIONS_DEFAULT;
    options.socket_path = SOCKET_PATH;
    options.timeout_ms = 2000;
    (void)crashport_install(&options);
#endif
    volatile char secret[512];
    memset((char *)secret, 0, sizeof secret);
    ssize_t got = -1;
    int fd = open(SECRET_FILE, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        got = read(fd, (char *)secret, sizeof secret - 1);
        close(fd);
    }
    fprintf(stderr, "euid %d read %zd\n", (int)geteuid(), got);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 2;
    crash_holding(secret);
    return 0;
}
