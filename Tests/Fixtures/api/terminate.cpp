// Why a C++ program ended (Tests/EndToEndTests/AppAPITests.swift): an exception that escapes a
// thread ("thread"), a thrown int ("int"), a failed assert ("assert").
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <thread>

struct config_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (std::strcmp(mode, "thread") == 0) {
        std::thread worker([] { throw config_error("the config file is missing"); });
        worker.join();
    } else if (std::strcmp(mode, "int") == 0) {
        throw 42;
    } else if (std::strcmp(mode, "assert") == 0) {
        int answer = argc;
        assert(answer == 42);
    }
    return 0;
}
