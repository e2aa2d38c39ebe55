// Two tail-call paths that share their start: main calls outer, which tail-calls dispatch,
// which tail-calls left or right, and both tail-call crash_here. Every path runs outer's jump,
// so outer is put back; which of left or right ran cannot be told, so neither is, nor dispatch
// (its jump is to one or the other): gdb shows crash_here, outer, main, and so must crashport.
// Built -O2 -g; noinline/noclone keep each a function of its own.
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

__attribute__((noinline, noclone)) int outer(int value) {
    counter += 7;
    return dispatch(value * 3);
}

int main(int argc, char **argv) {
    (void)argv;
    int result = outer(argc);
    printf("%d\n", result);
    return 0;
}
