/* rebuilt.c: a program rebuilt at the same path between two crashes a sidecar reports, for the
 * sidecar's cache of parsed debug data (kept by build-id; by file where there is none): built
 * with -DBUILD=first_build, then -DBUILD=second_build, its one crash is in the function BUILD
 * names. */
#define NOINLINE __attribute__((noinline))

volatile int sink;

NOINLINE void BUILD(void) { *(volatile int *)16 = sink; }

int main(void) {
    BUILD();
    return 0;
}
