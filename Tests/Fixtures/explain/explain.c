/*
 * explain.c: the faults a report must explain as gdb would (issue 49). `explain MODE` dies the
 * way MODE names, in a function whose parameters and locals have every kind of value gdb prints
 * (int, enum, bool, string, struct pointer, char array, double), called through a chain of such
 * functions: main -> run_mode -> (fill_order ->) the faulting function.
 *
 *   null-field      reads o->sku (offset 8) through a NULL struct pointer
 *   null-call       calls through a NULL function pointer
 *   literal-write   writes into a string literal (read-only .rodata)
 *   stack-overflow  unbounded recursion
 *   double-free     frees a small block twice (glibc's tcache check aborts)
 *   stack-smash     overflows a local char array (-fstack-protector-strong: __stack_chk_fail)
 *   wild-jump       calls 0x414141414140: canonical, but nothing is mapped there
 *   use-after-free  follows a freed node's `next`: two nodes of a list are freed, the second
 *                   first, so the first's `next` now holds glibc's safe-linked free-list link
 *                   ((its address >> 12) XOR the second), which points nowhere: reading
 *                   `stock->next->count` faults every time, and the link is the evidence
 *
 * Built -O0 and -O2 with -g -fstack-protector-strong (Tests/EndToEndTests/
 * FaultExplanationTests.swift). Every local is set before the fault, so that gdb and the report
 * read the same bytes (an unset one holds whatever the stack held before, which differs with
 * the environment). Every bad value reaches the faulting function as a parameter of a function
 * the optimiser may neither inline nor specialise (noipa: no `read_sku.constprop.0` for a
 * constant NULL, which GCC would also turn into a trap), so the fault is the one named.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

enum color { RED, GREEN, BLUE };

struct order {
    int id;           /* offset 0 */
    long sku;         /* offset 8 */
    double price;     /* offset 16 */
    const char *name; /* offset 24 */
};

typedef long (*pricing_fn)(const struct order *, double);
typedef int (*handler_fn)(int);

volatile int sink;

NOINLINE long read_sku(const struct order *o, int quantity, enum color color, bool urgent) {
    char tag[8] = "sku";
    long base = quantity * 100L + color;
    tag[3] = urgent ? '!' : '.';
    sink = tag[3];
    return o->sku + base; /* o is NULL: reads 8 bytes at 0x8 */
}

NOINLINE long fill_order(const struct order *found, const char *label, double price, enum color color, bool urgent) {
    int quantity = (int)strlen(label);
    char code[4] = "AB";
    double total = price * quantity;
    struct order draft = {quantity, 42, price, label};
    long sku = 0;
    sku = read_sku(found, quantity, color, urgent);
    sink = code[1] + (int)total + draft.id;
    return sku;
}

NOINLINE long apply_pricing(const struct order *o, pricing_fn callback, double discount, int rounds, enum color color) {
    char unit[4] = "EUR";
    bool ok = rounds > 0;
    long cents = 0;
    cents = callback(o, discount); /* callback is NULL: the call goes to 0 */
    sink = unit[0] + ok;
    return cents * rounds + color;
}

NOINLINE void stamp_label(char *label, int index, char mark, bool upper, enum color color) {
    char prefix[6] = "lbl-";
    double weight = 0.5 * index;
    label[index] = upper ? (char)(mark - 32) : mark; /* label is a string literal */
    sink = prefix[0] + (int)weight + color;
}

NOINLINE int recurse(const struct order *o, const char *label, int step, double scale, enum color color) {
    /* The same values in every frame, whatever the depth the stack ran out at (gdb's run and
       crashport's have different environments, so different depths). */
    volatile char pad[64];
    memset((char *)pad, label[0], sizeof pad);
    int below = 0;
    below = recurse(o, label, step, scale, color); /* not a tail call: pad is read after */
    return below + pad[step] + (int)scale + o->id;
}

NOINLINE void release_twice(char *buffer, size_t size, int times, bool clear, enum color color) {
    char note[8] = "twice";
    double ratio = size / 4.0;
    if (clear) memset(buffer, 0, size);
    for (int i = 0; i < times; i++) free(buffer); /* the second free aborts */
    sink = note[0] + (int)ratio + color;
}

NOINLINE int copy_name(const char *name, int length, bool shout, enum color color, double scale) {
    char buffer[8];
    size_t source = strlen(name);
    /* length is 16: the 8 bytes past buffer are the stack protector's canary */
    for (int i = 0; i < length; i++) buffer[i] = (char)(name[i % source] - (shout ? 32 : 0));
    sink = buffer[0] + color + (int)scale;
    return length;
}

NOINLINE int jump_to(uintptr_t address, int argument, const char *reason, bool log, enum color color) {
    char code[4] = "JMP";
    double factor = 2.5;
    handler_fn target = (handler_fn)address;
    int result = 0;
    result = target(argument); /* nothing is mapped at address */
    sink = code[0] + log + color + (int)factor + (int)strlen(reason);
    return result;
}

struct node {
    struct node *next; /* offset 0: glibc's free-list link once freed */
    long count;        /* offset 8 */
};

NOINLINE int read_stock(const struct node *stock, int slot, const char *warehouse, bool strict, enum color color) {
    char zone[4] = "B7";
    double fill = slot * 0.25;
    int count = 0;
    count = (int)stock->next->count; /* stock was freed: its next is a free-list link */
    sink = zone[0] + strict + color + (int)fill + (int)strlen(warehouse);
    return count;
}

NOINLINE pricing_fn find_pricing(const char *name) {
    sink = name[0];
    return NULL;
}

NOINLINE const struct order *find_order(const struct order *orders, int count, int id) {
    for (int i = 0; i < count; i++)
        if (orders[i].id == id) return &orders[i];
    return NULL;
}

NOINLINE int run_mode(const char *mode, const struct order *orders, int count, const char *label, double price,
                      enum color color, bool urgent) {
    char initial[4] = {mode[0], mode[1], 0, 0};
    long result = 0;
    if (strcmp(mode, "null-field") == 0) {
        result = fill_order(find_order(orders, count, 99), label, price, color, urgent);
    } else if (strcmp(mode, "null-call") == 0) {
        result = apply_pricing(&orders[0], find_pricing(label), 0.25, 3, color);
    } else if (strcmp(mode, "literal-write") == 0) {
        stamp_label((char *)"literal", 2, 'x', urgent, color);
    } else if (strcmp(mode, "stack-overflow") == 0) {
        result = recurse(&orders[1], label, 5, 1.5, color);
    } else if (strcmp(mode, "double-free") == 0) {
        release_twice(malloc(48), 48, 2, urgent, color);
    } else if (strcmp(mode, "stack-smash") == 0) {
        result = copy_name(label, 16, urgent, color, 0.75);
    } else if (strcmp(mode, "wild-jump") == 0) {
        result = jump_to(0x414141414140, count, label, urgent, color);
    } else if (strcmp(mode, "use-after-free") == 0) {
        struct node *stock = malloc(sizeof *stock), *second = malloc(sizeof *second);
        if (!stock || !second) return 3;
        *second = (struct node){NULL, count};
        *stock = (struct node){second, count};
        free(second);
        free(stock);
        result = read_stock(stock, 7, label, urgent, color);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    sink = initial[0] + (int)result;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: explain MODE\n");
        return 2;
    }
    struct order orders[2] = {{7, 1234, 12.5, "widget"}, {8, 5678, 3.25, "gadget"}};
    return run_mode(argv[1], orders, 2, "paid", 12.5, GREEN, true);
}
