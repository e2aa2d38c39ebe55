/* attach.c FILE: attaches FILE to its crash reports (crashport_attach_file), says "ready PID
 * RESULT", waits for a line on stdin, then crashes with SIGSEGV. Linked with libcrashport. */
#include <crashport.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int attached = crashport_attach_file(argv[1]);
    printf("ready %d %d\n", (int)getpid(), attached);
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 1;
    *(volatile int *)0 = 1;
    return 0;
}
