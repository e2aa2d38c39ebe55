// A C++ program that sets its own std::terminate handler after crashport installed
// (Tests/EndToEndTests/TerminateHandlerTests.swift), then lets an exception escape: the report
// still has the exception's type and what(), and the program's handler still runs.
//   after   set_terminate(nullptr), then its own handler, then throw config_error
//   before  its own handler set before crashport_install (CRASHPORT_INSTALL=manual), then throw
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>

namespace __gnu_cxx {
void __verbose_terminate_handler();
}

struct config_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

static std::terminate_handler previous;

static void program_handler()
{
    std::printf("program handler ran\n");
    std::fflush(stdout);
    previous(); // libstdc++'s: "terminate called after throwing...", then abort
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (std::strcmp(mode, "before") == 0) {
        previous = std::set_terminate(program_handler);
        // The stub's, preloaded or linked: found either way.
        auto install = reinterpret_cast<int (*)(const void *)>(dlsym(RTLD_DEFAULT, "crashport_install"));
        if (install == nullptr || install(nullptr) != 0) return 3;
    } else {
        std::terminate_handler first = std::set_terminate(nullptr);
        std::printf("first is the default %d\n", first == __gnu_cxx::__verbose_terminate_handler);
        std::printf("null gives the default %d\n", std::get_terminate() == __gnu_cxx::__verbose_terminate_handler);
        previous = std::set_terminate(program_handler);
        std::printf("previous is the default %d\n", previous == __gnu_cxx::__verbose_terminate_handler);
    }
    std::printf("get gives the program's %d\n", std::get_terminate() == program_handler);
    std::fflush(stdout);
    throw config_error("the config file is missing");
}
