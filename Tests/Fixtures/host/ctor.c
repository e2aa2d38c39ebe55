/* A shared library whose constructor crashes before main, before any preloaded stub's constructor
 * ran (Tests/EndToEndTests/HostLevelTests.swift): only the host level sees it. */
int *volatile ctor_nowhere;

__attribute__((noinline)) void crash_in_constructor(void) { *ctor_nowhere = 1; }

__attribute__((constructor)) static void before_main(void) { crash_in_constructor(); }

int ctor_linked(void) { return 1; }
