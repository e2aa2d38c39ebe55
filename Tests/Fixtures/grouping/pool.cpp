// pool.cpp: a thread pool whose workers hit two distinct bugs, for the crash-signature tests:
// `lookup` reads past a vector with at() (std::out_of_range escapes the worker: std::terminate),
// and `Ledger::credit` dereferences an account that was never opened (SIGSEGV). Built at -O0,
// -O2 and -O2 -DUNRELATED like bugs.c.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#ifdef UNRELATED
__attribute__((noinline)) static unsigned checksum_banner(const std::string &text) {
    unsigned sum = 0;
    for (char c : text) sum = sum * 31 + (unsigned char)c;
    return sum;
}
#endif

struct Account {
    long balance = 0;
};

class Ledger {
  public:
    __attribute__((noinline)) void credit(const std::string &name, long amount) { accounts_[name]->balance += amount; }

  private:
    std::map<std::string, Account *> accounts_;
};

template <typename T> __attribute__((noinline)) T lookup(const std::vector<T> &table, size_t index) {
    return table.at(index);
}

static void run_in_pool(void (*job)()) {
    std::vector<std::thread> workers;
    for (int i = 0; i < 2; i++) workers.emplace_back(i == 1 ? job : [] {});
    for (auto &worker : workers) worker.join();
}

int main(int argc, char **argv) {
#ifdef UNRELATED
    std::printf("banner %u\n", checksum_banner("crashport"));
#endif
    const char *mode = argc > 1 ? argv[1] : "";
    if (!std::strcmp(mode, "lookup")) run_in_pool([] { std::printf("%d\n", lookup(std::vector<int>{1, 2, 3}, 7)); });
    if (!std::strcmp(mode, "credit")) run_in_pool([] {
        Ledger ledger;
        ledger.credit("savings", 10);
    });
    std::fprintf(stderr, "usage: pool lookup|credit\n");
    return 64;
}
