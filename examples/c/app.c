/*
 * app.c: a program that installs crashport itself, then crashes in a named function.
 *
 *   cc -g -o app app.c $(pkg-config --cflags --libs crashport)
 *   CRASHPORT_SOCKET=/run/crashport/crashport.sock ./app
 *
 * With crashport.socket enabled (see the README), the sidecar writes a report whose crashing
 * thread starts in parse_record. Without a sidecar, crashport_install() says on stderr why crash
 * reporting is off and returns -errno; the program runs on and dies as it would have (SIGSEGV,
 * exit status 139 in a shell).
 */
#include <crashport.h>
#include <string.h>

struct record {
    const char *name;
    int quantity;
};

/* noinline: so the report names parse_record, not main. */
__attribute__((noinline)) static int parse_record(const struct record *record)
{
    return (int)strlen(record->name) + record->quantity; /* record is NULL: SIGSEGV */
}

int main(void)
{
    /* All defaults: the socket from CRASHPORT_SOCKET. On failure it returns -errno and has
     * already said why on stderr; the program carries on either way. */
    if (crashport_install(NULL) != 0) {
        /* e.g. remember that this run has no crash reporting */
    }
    struct record *volatile missing = NULL;
    return parse_record(missing);
}
