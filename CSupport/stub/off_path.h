/*
 * off_path.h: the calls between the stub's files off the crash path, which go one way:
 *
 *     install.c  →  launch.c  →  app.c  →  settings.c
 *
 * install.c (crashport_install, the constructor) calls into launch.c, app.c and settings.c;
 * launch.c (the last run in full, launch protection, keyed tasks) into app.c and settings.c;
 * app.c (the program's API, the last run, sending to the watcher) into settings.c only;
 * settings.c (CRASHPORT_* from the environment) into none of them. Nothing calls back up: what a
 * lower file needs lives in it or below it. tools/build-stub fails the build when a built object
 * references a symbol (a function, or data) that a file above it defines, naming both files.
 *
 * Each section below is what one file exports to the files above it. None of this runs in
 * signal context (the crash path is entry.c → forward.c → report.c, and calls none of it).
 */
#ifndef CRASHPORT_STUB_OFF_PATH_H
#define CRASHPORT_STUB_OFF_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h> /* struct timespec: a type only */

#include "crashport_protocol.h"
#include "stub_state.h"

/* -- launch.c, for install.c -- */

/** The previous run in full (launch.c): from a sidecar's HELLO_REPLY, or else, at install, from
 *  CRASHPORT_LAST_RUN_DETAIL (cp_launch_install). */
void cp_launch_set_detail(const cp_run_detail *detail) CP_HIDDEN;
void cp_launch_install(void) CP_HIDDEN;

/** What became of the last run's report, as a sidecar's HELLO_REPLY says (launch.c). */
void cp_launch_set_send(const cp_send_state *send) CP_HIDDEN;

/* -- app.c, for install.c, launch.c and attach.c -- */

/** Marks the app area in use (app.c), for a call that writes it before crashport_install. */
void cp_app_mark_ready(void) CP_HIDDEN;

/** The annotation and attachment writers' spin flag (app.c): 0, -EDEADLK (this thread holds
 *  it) or -EBUSY (another kept it a whole second). Never held across a system call. */
int cp_app_writers_lock(void) CP_HIDDEN;
void cp_app_writers_unlock(void) CP_HIDDEN;

/** Marks the app area in use, starts the launch window, and finds glibc's, Swift's and
 *  libstdc++'s abort messages (app.c). Takes the last run from CRASHPORT_LAST_RUN unless a
 *  sidecar's HELLO_REPLY gave it already. */
void cp_app_install(void) CP_HIDDEN;

/** The previous run as the watcher knows it (a sidecar's HELLO_REPLY); applies its `disabled`. */
void cp_app_set_last_run(const cp_last_run *run) CP_HIDDEN;

/** Sends one fixed-size message to the watcher, non-blocking (app.c): fills its header; 0,
 *  -ENOTCONN when crashport is not installed, or -errno. */
int cp_app_send(void *message, size_t size, uint32_t type) CP_HIDDEN;

/** Copies at most `from_size` bytes of `from`, up to a NUL, into `to`, cut to fit and
 *  NUL-terminated (app.c): a field the watcher sent, a part of an environment variable. */
void cp_app_copy_text(char *to, size_t to_size, const char *from, size_t from_size) CP_HIDDEN;

/** Waits until `fd` is readable, at most `total_ms` from `start` (CLOCK_MONOTONIC), again after
 *  EINTR (app.c): 1 readable, 0 the time is up, or -errno. A reply from the watcher: the
 *  sidecar's HELLO_REPLY (install.c), the pending list (app.c). */
int cp_app_poll_until(int fd, const struct timespec *start, int total_ms) CP_HIDDEN;

/** The previous run, NULL when none is on record (app.c); whether crashport_install succeeded. */
const cp_last_run *cp_app_previous_run(void) CP_HIDDEN;
bool cp_app_is_installed(void) CP_HIDDEN;

/* -- app.c, for interpose.c (libcrashport.so only; not in the one-way order above) -- */

/** A std::terminate handler (libstdc++'s std::terminate_handler). */
typedef void (*cp_terminate_handler)(void);

/** Once crashport's std::terminate handler is installed: makes `handler` (NULL: libstdc++'s
 *  default) the program's, which crashport's calls next, puts the program's previous one in
 *  `previous`, and returns true. Before that (or without libstdc++), false: the caller passes
 *  the call on to libstdc++'s std::set_terminate. Atomic; no lock, no allocation (app.c). */
bool cp_app_chain_terminate(cp_terminate_handler handler, cp_terminate_handler *previous) CP_HIDDEN;

/** Once crashport's handler is installed: the program's handler in `current`, and true; else
 *  false (app.c). */
bool cp_app_chained_terminate(cp_terminate_handler *current) CP_HIDDEN;

/* -- settings.c, for all three -- */

/** Whether this process runs with privileges its real user does not have: the kernel's
 *  AT_SECURE (a setuid or setgid exec, file capabilities, an LSM's say), or real and effective
 *  user or group ids that differ now. Such a process takes nothing from the environment its
 *  user chose (settings.c). */
bool cp_settings_secure(void) CP_HIDDEN;

/** getenv for crashport's own settings (CRASHPORT_*): NULL in a process cp_settings_secure()
 *  says runs with privileges its user lacks, whose environment is its user's choice, not its
 *  own (settings.c). Every CRASHPORT_* read goes through it. */
const char *cp_settings_getenv(const char *name) CP_HIDDEN;

#endif /* CRASHPORT_STUB_OFF_PATH_H */
