// A program whose crashing stack is GCC's clones and split parts (issue 33): built -O2, the
// fault is in worker_loop's unlikely branch, which GCC moves to `worker_loop.cold`; worker_loop
// is called from the outlined rest of `handle` (partial inlining: `handle.part.0`), which
// `serve` calls, specialised for its constant argument and given its one used field instead of
// the struct (`serve.constprop.0.isra.0` or the like). gdb names them worker_loop, handle,
// serve, as the DWARF does; the symbol table keeps the clones' names. `clones --no-crash`
// exits 0 (so that the clone symbols can be checked without a crash).

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job {
    int kind;
    int count;
    int values[16];
};

struct config {
    int mode;
    char name[64];
    int unused[32];
};

int *volatile target = NULL;
volatile int sink;

__attribute__((cold, noinline)) void log_failure(const char *what, int value) {
    fprintf(stderr, "failure: %s %d\n", what, value);
}

// The unlikely branch (a cold call, then the fault) is split off into worker_loop.cold.
__attribute__((noinline)) int worker_loop(struct job *job, int rounds) {
    int total = 0;
    for (int round = 0; round < rounds; round++) {
        for (int index = 0; index < job->count && index < 16; index++) {
            if (__builtin_expect(job->values[index] < 0, 0)) {
                log_failure("negative value at", index);
                *target = job->values[index];
                log_failure("still running at", index);
            }
            total += job->values[index] * (round + 1);
        }
    }
    return total;
}

// A cheap test before a big body: GCC inlines the test into its callers and outlines the rest
// as handle.part.0. The config is read for one field only: handle.part.0.isra.0 or the like.
static int handle(const struct config *config, struct job *job, int rounds) {
    if (__builtin_expect(job == NULL || job->kind == 0, 0)) return 0;
    int total = 0;
    for (int step = 0; step < job->kind; step++) {
        total += worker_loop(job, rounds + step);
        job->values[step % 16] ^= total & 0xff;
        if (total > 1000000) total /= 3;
        sink = total;
        for (int index = 0; index < 16; index++) {
            total += job->values[index] * index * config->mode;
            if (total % 7 == 3) sink = index;
            if (total % 11 == 5) sink = total - index;
            if (total % 13 == 1) total ^= index << 3;
        }
    }
    for (int index = 0; index < 16; index++) total += job->values[index] * index;
    return total;
}

// Called with a constant `rounds` (a constprop clone) and using one field of the config, read
// first (an isra clone, passed the field instead of the struct): serve.constprop.0.isra.0 or
// the like.
static __attribute__((noinline)) int serve(const struct config *config, struct job *jobs, int count, int rounds) {
    const int mode = config->mode;
    struct config local = {.mode = mode};
    int total = 0;
    for (int index = 0; index < count; index++) {
        if (mode > index) total += handle(&local, &jobs[index], rounds);
        else total -= handle(&local, &jobs[count - 1 - index], rounds + 1);
        sink = total;
    }
    return total;
}

int main(int argc, char **argv) {
    static struct job jobs[4];
    struct config config = {.mode = 4};
    strcpy(config.name, argv[0]);
    for (int index = 0; index < 4; index++) {
        jobs[index].kind = 2;
        jobs[index].count = 16;
        for (int value = 0; value < 16; value++) jobs[index].values[value] = index + value;
    }
    if (argc < 2 || strcmp(argv[1], "--no-crash") != 0) jobs[2].values[5] = -7;
    int total = serve(&config, jobs, 4, 3);
    total += serve(&config, jobs, 2, 3);
    printf("total %d\n", total);
    return 0;
}
