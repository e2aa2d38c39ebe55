/*
 * crashpad-client.c: the program tools/bench's `sidecar` section crashes, under Crashpad's handler
 * (speaking its Linux shared-socket protocol, as client/crashpad_client_linux.cc does) and under
 * crashport (the stub preloaded, connected to `crashport watch`). The same binary, the same
 * threads, the same stack touched per thread on both sides.
 *
 *   crashpad-client crash N [go]   park N threads (each touching about 5 KB of stack, as
 *                                  Tests/Fixtures/corpus/threads.c does), then fault in the main
 *                                  thread. With `go`, wait for EOF on stdin first (tools/bench
 *                                  starts 20 of them, then closes their stdins at once). Prints
 *                                  `crashpad-client fault_at_ns=T` (CLOCK_MONOTONIC) just before
 *                                  the faulting store.
 *   crashpad-client idle           stay alive (connected) until stdin closes.
 *   crashpad-client probe SIZE     send kTypeCheckCredentials of SIZE bytes on the Crashpad socket
 *                                  and wait up to 2 s for the handler's kTypeCredentials reply:
 *                                  exit 0 if it came (the handler takes messages of that size).
 *   crashpad-client waitdir DIR SUFFIX COUNT TIMEOUT_MS
 *                                  print `ready`, then, for each file ending in SUFFIX that is
 *                                  created in or moved into DIR (inotify), `appeared_at_ns=T NAME`;
 *                                  exits after COUNT files or the timeout.
 *
 * Crashpad mode is on when CRASHPAD_FD names the client end of the socketpair (SOCK_SEQPACKET,
 * SO_PASSCRED on both ends; the handler has the other end as --initial-client-fd and
 * --shared-client-connection). CRASHPAD_MESSAGE_SIZE is the ClientToServerMessage size the
 * handler's build checks exactly (40 upstream, 4112 in Sentry's fork: its union has a
 * char path[PATH_MAX] for attachment messages). CRASHPAD_HANDLER_PID, if set and Yama is present,
 * is given to prctl(PR_SET_PTRACER) (what StartHandler does after asking the handler its pid).
 * The SIGSEGV handler then does what ExceptionHandlerClient::RequestCrashDump does for a shared
 * connection: fill the static ExceptionInformation {siginfo_address, context_address, thread_id},
 * block SIGCONT, send kTypeCrashDumpRequest carrying the address of a local on the crashing
 * thread's stack, wait for SIGCONT in sigtimedwait (5 s, restarted on EINTR), restore the mask.
 * It prints `crashpad-client request_to_sigcont_ns=N eintr=K timed_out=0|1` and re-raises.
 *
 * Without CRASHPAD_FD no handler is installed here: under crashport the preloaded stub takes the
 * fault.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

/* util/linux/exception_handler_protocol.h and exception_information.h, packed. */
#pragma pack(push, 1)
struct exception_information {
    uint64_t siginfo_address;
    uint64_t context_address;
    int32_t thread_id;
};
struct client_information {
    uint64_t exception_information_address;
    uint64_t sanitization_information_address;
    uint64_t crash_loop_before_time;
};
struct client_to_server_message {
    int32_t version; /* kVersion = 1 */
    uint32_t type;   /* kTypeCheckCredentials = 0, kTypeCrashDumpRequest = 1 */
    uint64_t requesting_thread_stack_address;
    union {
        struct client_information client_info;
        char path[PATH_MAX]; /* Sentry's fork only: attachment add/remove messages */
    } u;
};
#pragma pack(pop)

enum { kTypeCheckCredentials = 0, kTypeCrashDumpRequest = 1 };

static int crashpad_fd = -1;
static size_t message_size = 40;
static pid_t handler_pid = 0;
static struct exception_information exception_information;
static struct client_to_server_message message;
static char timing_line[160];

static pthread_barrier_t all_parked;
volatile int sink;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Formats without stdio (async-signal-safe enough for this fixture). */
static char *put_u64(char *p, uint64_t v) {
    char digits[24];
    int n = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) *p++ = digits[--n];
    return p;
}
static char *put_str(char *p, const char *s) {
    while (*s) *p++ = *s++;
    return p;
}

static void crash_handler(int signo, siginfo_t *info, void *context) {
    int local = 0; /* its address tells the handler which thread to wake */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (handler_pid > 0 && access("/proc/sys/kernel/yama/ptrace_scope", F_OK) == 0)
        prctl(PR_SET_PTRACER, (unsigned long)handler_pid, 0, 0, 0);
    exception_information.siginfo_address = (uint64_t)(uintptr_t)info;
    exception_information.context_address = (uint64_t)(uintptr_t)context;
    exception_information.thread_id = (int32_t)syscall(SYS_gettid);
    memset(&message, 0, sizeof message);
    message.version = 1;
    message.type = kTypeCrashDumpRequest;
    message.requesting_thread_stack_address = (uint64_t)(uintptr_t)&local;
    message.u.client_info.exception_information_address = (uint64_t)(uintptr_t)&exception_information;

    sigset_t dump_done, old;
    sigemptyset(&dump_done);
    sigaddset(&dump_done, SIGCONT);
    pthread_sigmask(SIG_BLOCK, &dump_done, &old);
    uint64_t start = now_ns();
    ssize_t sent = send(crashpad_fd, &message, message_size, MSG_NOSIGNAL);
    int eintr = 0, timed_out = 0;
    if (sent == (ssize_t)message_size) {
        struct timespec timeout = {5, 0};
        for (;;) {
            int got = sigtimedwait(&dump_done, NULL, &timeout);
            if (got == SIGCONT) break;
            if (got < 0 && errno == EINTR) { eintr++; continue; }
            timed_out = 1;
            break;
        }
    } else {
        timed_out = 1;
    }
    uint64_t end = now_ns();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    char *p = timing_line;
    p = put_str(p, "crashpad-client request_to_sigcont_ns=");
    p = put_u64(p, end - start);
    p = put_str(p, " eintr=");
    p = put_u64(p, (uint64_t)eintr);
    p = put_str(p, " timed_out=");
    p = put_u64(p, (uint64_t)timed_out);
    p = put_str(p, "\n");
    (void)!write(1, timing_line, (size_t)(p - timing_line));
    /* Re-raise: the default action, then return to the faulting store. */
    signal(signo, SIG_DFL);
}

NOINLINE void park_here(void) {
    pthread_barrier_wait(&all_parked);
    for (;;) pause();
}

NOINLINE void use_stack(int depth) {
    char buffer[1024];
    memset(buffer, depth, sizeof buffer);
    sink += buffer[depth % sizeof buffer];
    if (depth > 0) use_stack(depth - 1); else park_here();
    sink++;
}

static void *thread_main(void *argument) {
    (void)argument;
    use_stack(4); /* about 5 KB of stack in use, as threads.c */
    return NULL;
}

NOINLINE void crash_main(void) {
    char line[64];
    char *p = put_str(line, "crashpad-client fault_at_ns=");
    p = put_u64(p, now_ns());
    p = put_str(p, "\n");
    (void)!write(1, line, (size_t)(p - line));
    *(volatile int *)8 = 1;
}

static void install_crashpad(void) {
    const char *fd = getenv("CRASHPAD_FD");
    if (!fd) return;
    crashpad_fd = atoi(fd);
    if (getenv("CRASHPAD_MESSAGE_SIZE")) message_size = (size_t)atoi(getenv("CRASHPAD_MESSAGE_SIZE"));
    if (getenv("CRASHPAD_HANDLER_PID")) handler_pid = (pid_t)atoi(getenv("CRASHPAD_HANDLER_PID"));
    if (handler_pid > 0 && access("/proc/sys/kernel/yama/ptrace_scope", F_OK) == 0)
        prctl(PR_SET_PTRACER, (unsigned long)handler_pid, 0, 0, 0);
    /* As Crashpad: an alternate signal stack, and the handler for the crash signals. */
    static char alternate[64 * 1024];
    stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate};
    sigaltstack(&stack, NULL);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = crash_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    int signals[] = {SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGQUIT, SIGSEGV, SIGSYS, SIGTRAP, SIGXCPU, SIGXFSZ};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaction(signals[i], &action, NULL);
}

static void wait_for_eof(void) {
    char buffer[64];
    while (read(0, buffer, sizeof buffer) > 0) {}
}

static int crash(int count, int go) {
    install_crashpad();
    pthread_barrier_init(&all_parked, NULL, (unsigned)count + 1);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 256 * 1024);
    for (int i = 0; i < count; i++) {
        pthread_t thread;
        if (pthread_create(&thread, &attributes, thread_main, NULL) != 0) {
            perror("pthread_create");
            return 3;
        }
        char name[16];
        snprintf(name, sizeof name, "parked-%d", i);
        pthread_setname_np(thread, name);
    }
    pthread_barrier_wait(&all_parked);
    if (go) {
        (void)!write(1, "ready\n", 6);
        wait_for_eof();
    }
    crash_main();
    sink++;
    return 0;
}

static int probe(size_t size) {
    crashpad_fd = atoi(getenv("CRASHPAD_FD"));
    memset(&message, 0, sizeof message);
    message.version = 1;
    message.type = kTypeCheckCredentials;
    if (send(crashpad_fd, &message, size, MSG_NOSIGNAL) != (ssize_t)size) return 2;
    struct pollfd pfd = {.fd = crashpad_fd, .events = POLLIN};
    if (poll(&pfd, 1, 2000) != 1 || !(pfd.revents & POLLIN)) return 1;
    char reply[64];
    return recv(crashpad_fd, reply, sizeof reply, 0) > 0 ? 0 : 1;
}

static int waitdir(const char *dir, const char *suffix, int count, int timeout_ms) {
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        perror(dir);
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    size_t suffix_length = strlen(suffix);
    int seen = 0;
    char buffer[64 * 1024] __attribute__((aligned(8)));
    while (seen < count) {
        uint64_t now = now_ns();
        if (now >= deadline) break;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1) <= 0) continue;
        ssize_t length = read(fd, buffer, sizeof buffer);
        uint64_t at = now_ns();
        for (ssize_t offset = 0; offset < length;) {
            struct inotify_event *event = (struct inotify_event *)(buffer + offset);
            offset += (ssize_t)(sizeof *event + event->len);
            size_t name_length = event->len ? strlen(event->name) : 0;
            /* Hidden names are temporaries and crashport's run history, never a report. */
            if (name_length >= suffix_length && event->name[0] != '.' &&
                strcmp(event->name + name_length - suffix_length, suffix) == 0) {
                printf("appeared_at_ns=%llu %s\n", (unsigned long long)at, event->name);
                seen++;
            }
        }
        fflush(stdout);
    }
    return seen >= count ? 0 : 1;
}

int main(int argc, char **argv) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (argc >= 3 && strcmp(argv[1], "crash") == 0) return crash(atoi(argv[2]), argc > 3 && strcmp(argv[3], "go") == 0);
    if (argc >= 2 && strcmp(argv[1], "idle") == 0) {
        install_crashpad();
        wait_for_eof();
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "probe") == 0) return probe((size_t)atoi(argv[2]));
    if (argc >= 6 && strcmp(argv[1], "waitdir") == 0) return waitdir(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: crashpad-client crash N [go] | idle | probe SIZE | waitdir DIR SUFFIX COUNT TIMEOUT_MS\n");
    return 64;
}
