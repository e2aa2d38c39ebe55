/* The protocol header's _Static_asserts run when this file is compiled, on both build paths
 * (SwiftPM for the watcher, tools/build-stub for the stub), and so does the check below that
 * CP_DEFAULT_SIGNALS, a literal in the header, names the signals <signal.h> numbers. */
#include "crashport_protocol.h"

#include <signal.h>

#define CP_SIGNAL_BIT(signo) (1ull << (signo))
_Static_assert(CP_DEFAULT_SIGNALS ==
                   (CP_SIGNAL_BIT(SIGSEGV) | CP_SIGNAL_BIT(SIGBUS) | CP_SIGNAL_BIT(SIGILL) |
                    CP_SIGNAL_BIT(SIGFPE) | CP_SIGNAL_BIT(SIGABRT) | CP_SIGNAL_BIT(SIGTRAP) |
                    CP_SIGNAL_BIT(SIGSYS)),
               "CP_DEFAULT_SIGNALS: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS");
