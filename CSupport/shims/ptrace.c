/* ptrace(2) is variadic in glibc, which Swift cannot call; this fixes its four arguments. */
#include "crashport_shims.h"
#include <sys/ptrace.h>

long cp_ptrace(int request, pid_t pid, uintptr_t addr, uintptr_t data) {
    return ptrace((enum __ptrace_request)request, pid, (void *)addr, (void *)data);
}
