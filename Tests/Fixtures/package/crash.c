// A program that crashes on a NULL read two calls deep: PackageMetadataTests links it with
// `--package-metadata` (a package note) and runs it under `crashport run`.
#include <stdio.h>

__attribute__((noinline)) static int load(volatile int *p) { return *p; }
__attribute__((noinline)) int parse_config(volatile int *p) { return load(p) + 1; }

int main(int argc, char **argv) {
    (void)argv;
    volatile int *p = argc > 5 ? &argc : NULL;
    printf("%d\n", parse_config(p));
    return 0;
}
