// A double free whose second free is a tail call: release_twice's frame is gone from the stack
// (its last act is `jmp free`), and gdb shows it anyway, from the DWARF call sites. So should
// crashport (Tests/EndToEndTests/TailCallTests.swift). Built -O2 -g.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void release_twice(char *p) {
    free(p);
    free(p);
}

int main(int argc, char **argv) {
    (void)argv;
    char *p = malloc(argc * 16);
    p[0] = 1;
    printf("%d\n", p[0]);
    release_twice(p);
    return 0;
}
