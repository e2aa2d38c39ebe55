// A chain of tail calls inside the program: main calls first, which tail-calls second, which
// tail-calls third, which tail-calls crash_here, which faults. Only crash_here and main are on
// the stack; first, second and third are put back from the DWARF call sites (as gdb shows
// them). noinline/noclone keep each a function of its own; each does work of its own (so
// identical code folding cannot merge them) and ends in a call whose result it returns, which
// -O2 compiles to a jump (the test checks the jumps with objdump).
#include <stdio.h>
#include <stdlib.h>

volatile int counter;
int *volatile target;  // null: the store through it faults (not a trap the compiler inserts)

__attribute__((noinline, noclone)) int crash_here(int value) {
    counter += value;
    *target = value;
    return counter;
}

__attribute__((noinline, noclone)) int third(int value) {
    counter += 3;
    return crash_here(value * 7);
}

__attribute__((noinline, noclone)) int second(int value) {
    counter += 2;
    return third(value + 5);
}

__attribute__((noinline, noclone)) int first(int value) {
    counter += 1;
    return second(value ^ 0x55);
}

int main(int argc, char **argv) {
    (void)argv;
    int result = first(argc);
    printf("%d\n", result);
    return 0;
}
