/*
 * linked-only.c: a program that never mentions crashport. Linking libcrashport is enough: its
 * constructor installs before main when CRASHPORT_SOCKET (or CRASHPORT_FD) is set.
 *
 *   cc -g -o linked-only linked-only.c $(pkg-config --libs crashport)
 *   CRASHPORT_SOCKET=/run/crashport/crashport.sock ./linked-only
 *
 * crashport.pc links it with --no-as-needed, so the library stays in the program's DT_NEEDED
 * although no symbol of it is used (readelf -d linked-only | grep crashport).
 * The same happens with no linking at all: LD_PRELOAD=/usr/local/lib/libcrashport.so.
 */
#include <stdlib.h>

__attribute__((noinline)) static void check_invariant(int ok)
{
    if (!ok) {
        abort(); /* SIGABRT: reported like a fault */
    }
}

int main(int argc, char **argv)
{
    (void)argv;
    check_invariant(argc == 0);
    return 0;
}
