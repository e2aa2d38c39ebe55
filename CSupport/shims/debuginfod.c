/* debuginfod for offline symbolication (`crashport symbolicate --debuginfod`): a module's debug
 * file fetched by build-id from the servers in DEBUGINFOD_URLS, with elfutils' own client
 * (libdebuginfod), into its standard cache. Loaded when first asked (dlopen
 * "libdebuginfod.so.1", Debian's libdebuginfod1), never linked: no crashport process maps it
 * otherwise, and none does in the capture path. Bounded: a fetch that has not finished after
 * `seconds` is aborted through the client's progress callback. */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static struct {
    debuginfod_client *(*begin)(void);
    int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
    int (*find_executable)(debuginfod_client *, const unsigned char *, int, char **);
    void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
    void (*end)(debuginfod_client *);
    const char *missing;
} library;

static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static void library_load(void) {
    void *handle = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        library.missing = "libdebuginfod.so.1 is not installed (Debian: apt-get install libdebuginfod1)";
        return;
    }
#define LOAD(field, name)                             \
    *(void **)(&library.field) = dlsym(handle, name); \
    if (library.field == NULL) {                      \
        library.missing = "libdebuginfod.so.1 lacks " name; \
        return;                                       \
    }
    LOAD(begin, "debuginfod_begin")
    LOAD(find_debuginfo, "debuginfod_find_debuginfo")
    LOAD(find_executable, "debuginfod_find_executable")
    LOAD(set_progressfn, "debuginfod_set_progressfn")
    LOAD(end, "debuginfod_end")
#undef LOAD
}

/* The deadline of the fetch in progress on this thread (CLOCK_MONOTONIC seconds). */
static __thread double fetch_deadline;

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* libdebuginfod calls this while it downloads: non-zero aborts the fetch. */
static int fetch_progress(debuginfod_client *client, long done, long total) {
    (void)client;
    (void)done;
    (void)total;
    return now_seconds() > fetch_deadline ? 1 : 0;
}

int cp_debuginfod_find(const unsigned char *build_id, int length, int executable, double seconds, char **path,
                       const char **why) {
    pthread_once(&library_once, library_load);
    *path = NULL;
    *why = NULL;
    if (library.missing != NULL) {
        *why = library.missing;
        return -ENOSYS;
    }
    debuginfod_client *client = library.begin();
    if (client == NULL) {
        *why = "debuginfod_begin failed";
        return -ENOMEM;
    }
    fetch_deadline = now_seconds() + seconds;
    library.set_progressfn(client, fetch_progress);
    int fd = executable ? library.find_executable(client, build_id, length, path)
                        : library.find_debuginfo(client, build_id, length, path);
    library.end(client);
    if (fd < 0 && now_seconds() > fetch_deadline) {
        *why = "it took longer than the time allowed";
        return -ETIMEDOUT;
    }
    return fd;
}
