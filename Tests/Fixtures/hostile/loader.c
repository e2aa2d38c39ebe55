/* loader: links libvictim.so (victim.c), says "ready PID" on stdout, waits for a line on stdin,
 * then crashes in the library's victim_crash: so that a test can arm truncator.c on the library
 * after the loader has opened it and before the watcher does. */
#include <stdio.h>
#include <unistd.h>

void victim_crash(volatile int *target);

int main(void)
{
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 2;
    victim_crash(NULL);
    return 0;
}
