/*
 * settings.c: crashport's own settings from the environment (CRASHPORT_*), and whether this
 * process may take them at all.
 *
 * The lowest of the stub's files off the crash path, which call one way (off_path.h):
 * install.c → launch.c → attach.c → app.c → settings.c. Each of the three above reads its settings here;
 * this file calls none of them (tools/build-stub checks it on the built objects).
 *
 * Not signal context: install time and the program's own calls.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "off_path.h"

CP_HIDDEN bool cp_settings_secure(void)
{
    return getauxval(AT_SECURE) != 0 || getuid() != geteuid() || getgid() != getegid();
}

CP_HIDDEN const char *cp_settings_getenv(const char *name)
{
    /* secure_getenv alone asks only glibc's AT_SECURE at startup: ids changed since (a root
     * daemon's seteuid) count too. */
    return cp_settings_secure() ? NULL : secure_getenv(name);
}
