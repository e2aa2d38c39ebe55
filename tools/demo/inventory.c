/*
 * inventory.c: the demo that tools/install runs under crashport. A tiny "inventory service"
 * that looks up an item that is not there and dereferences the missing record: a classic
 * null-pointer crash, three functions deep.
 */
#include <stdio.h>
#include <string.h>

struct item {
    const char *name;
    int count;
};

static struct item stock[] = {{"apples", 3}, {"pears", 0}};

__attribute__((noinline)) struct item *find_item(const char *name) {
    for (size_t i = 0; i < sizeof stock / sizeof stock[0]; i++)
        if (strcmp(stock[i].name, name) == 0) return &stock[i];
    return NULL;
}

__attribute__((noinline)) int reserve(const char *name, int count) {
    struct item *item = find_item(name);
    item->count -= count; /* crashes when the item does not exist */
    return item->count;
}

int main(int argc, char **argv) {
    const char *wanted = argc > 1 ? argv[1] : "plums";
    printf("reserving 2 %s...\n", wanted);
    fflush(stdout);
    int left = reserve(wanted, 2);
    printf("%d %s left\n", left, wanted);
    return 0;
}
