/* A library whose constructor crashes before main in the program APP_CTOR_CRASH names (its
 * short name: crashport, which the same LD_PRELOAD reaches, is spared) (Tests/EndToEndTests/
 * RunCountsTests.swift). Preloaded after the stub (crashport run puts its stub first in
 * LD_PRELOAD), its constructor runs before the stub's: the crash comes before the stub has
 * installed, so no crash record describes it, only the parent's waitpid. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int *volatile ctor_nowhere;

__attribute__((noinline)) void crash_in_constructor(void) { *ctor_nowhere = 1; }

__attribute__((constructor)) static void before_main(void)
{
    const char *crash = getenv("APP_CTOR_CRASH");
    if (crash != NULL && strcmp(crash, program_invocation_short_name) == 0) crash_in_constructor();
}
