/*
 * credentials.c: the calling thread takes on a client user's filesystem ids, and only that
 * user's groups, with no effective capabilities; and gives them back (Sources/LiveProcess/
 * Credentials.swift).
 *
 * Linux keeps credentials per thread; glibc makes setgroups, setresuid and capset apply to every
 * thread of the process (it broadcasts them), so the raw system calls are used here, which
 * change the calling thread only. setfsuid and setfsgid are not broadcast by glibc.
 *
 * The real and saved uids stay root's: a client's user may signal a thread whose real or saved
 * uid is theirs (kill(2)'s rule), and a root sidecar must not be a process its clients can
 * stop or kill. What the kernel checks for the client is what uses the filesystem ids
 * (open(2) of files and of /proc/PID/mem, maps, environ, root: PTRACE_MODE_*_FSCREDS) and the
 * effective capabilities (CAP_SYS_PTRACE, CAP_DAC_*, CAP_CHECKPOINT_RESTORE): all of them are
 * the client's here, so the kernel answers as it would answer the client.
 */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The thread's identity before cp_thread_assume, and how deep assumes of the same user nest. */
static _Thread_local struct {
    int depth;
    unsigned uid, gid;
    unsigned fsuid, fsgid;
    int group_count;
    gid_t groups[CP_THREAD_GROUPS_MAX];
    struct __user_cap_data_struct caps[2];
    /* The user's groups as taken on, and whether the thread stepped out (cp_thread_step_out). */
    int assumed_count;
    gid_t assumed[CP_THREAD_GROUPS_MAX];
    int out;
} saved;

static int cp_capget(struct __user_cap_data_struct caps[2]) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    return (int)syscall(SYS_capget, &header, caps);
}

static int cp_capset(struct __user_cap_data_struct caps[2]) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    return (int)syscall(SYS_capset, &header, caps);
}

static int cp_restore_saved(void) {
    int failed = 0;
    /* Capabilities first: setgroups needs CAP_SETGID. */
    failed |= cp_capset(saved.caps) != 0;
    setfsuid(saved.fsuid);
    setfsgid(saved.fsgid);
    failed |= (unsigned)setfsuid((uid_t)-1) != saved.fsuid || (unsigned)setfsgid((gid_t)-1) != saved.fsgid;
    failed |= syscall(SYS_setgroups, (size_t)saved.group_count, saved.groups) != 0;
    return failed ? -1 : 0;
}

/* The user's groups (saved.assumed), fsgid, fsuid, and no effective capability, checked. */
static int cp_take_on(unsigned uid, unsigned gid) {
    if (syscall(SYS_setgroups, (size_t)saved.assumed_count, saved.assumed) != 0) return -1;
    setfsgid(gid);
    setfsuid(uid);
    struct __user_cap_data_struct none[2] = {saved.caps[0], saved.caps[1]};
    none[0].effective = 0;
    none[1].effective = 0;
    struct __user_cap_data_struct now[2];
    if ((unsigned)setfsuid((uid_t)-1) != uid || (unsigned)setfsgid((gid_t)-1) != gid || cp_capset(none) != 0 ||
        cp_capget(now) != 0 || now[0].effective != 0 || now[1].effective != 0)
        return -1;
    return 0;
}

int cp_thread_assume(unsigned uid, unsigned gid, const unsigned *groups, int group_count) {
    if (saved.depth > 0) {
        /* The same user's again (a report thread reading as the client, then writing into that
         * user's directory as its owner): the outer credentials stay. */
        if (saved.uid != uid || saved.out) { /* another user's, or inside a step out */
            errno = EBUSY;
            return -1;
        }
        saved.depth++;
        return 0;
    }
    if (group_count < 0 || group_count > CP_THREAD_GROUPS_MAX) {
        errno = EINVAL;
        return -1;
    }
    saved.fsuid = (unsigned)setfsuid((uid_t)-1);
    saved.fsgid = (unsigned)setfsgid((gid_t)-1);
    long count = syscall(SYS_getgroups, CP_THREAD_GROUPS_MAX, saved.groups);
    if (count < 0 || cp_capget(saved.caps) != 0) return -1;
    saved.group_count = (int)count;
    for (int i = 0; i < group_count; i++) saved.assumed[i] = groups[i];
    saved.assumed_count = group_count;
    if (cp_take_on(uid, gid) != 0) {
        int error = errno ? errno : EPERM;
        (void)cp_restore_saved();
        errno = error;
        return -1;
    }
    saved.uid = uid;
    saved.gid = gid;
    saved.depth = 1;
    saved.out = 0;
    return 0;
}

int cp_thread_step_out(void) {
    if (saved.depth <= 0 || saved.out) return 0;
    if (cp_restore_saved() != 0) {
        /* Half restored: the user's credentials back on, or the thread is neither's. */
        return cp_take_on(saved.uid, saved.gid) == 0 ? -1 : -2;
    }
    saved.out = 1;
    return 1;
}

int cp_thread_step_in(void) {
    if (!saved.out) return 0;
    if (cp_take_on(saved.uid, saved.gid) != 0) return -1;
    saved.out = 0;
    return 0;
}

int cp_thread_restore(void) {
    if (saved.depth <= 0) return 0;
    if (--saved.depth > 0) return 0;
    if (saved.out) {
        saved.out = 0;
        return 0; /* already the thread's own */
    }
    return cp_restore_saved();
}
