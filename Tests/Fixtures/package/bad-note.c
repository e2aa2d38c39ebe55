// crash.c's crash, with a package note the linker would not write (ld refuses JSON that does not
// parse): written here by the assembler, its descriptor an object whose "name" is an object.
// PackageMetadataTests checks that its report is written without a package and says why.
#include <stdio.h>

__asm__(".pushsection .note.package,\"a\",@note\n"
        ".p2align 2\n"
        ".long 4\n"              // n_namesz: "FDO\0"
        ".long 2f - 1f\n"        // n_descsz
        ".long 0xcafe1a7e\n"     // n_type: NT_FDO_PACKAGING_METADATA
        ".asciz \"FDO\"\n"
        "1: .asciz \"{\\\"type\\\":\\\"deb\\\",\\\"name\\\":{\\\"nested\\\":\\\"object\\\"},\\\"version\\\":\\\"1\\\"}\"\n"
        "2: .p2align 2\n"
        ".popsection\n");

__attribute__((noinline)) static int load(volatile int *p) { return *p; }

int main(int argc, char **argv) {
    (void)argv;
    volatile int *p = argc > 5 ? &argc : NULL;
    printf("%d\n", load(p));
    return 0;
}
