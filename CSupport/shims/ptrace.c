/* ptrace(2) is variadic in glibc, which Swift cannot call; this fixes its four arguments. */
#include "crashport_shims.h"
#include <sys/ptrace.h>

long cp_ptrace(int request, pid_t pid, uintptr_t addr, uintptr_t data) {
    return ptrace((enum __ptrace_request)request, pid, (void *)addr, (void *)data);
}

/* waitid(2) with WNOWAIT: Swift cannot reach siginfo_t's si_code portably (a union in glibc). */
#include <errno.h>
#include <sys/wait.h>

int cp_wait_peek(pid_t tid) {
    siginfo_t info;
    info.si_pid = 0;
    if (waitid(P_PID, (id_t)tid, &info, WEXITED | WSTOPPED | __WALL | WNOHANG | WNOWAIT) != 0) return -1;
    if (info.si_pid == 0) return CP_WAIT_NOTHING;
    switch (info.si_code) {
    case CLD_EXITED:
    case CLD_KILLED:
    case CLD_DUMPED: return CP_WAIT_EXITED;
    default: return CP_WAIT_STOPPED; /* CLD_TRAPPED, CLD_STOPPED */
    }
}
