// bugs.c: eight distinct bugs, one per mode, for the crash-signature tests. Built at -O0, at
// -O2, and at -O2 with -DUNRELATED (an unrelated function added above everything, which moves
// every address and line): each bug must keep one fingerprint across the three builds, and the
// eight must stay apart. `handle_request` has two bugs (a null dereference and a division by
// zero): the same function, different faults.
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef UNRELATED
__attribute__((noinline)) static unsigned checksum_banner(const char *text) {
    unsigned sum = 0;
    for (; *text; text++) sum = sum * 31 + (unsigned char)*text;
    return sum;
}
#endif

struct payload {
    const char *name;
};

struct node {
    struct node *next;
    struct payload *payload;
};

volatile int zero = 0;
static char *volatile missing = NULL;

__attribute__((noinline)) size_t parse_records(const char *text) {
    size_t total = strlen(text);  // text is NULL: the fault is in libc's strlen
    return total + 1;
}

__attribute__((noinline)) void release_buffer(char *buffer) {
    free(buffer);
    free(buffer);  // double free: glibc aborts
}

__attribute__((noinline)) void check_invariant(int count) {
    assert(count >= 0 && "count must not be negative");
}

__attribute__((noinline)) int average(int sum, int count) {
    return sum / count;
}

// Inlined at -O2; the fault is in the libc function it calls, so its inline record survives.
static inline size_t name_length(const struct node *node) { return strlen(node->payload->name); }

__attribute__((noinline)) size_t walk_list(const struct node *head) {
    size_t total = 0;
    for (const struct node *node = head; node; node = node->next) total += name_length(node);
    return total;
}

__attribute__((cold, noinline)) static void complain(const char *key) { fprintf(stderr, "bad key %s\n", key); }

// The branch that calls a cold function is cold: GCC moves it into `read_setting.cold` at -O2,
// and the fault is there; at -O0 it stays in place.
__attribute__((noinline)) int read_setting(const char *key, int fallback) {
    int value = fallback;
    for (const char *c = key; *c; c++) value = value * 10 + (*c - '0');
    if (key[0] == '!') {
        complain(key);
        value += *(volatile int *)missing;
    }
    return value;
}

__attribute__((noinline)) int handle_request(int kind) {
    if (kind == 1) return *(volatile int *)missing;
    return 100 / (kind - 2 + zero);
}

int main(int argc, char **argv) {
#ifdef UNRELATED
    printf("banner %u\n", checksum_banner("crashport"));
#endif
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "parse")) return (int)parse_records(missing);
    if (!strcmp(mode, "double-free")) {
        char *buffer = malloc(64);
        strcpy(buffer, "records");
        release_buffer(buffer);
    }
    if (!strcmp(mode, "assert")) check_invariant(zero - 1);
    if (!strcmp(mode, "average")) return average(10, zero);
    if (!strcmp(mode, "walk")) {
        struct payload first = {"first"}, second = {NULL};
        struct node tail = {NULL, &second}, head = {&tail, &first};  // the tail has no name
        return (int)walk_list(&head);
    }
    if (!strcmp(mode, "setting")) return read_setting(argc > 2 ? argv[2] : "!verbose", argc);
    if (!strcmp(mode, "request-null")) return handle_request(1);
    if (!strcmp(mode, "request-div")) return handle_request(2);
    fprintf(stderr, "usage: bugs parse|double-free|assert|average|walk|setting|request-null|request-div\n");
    return 64;
}
