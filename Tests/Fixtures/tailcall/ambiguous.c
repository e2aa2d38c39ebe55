// Two tail-call paths to the same crash: main calls dispatch, which tail-calls left or right
// (by its argument), and both tail-call crash_here. From the stack alone (crash_here, main) one
// cannot tell which way it went, so no frame may be put back: gdb shows none, nor should
// crashport. Built -O2 -g; noinline/noclone keep each a function of its own.
#include <stdio.h>
#include <stdlib.h>

volatile int counter;
int *volatile target;  // null: the store through it faults

__attribute__((noinline, noclone)) int crash_here(int value) {
    counter += value;
    *target = value;
    return counter;
}

__attribute__((noinline, noclone)) int left(int value) {
    counter += 11;
    return crash_here(value * 3);
}

__attribute__((noinline, noclone)) int right(int value) {
    counter += 13;
    return crash_here(value * 5);
}

__attribute__((noinline, noclone)) int dispatch(int value) {
    counter += 1;
    if (value & 1) return left(value + 1);
    return right(value + 2);
}

int main(int argc, char **argv) {
    (void)argv;
    int result = dispatch(argc);
    printf("%d\n", result);
    return 0;
}
