/*
 * entry.h: the signal entry (entry.c), the one crash-path function install.c hands the kernel.
 */
#ifndef CRASHPORT_STUB_ENTRY_H
#define CRASHPORT_STUB_ENTRY_H

#include <signal.h>

#include "stub_state.h"

/** The SA_SIGINFO handler crashport installs for every signal it handles; runs in signal
 *  context (entry.c). */
void cp_handler_signal(int signo, siginfo_t *info, void *context) CP_HIDDEN;

#endif /* CRASHPORT_STUB_ENTRY_H */
