/* trust: a program linked with libcrashport that a throwaway user runs against a root sidecar
 * (Tests/EndToEndTests/ServingTrustTests.swift). Modes:
 *   setting        crashport_set_enabled(0), prints its result, exits 0
 *   pending        prints crashport_pending_reports() (what the sidecar's HELLO reply said)
 *   crash          crashes (a NULL store)
 *   attach PATH... attaches each PATH, prints each result, then crashes
 */
#include <crashport.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) static void crash_now(void)
{
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "setting") == 0) {
        printf("disabled %d\n", crashport_set_enabled(0));
        return 0;
    }
    if (strcmp(mode, "pending") == 0) {
        printf("pending %d\n", crashport_pending_reports());
        return 0;
    }
    if (strcmp(mode, "attach") == 0) {
        for (int index = 2; index < argc; index++) printf("attach %s %d\n", argv[index], crashport_attach_file(argv[index]));
        fflush(stdout);
        crash_now();
    }
    if (strcmp(mode, "crash") == 0) crash_now();
    return 2;
}
