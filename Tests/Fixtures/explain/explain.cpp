// explain.cpp: explain.c's faults in C++ (issue 49), with C++'s kinds of values besides C's: a
// namespace, an enum class, a reference to a struct, new and delete. `explain MODE` dies the
// way MODE names (the modes are explain.c's), in a function of namespace `shop` called through
// main -> shop::run_mode -> (shop::fill_order ->) the faulting function.
//
// use-after-free follows a deleted node's `next`, as explain.c: glibc's free-list link is there
// now, and it points nowhere.
//
// Built -O0 and -O2 with -g -fstack-protector-strong, like explain.c: every local is set before
// the fault, and noipa keeps each bad value opaque to the function that uses it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

namespace shop {

enum class Color { Red, Green, Blue };

struct Order {
    int id;            // offset 0
    long sku;          // offset 8
    double price;      // offset 16
    const char *name;  // offset 24
};

using Pricing = long (*)(const Order *, double);
using Handler = int (*)(int);

volatile int sink;

NOINLINE long read_sku(const Order *o, int quantity, Color color, bool urgent) {
    char tag[8] = "sku";
    long base = quantity * 100L + static_cast<int>(color);
    tag[3] = urgent ? '!' : '.';
    sink = tag[3];
    return o->sku + base;  // o is NULL: reads 8 bytes at 0x8
}

NOINLINE long fill_order(const Order *found, const Order &fallback, const char *label, double price, Color color,
                         bool urgent) {
    int quantity = static_cast<int>(std::strlen(label));
    char code[4] = "AB";
    double total = price * quantity;
    long sku = 0;
    sku = read_sku(found, quantity, color, urgent);
    sink = code[1] + static_cast<int>(total) + fallback.id;
    return sku;
}

NOINLINE long apply_pricing(const Order &order, Pricing callback, double discount, int rounds, Color color) {
    char unit[4] = "EUR";
    bool ok = rounds > 0;
    long cents = 0;
    cents = callback(&order, discount);  // callback is NULL: the call goes to 0
    sink = unit[0] + ok;
    return cents * rounds + static_cast<int>(color);
}

NOINLINE void stamp_label(char *label, int index, char mark, bool upper, Color color) {
    char prefix[6] = "lbl-";
    double weight = 0.5 * index;
    label[index] = upper ? static_cast<char>(mark - 32) : mark;  // label is a string literal
    sink = prefix[0] + static_cast<int>(weight) + static_cast<int>(color);
}

NOINLINE int recurse(const Order &order, const char *label, int step, double scale, Color color) {
    // The same values in every frame, whatever the depth the stack ran out at.
    volatile char pad[64];
    std::memset(const_cast<char *>(pad), label[0], sizeof pad);
    int below = 0;
    below = recurse(order, label, step, scale, color);  // not a tail call: pad is read after
    return below + pad[step] + static_cast<int>(scale) + order.id;
}

NOINLINE void release_twice(Order *order, int times, bool clear, Color color) {
    char note[8] = "twice";
    double ratio = times / 4.0;
    if (clear) order->sku = 0;
    for (int i = 0; i < times; i++) delete order;  // the second delete aborts (glibc's free)
    sink = note[0] + static_cast<int>(ratio) + static_cast<int>(color);
}

NOINLINE int copy_name(const char *name, int length, bool shout, Color color, double scale) {
    char buffer[8];
    std::size_t source = std::strlen(name);
    // length is 16: the 8 bytes past buffer are the stack protector's canary
    for (int i = 0; i < length; i++) buffer[i] = static_cast<char>(name[i % source] - (shout ? 32 : 0));
    sink = buffer[0] + static_cast<int>(color) + static_cast<int>(scale);
    return length;
}

NOINLINE int jump_to(std::uintptr_t address, int argument, const char *reason, bool log, Color color) {
    char code[4] = "JMP";
    double factor = 2.5;
    Handler target = reinterpret_cast<Handler>(address);
    int result = 0;
    result = target(argument);  // nothing is mapped at address
    sink = code[0] + log + static_cast<int>(color) + static_cast<int>(factor) + static_cast<int>(std::strlen(reason));
    return result;
}

struct Node {
    Node *next;  // offset 0: glibc's free-list link once deleted
    long count;  // offset 8
};

NOINLINE int read_stock(const Node *stock, int slot, const char *warehouse, bool strict, Color color) {
    char zone[4] = "B7";
    double fill = slot * 0.25;
    int count = 0;
    count = static_cast<int>(stock->next->count);  // stock was deleted: its next is a free-list link
    sink = zone[0] + strict + static_cast<int>(color) + static_cast<int>(fill) +
           static_cast<int>(std::strlen(warehouse));
    return count;
}

NOINLINE Pricing find_pricing(const char *name) {
    sink = name[0];
    return nullptr;
}

NOINLINE const Order *find_order(const Order *orders, int count, int id) {
    for (int i = 0; i < count; i++)
        if (orders[i].id == id) return &orders[i];
    return nullptr;
}

NOINLINE int run_mode(const char *mode, const Order *orders, int count, const char *label, double price, Color color,
                      bool urgent) {
    char initial[4] = {mode[0], mode[1], 0, 0};
    long result = 0;
    if (std::strcmp(mode, "null-field") == 0) {
        result = fill_order(find_order(orders, count, 99), orders[0], label, price, color, urgent);
    } else if (std::strcmp(mode, "null-call") == 0) {
        result = apply_pricing(orders[0], find_pricing(label), 0.25, 3, color);
    } else if (std::strcmp(mode, "literal-write") == 0) {
        stamp_label(const_cast<char *>("literal"), 2, 'x', urgent, color);
    } else if (std::strcmp(mode, "stack-overflow") == 0) {
        result = recurse(orders[1], label, 5, 1.5, color);
    } else if (std::strcmp(mode, "double-free") == 0) {
        release_twice(new Order{9, 4321, 1.0, "twice"}, 2, urgent, color);
    } else if (std::strcmp(mode, "stack-smash") == 0) {
        result = copy_name(label, 16, urgent, color, 0.75);
    } else if (std::strcmp(mode, "wild-jump") == 0) {
        result = jump_to(0x414141414140, count, label, urgent, color);
    } else if (std::strcmp(mode, "use-after-free") == 0) {
        Node *second = new Node{nullptr, count};
        Node *stock = new Node{second, count};
        delete second;
        delete stock;
        result = read_stock(stock, 7, label, urgent, color);
    } else {
        std::fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    sink = initial[0] + static_cast<int>(result);
    return 0;
}

}  // namespace shop

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: explain MODE\n");
        return 2;
    }
    shop::Order orders[2] = {{7, 1234, 12.5, "widget"}, {8, 5678, 3.25, "gadget"}};
    return shop::run_mode(argv[1], orders, 2, "paid", 12.5, shop::Color::Green, true);
}
