/* The crash log's title and culprit (Tests/EndToEndTests/CrashLogTests.swift):
 *   host plugin LIB   dlopens LIB and calls its plugin_entry, which dereferences NULL
 *   host name         names its thread with a terminal escape and a newline, then crashes */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) static void crash_named(void)
{
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "plugin") == 0) {
        void *library = dlopen(argv[2], RTLD_NOW);
        if (library == NULL) {
            fprintf(stderr, "%s\n", dlerror());
            return 2;
        }
        void (*entry)(void) = (void (*)(void))dlsym(library, "plugin_entry");
        entry();
    } else if (argc > 1 && strcmp(argv[1], "name") == 0) {
        pthread_setname_np(pthread_self(), "ev\x1b[2Jil\n");
        crash_named();
    }
    return 2;
}
