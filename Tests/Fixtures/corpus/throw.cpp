// throw.cpp: an uncaught C++ exception on a secondary thread (std::terminate -> abort on that
// thread), while the main thread waits in join. The report's crashed thread must be the worker.
#include <stdexcept>
#include <thread>

__attribute__((noinline)) int parse_config(int value) {
    if (value > 1) throw std::runtime_error("bad config");
    return value;
}

__attribute__((noinline)) void worker(int value) {
    volatile int result = parse_config(value);
    (void)result;
}

int main(int argc, char **argv) {
    std::thread thread(worker, argc + 1);
    thread.join();
    return 0;
}
