/*
 * install.c: crashport_install() and the constructor that calls it under LD_PRELOAD.
 *
 * Install-time code runs in a healthy process and may use libc freely. Its job is to do, once,
 * everything the crash path (entry.c, forward.c, report.c) must not do in a crash: check the
 * socket, allocate the record, learn the watcher's pid and let it ptrace us, give the installing
 * thread an alternate stack, save each signal's previous action exactly as the kernel holds it,
 * install ours, hook the exit path (GOODBYE), and say HELLO. After it returns the stub makes no
 * system call until a crash, or until the process exits (GOODBYE: one non-blocking send).
 *
 * Two modes. Launcher mode: `crashport run` hands down one socket (CRASHPORT_FD). Sidecar mode
 * (no launcher socket, CRASHPORT_SOCKET names a path): install connects to `crashport watch`
 * itself, trusts the listener only if it runs as root or as our own user (SO_PEERCRED), says
 * HELLO and reads the sidecar's HELLO_REPLY (accepted, with its spool directory, or refused)
 * before the handlers go live. A sidecar that is not running does not stop the install: the
 * handler reconnects at the crash, and spools the crash if nobody answers. The spool directory
 * (CRASHPORT_SPOOL, the reply's, /var/spool/crashport) is opened here, once, in both modes.
 *
 * A process with privileges its user lacks (cp_settings_secure: a setuid or setgid program, file
 * capabilities, real and effective ids that differ) takes no CRASHPORT_* setting from its
 * environment, which its user chose (no socket, spool, fd, timeout, trace or hang settings): it
 * reports only where the program itself says (crashport_options), and trusts a listener only
 * as root or as its effective user, never its real one.
 *
 * Failures never abort the program: one line on stderr says what is off and why, and the
 * process is left as it was.
 *
 * Off the crash path the stub's files call one way (off_path.h): install.c → launch.c → attach.c
 * → app.c → settings.c. This file is the top: it calls into the three below it, none of them into it
 * (tools/build-stub checks it on the built objects).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h> /* dl_iterate_phdr */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "actions.h"
#include "crashport.h"
#include "crashport_protocol.h"
#include "entry.h"
#include "off_path.h"
#include "report.h"
#include "safe.h"
#include "stub_state.h"

/* interpose.c, in libcrashport.so only: resolves libc's sigaction while it is safe to, and
 * says that it is there. Elsewhere (libcrashport.a, SwiftPM's CCrashPort) these weak
 * definitions stand in: a weak undefined symbol does not read as NULL in a position-independent
 * executable (its address comes out as the executable's base). */
__attribute__((weak, visibility("hidden"))) bool cp_interposing = false; /* not const: never folded */
__attribute__((weak, visibility("hidden"))) void cp_interpose_resolve(void) {}

#define CP_HELLO_SEND_WAIT_MS 1000
#define CP_HELLO_REPLY_WAIT_MS 1000
#define CP_DEFAULT_SPOOL "/var/spool/crashport"

#define CP_BIT(signo) (1ull << (signo))
/* CP_DEFAULT_SIGNALS, the signals handled unless the options name others: crashport_protocol.h,
 * which the watcher reads too. */

/* The stub's mark: an ELF note (owner "crashport", type 1) in every object that carries a copy
 * of the stub: libcrashport.so, or a program that has it compiled in (a Swift program using the
 * CrashPort package, whose SwiftPM build compiles these sources; or libcrashport.a). Found at
 * install through each loaded object's PT_NOTE segments (cp_install_other_copy); interpose.c
 * adds its own (CP_MARK_INTERPOSER), so a libcrashport.so is told from a copy compiled in. */
__attribute__((section(".note.crashport"), used, aligned(4))) static const cp_mark_note cp_install_mark = {
    10, 4, CP_MARK_STUB, "crashport", 1};

static pthread_mutex_t cp_install_lock = PTHREAD_MUTEX_INITIALIZER;
static bool cp_installed; /* guarded by cp_install_lock */

/* One line on stderr, "crashport: " first. */
__attribute__((format(printf, 1, 2))) static void cp_install_say(const char *format, ...)
{
    char line[512];
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(line, sizeof line, format, arguments);
    va_end(arguments);
    if (length < 0) {
        return;
    }
    dprintf(STDERR_FILENO, "crashport: %s\n", line);
}

/* Parses a whole decimal number in [minimum, maximum]: no sign, no space, no junk. */
static bool cp_install_parse(const char *text, unsigned long long minimum,
                             unsigned long long maximum, unsigned long long *value)
{
    if (text == NULL || *text < '0' || *text > '9') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || parsed < minimum || parsed > maximum) {
        return false;
    }
    *value = parsed;
    return true;
}

/* Parses a list of signals such as "SIGSEGV,bus,7" into a mask. False (with *bad pointing at
 * the first unknown name) when a name is unknown or the signal cannot be handled. */
static bool cp_install_parse_signals(const char *text, uint64_t *mask, char *bad, size_t bad_size)
{
    static const struct {
        const char *name;
        int signo;
    } known[] = {
        {"SEGV", SIGSEGV}, {"BUS", SIGBUS}, {"ILL", SIGILL},   {"FPE", SIGFPE},
        {"ABRT", SIGABRT}, {"TRAP", SIGTRAP}, {"SYS", SIGSYS},
    };
    uint64_t result = 0;
    const char *cursor = text;
    while (*cursor != '\0') {
        const char *end = strchr(cursor, ',');
        size_t length = end ? (size_t)(end - cursor) : strlen(cursor);
        char name[32];
        if (length == 0 || length >= sizeof name) {
            snprintf(bad, bad_size, "%.*s", (int)(length < 31 ? length : 31), cursor);
            return false;
        }
        memcpy(name, cursor, length);
        name[length] = '\0';
        const char *bare = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
        int signo = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcasecmp(bare, known[i].name) == 0) {
                signo = known[i].signo;
            }
        }
        unsigned long long number = 0;
        if (signo == 0 && cp_install_parse(name, 1, CP_SIGNAL_LIMIT - 1, &number)) {
            signo = (int)number;
        }
        if (signo == 0 || signo == SIGKILL || signo == SIGSTOP) {
            snprintf(bad, bad_size, "%s", name);
            return false;
        }
        result |= CP_BIT(signo);
        cursor += length + (end ? 1 : 0);
    }
    *mask = result;
    return true;
}

/* True when fd is an AF_UNIX SOCK_SEQPACKET socket. */
static bool cp_install_is_crashport_socket(int fd)
{
    struct stat status;
    if (fstat(fd, &status) != 0 || !S_ISSOCK(status.st_mode)) {
        return false;
    }
    int value = 0;
    socklen_t length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &length) != 0 || value != SOCK_SEQPACKET) {
        return false;
    }
    length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &length) != 0 || value != AF_UNIX) {
        return false;
    }
    return true;
}

/* pthread_atfork child hook: Yama's ptracer exception belongs to one process, so a forked
 * child names the watcher again. Raw system call: a child of a multithreaded parent may only
 * make async-signal-safe calls. */
static void cp_install_after_fork_in_child(void)
{
    if (cp_state.watcher_pid > 0) {
        (void)cp_safe_syscall2(SYS_prctl, PR_SET_PTRACER, cp_state.watcher_pid);
    }
}

/* on_exit hook (registered at install): the process exits through exit() with `status`; say
 * GOODBYE so that the watcher knows the end was normal. Registered by the constructor it runs
 * after every exit handler the program registers and after the libraries' destructors (the
 * loader's are registered after it); by a later crashport_install(), after the handlers the
 * program registers from then on. */
static void cp_install_on_exit(int status, void *unused)
{
    (void)unused;
    cp_handler_goodbye(&cp_state, status);
}

/* Gives the calling thread a 64 KiB alternate signal stack with a PROT_NONE guard page below
 * it, unless it already has one that large (never replaced) or is running on it. Returns 0 or
 * -errno. The mapping lives as long as the process. */
static int cp_install_altstack(void)
{
    stack_t current;
    if (sigaltstack(NULL, &current) != 0) {
        return -errno;
    }
    if (current.ss_flags & SS_ONSTACK) {
        return 0;
    }
    if (!(current.ss_flags & SS_DISABLE) && current.ss_size >= CP_ALTSTACK_BYTES) {
        return 0;
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t guard = page > 0 ? (size_t)page : 4096u;
    char *base = mmap(NULL, guard + CP_ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) {
        return -errno;
    }
    if (mprotect(base, guard, PROT_NONE) != 0) {
        int error = errno;
        munmap(base, guard + CP_ALTSTACK_BYTES);
        return -error;
    }
    stack_t ours = {.ss_sp = base + guard, .ss_flags = 0, .ss_size = CP_ALTSTACK_BYTES};
    if (sigaltstack(&ours, NULL) != 0) {
        int error = errno;
        munmap(base, guard + CP_ALTSTACK_BYTES);
        return -error;
    }
    return 0;
}

/* dl_iterate_phdr callback: copies the GNU build-id of the first object, the main executable,
 * into the HELLO, then stops the iteration. */
static int cp_install_find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    cp_hello *hello = data;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        if (segment->p_type != PT_NOTE) {
            continue;
        }
        const unsigned char *note = (const unsigned char *)(info->dlpi_addr + segment->p_vaddr);
        size_t left = segment->p_memsz;
        size_t align = segment->p_align == 8 ? 8 : 4;
        while (left >= sizeof(ElfW(Nhdr))) {
            ElfW(Nhdr) header;
            memcpy(&header, note, sizeof header);
            size_t name_size = ((size_t)header.n_namesz + align - 1) & ~(align - 1);
            size_t desc_size = ((size_t)header.n_descsz + align - 1) & ~(align - 1);
            size_t total = sizeof header + name_size + desc_size;
            if (name_size > left || desc_size > left || total > left) {
                break;
            }
            const unsigned char *name = note + sizeof header;
            if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
                memcmp(name, "GNU", 4) == 0) {
                size_t copy = header.n_descsz < sizeof hello->build_id ? header.n_descsz
                                                                         : sizeof hello->build_id;
                memcpy(hello->build_id, name + name_size, copy);
                hello->build_id_size = (uint32_t)copy;
                return 1;
            }
            note += total;
            left -= total;
        }
    }
    return 1; /* only the first object is the main executable */
}

/* Fills the HELLO this process sends (in the install-time area: the handler sends it again
 * when it reconnects to a sidecar). */
static void cp_install_build_hello(cp_hello *hello)
{
    memset(hello, 0, sizeof *hello);
    hello->header.magic = CP_MAGIC;
    hello->header.version = CP_VERSION;
    hello->header.size = sizeof *hello;
    hello->header.type = CP_MSG_HELLO;
    hello->pid = (uint32_t)getpid();
    hello->stub_version = CP_STUB_VERSION;
    hello->annotations_address = (uint64_t)(uintptr_t)&cp_app;
    dl_iterate_phdr(cp_install_find_build_id, hello);

    /* What a sidecar is asked to do for this process (crashport run takes its flags). */
    hello->wants = CP_WANTS_RUN_DETAIL | CP_WANTS_SEND_STATE;
    const char *trace = cp_settings_getenv("CRASHPORT_TRACE_EXIT");
    if (trace != NULL && *trace != '\0' && strcmp(trace, "0") != 0) {
        hello->wants |= strcmp(trace, "codes") == 0 ? CP_WANTS_TRACE_EXIT_CODES : CP_WANTS_TRACE_EXIT;
        if (strcmp(trace, "1") != 0 && strcmp(trace, "codes") != 0) {
            cp_install_say("CRASHPORT_TRACE_EXIT=%s: expected 1, codes or 0; taken as 1", trace);
        }
    }
    const char *kill = cp_settings_getenv("CRASHPORT_HANG_KILL");
    if (kill != NULL && strcmp(kill, "1") == 0) hello->wants |= CP_WANTS_HANG_KILL;
    const char *hang = cp_settings_getenv("CRASHPORT_HANG_MS");
    unsigned long long hang_ms = 0;
    if (hang != NULL && *hang != '\0') {
        if (cp_install_parse(hang, 10, UINT32_MAX, &hang_ms)) {
            hello->hang_ms = (uint32_t)hang_ms;
        } else {
            cp_install_say("CRASHPORT_HANG_MS=%s is not a number of milliseconds from 10; no hang "
                           "watch asked",
                           hang);
        }
    }
}

/* Sends HELLO; waits at most CP_HELLO_SEND_WAIT_MS for room in the watcher's queue. Returns 0
 * or -errno (the caller says why). */
static int cp_install_send_hello(int fd, const cp_hello *hello)
{
    struct iovec iov = {.iov_base = (void *)hello, .iov_len = sizeof *hello};
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1};
    bool waited = false;
    for (;;) {
        if (sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) {
            return 0;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN && !waited) {
            struct pollfd entry = {.fd = fd, .events = POLLOUT, .revents = 0};
            (void)poll(&entry, 1, CP_HELLO_SEND_WAIT_MS);
            waited = true;
            continue;
        }
        return -errno;
    }
}

/* Waits at most CP_HELLO_REPLY_WAIT_MS for the sidecar's HELLO_REPLY and checks it: magic,
 * version, size, type, status, and both strings NUL-terminated. Returns 0 with *reply filled,
 * -ETIMEDOUT when none came, or another -errno with *why set (closed, garbage). */
static int cp_install_read_hello_reply(int fd, cp_hello_reply *reply, const char **why)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    union {
        cp_hello_reply reply;
        unsigned char bytes[sizeof(cp_hello_reply) + 64]; /* a longer message shows its length */
    } message;
    for (;;) {
        int ready = cp_app_poll_until(fd, &start, CP_HELLO_REPLY_WAIT_MS);
        if (ready == 0) return -ETIMEDOUT;
        if (ready < 0) {
            *why = strerror(-ready);
            return ready;
        }
        ssize_t received = recv(fd, &message, sizeof message, MSG_DONTWAIT);
        if (received < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (received < 0) {
            *why = strerror(errno);
            return -errno;
        }
        if (received == 0) {
            *why = "it closed the connection without answering HELLO";
            return -ECONNRESET;
        }
        /* The whole reply, or (a sidecar from before last_send) the part that ends at run_detail,
         * or (one from before run_detail) the part that ends at last_run: what it lacks stays
         * zero, which reads as not known. */
        const cp_hello_reply *r = &message.reply;
        bool whole = (size_t)received == sizeof *r && r->header.size == sizeof *r;
        bool detail_reply =
            (size_t)received == CP_HELLO_REPLY_DETAIL_SIZE && r->header.size == CP_HELLO_REPLY_DETAIL_SIZE;
        bool short_reply = (size_t)received == CP_HELLO_REPLY_SHORT_SIZE && r->header.size == CP_HELLO_REPLY_SHORT_SIZE;
        if (short_reply) memset(&message.reply.run_detail, 0, sizeof message.reply.run_detail);
        if (short_reply || detail_reply) memset(&message.reply.last_send, 0, sizeof message.reply.last_send);
        if (!(whole || detail_reply || short_reply) || r->header.magic != CP_MAGIC || r->header.version != CP_VERSION ||
            r->header.type != CP_MSG_HELLO_REPLY) {
            *why = "its answer to HELLO is not a HELLO_REPLY of this protocol version";
            return -EPROTO;
        }
        if (memchr(r->spool, '\0', sizeof r->spool) == NULL ||
            memchr(r->message, '\0', sizeof r->message) == NULL ||
            (r->status != CP_HELLO_ACCEPTED && r->status != CP_HELLO_REFUSED)) {
            *why = "its HELLO_REPLY is malformed (unterminated string or unknown status)";
            return -EPROTO;
        }
        memcpy(reply, r, sizeof *reply);
        return 0;
    }
}

/* Puts every action in 'installed' back as saved in cp_state.previous (raw, byte-for-byte). */
static void cp_install_restore(uint64_t installed)
{
    for (int signo = 1; signo < CP_SIGNAL_LIMIT; signo++) {
        if (installed & CP_BIT(signo)) {
            (void)cp_safe_syscall4(SYS_rt_sigaction, signo, (long)&cp_state.previous[signo], 0, 8);
        }
    }
}

/* Saves the previous action of every signal in 'signals' as the kernel holds it, starts the
 * program's own action there (actions.h), then installs ours. Returns 0, or -errno with nothing
 * changed (and *failed_signo set). */
static int cp_install_handlers(uint64_t signals, int *failed_signo)
{
    /* First save them all: the handler reads them as soon as it is live. */
    for (int signo = 1; signo < CP_SIGNAL_LIMIT; signo++) {
        if (!(signals & CP_BIT(signo))) {
            continue;
        }
        long result = cp_safe_syscall4(SYS_rt_sigaction, signo, 0,
                                       (long)&cp_state.previous[signo], 8);
        if (result != 0) {
            *failed_signo = signo;
            return (int)result;
        }
        cp_actions_reset(&cp_state, signo, &cp_state.previous[signo]);
    }
    cp_state.has_previous = signals;
    cp_state.handler_address = (uint64_t)(uintptr_t)&cp_handler_signal;
    cp_interpose_resolve();

    /* libc's sigaction (ours passes these through until 'handled' is published below), so
     * that the kernel gets libc's restorer, as for any other action. */
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = cp_handler_signal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    uint64_t installed = 0;
    for (int signo = 1; signo < CP_SIGNAL_LIMIT; signo++) {
        if (!(signals & CP_BIT(signo))) {
            continue;
        }
        if (sigaction(signo, &ours, NULL) != 0) {
            int error = errno;
            cp_install_restore(installed);
            *failed_signo = signo;
            return -error;
        }
        installed |= CP_BIT(signo);
        if (cp_state.restorer == 0) {
            cp_kernel_sigaction kernel;
            memset(&kernel, 0, sizeof kernel);
            if (cp_safe_syscall4(SYS_rt_sigaction, signo, 0, (long)&kernel, 8) == 0) {
                cp_state.restorer = kernel.restorer;
            }
        }
    }
    /* From here on the program's sigaction for these signals changes its own action only. */
    __atomic_store_n(&cp_state.handled, signals, __ATOMIC_RELEASE);
    return 0;
}

/* Undoes the state of a failed install (handlers already restored): closes what install
 * opened (the sidecar connection, the spool directory; never the launcher's socket). */
static void cp_install_forget(void)
{
    if (cp_state.sidecar_mode && cp_state.fd >= 0) {
        close(cp_state.fd);
    }
    if (cp_state.sidecar_mode && cp_state.watcher_pid > 0) {
        (void)prctl(PR_SET_PTRACER, 0UL, 0, 0, 0);
    }
    if (cp_state.spool_fd >= 0) {
        close(cp_state.spool_fd);
    }
    if (cp_state.record != NULL) {
        munmap(cp_state.record, sizeof(cp_crash_area));
    }
    memset(&cp_state, 0, sizeof cp_state);
    cp_state.fd = -1;
    cp_state.timing_fd = -1;
    cp_state.spool_fd = -1;
}

/* The launcher's socket: options->fd, else CRASHPORT_FD. Returns the fd, -ENOENT when neither
 * is given (sidecar mode may apply), or -EINVAL (said why). */
static int cp_install_socket(const crashport_options *options)
{
    char name[64];
    int fd = options->fd;
    if (fd == -1) {
        const char *text = cp_settings_getenv("CRASHPORT_FD");
        unsigned long long parsed = 0;
        if (text == NULL) {
            return -ENOENT;
        }
        if (!cp_install_parse(text, 0, INT_MAX, &parsed)) {
            cp_install_say("CRASHPORT_FD=%s is not a crashport socket; crash reporting is off",
                           text);
            return -EINVAL;
        }
        fd = (int)parsed;
        snprintf(name, sizeof name, "CRASHPORT_FD=%d", fd);
    } else {
        snprintf(name, sizeof name, "fd %d", fd);
    }
    if (fd < 0 || !cp_install_is_crashport_socket(fd)) {
        cp_install_say("%s is not a crashport socket; crash reporting is off", name);
        return -EINVAL;
    }
    return fd;
}

/* The sidecar's address: options->socket_path, else CRASHPORT_SOCKET, into cp_state (a leading
 * '@' names the abstract namespace). Returns 0, -ENOENT when neither is set, or -EINVAL /
 * -ENAMETOOLONG (said why). */
static int cp_install_sidecar_address(const crashport_options *options)
{
    const char *path = options->socket_path;
    const char *what = "socket_path";
    if (path == NULL) {
        path = cp_settings_getenv("CRASHPORT_SOCKET");
        what = "CRASHPORT_SOCKET";
    }
    if (path == NULL) {
        return -ENOENT;
    }
    struct sockaddr_un *address = &cp_state.sidecar_address;
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    size_t length = strlen(path);
    bool abstract = path[0] == '@';
    if (length == 0 || (abstract && length == 1)) {
        cp_install_say("%s is empty; crash reporting is off", what);
        return -EINVAL;
    }
    /* A file path needs its NUL inside sun_path; an abstract name is '\0' then the name's
     * bytes, no NUL, its length given by the address length. */
    size_t room = sizeof address->sun_path - (abstract ? 0 : 1);
    if (length > room) {
        cp_install_say("%s=%s is %zu bytes, longer than a Unix socket path can be (at most %zu); "
                       "crash reporting is off",
                       what, path, length, room);
        return -ENAMETOOLONG;
    }
    if (abstract) {
        address->sun_path[0] = '\0';
        memcpy(address->sun_path + 1, path + 1, length - 1);
    } else {
        memcpy(address->sun_path, path, length);
    }
    cp_state.sidecar_address_length = (uint32_t)(offsetof(struct sockaddr_un, sun_path) + length +
                                                 (abstract ? 0 : 1));
    cp_state.sidecar_mode = 1;
    return 0;
}

/* The sidecar's address as a user writes it ("@name" for an abstract one). */
static void cp_install_sidecar_name(char *name, size_t size)
{
    const struct sockaddr_un *address = &cp_state.sidecar_address;
    size_t length = cp_state.sidecar_address_length - offsetof(struct sockaddr_un, sun_path);
    if (address->sun_path[0] == '\0') {
        snprintf(name, size, "@%.*s", (int)(length - 1), address->sun_path + 1);
    } else {
        snprintf(name, size, "%s", address->sun_path);
    }
}

/* How long the handler waits for the verdict: the option, else CRASHPORT_TIMEOUT_MS, else
 * the default. */
static uint32_t cp_install_timeout(const crashport_options *options)
{
    if (options->timeout_ms != 0) return options->timeout_ms;
    const char *text = cp_settings_getenv("CRASHPORT_TIMEOUT_MS");
    unsigned long long parsed = 0;
    if (text == NULL) return CP_DEFAULT_TIMEOUT_MS;
    if (cp_install_parse(text, 1, UINT32_MAX, &parsed)) return (uint32_t)parsed;
    cp_install_say("CRASHPORT_TIMEOUT_MS=%s is not a positive number of milliseconds; using %u",
                   text, CP_DEFAULT_TIMEOUT_MS);
    return CP_DEFAULT_TIMEOUT_MS;
}

/* The forward-first signals: the option, else CRASHPORT_FORWARD_FIRST, else none. */
static uint64_t cp_install_forward_first(const crashport_options *options)
{
    uint64_t forward_first = options->forward_first;
    const char *text = cp_settings_getenv("CRASHPORT_FORWARD_FIRST");
    if (forward_first == 0 && text != NULL && *text != '\0') {
        char bad[32] = "";
        if (!cp_install_parse_signals(text, &forward_first, bad, sizeof bad)) {
            cp_install_say("CRASHPORT_FORWARD_FIRST=%s: unknown signal \"%s\"; every signal is "
                           "reported first, then forwarded",
                           text, bad);
            forward_first = 0;
        }
    }
    return forward_first;
}

/* The signals reported: the option, else CRASHPORT_SIGNALS, else CP_DEFAULT_SIGNALS. The
 * variable names the set ("SEGV,BUS,ABRT") or edits the default ("-ILL,-TRAP", "+7"); a value
 * that cannot be used (an unknown signal, both forms mixed, an empty set) is said once and the
 * default is used. */
static uint64_t cp_install_signals(const crashport_options *options)
{
    if (options->signals != 0) return options->signals;
    const char *text = cp_settings_getenv("CRASHPORT_SIGNALS");
    if (text == NULL || *text == '\0') return CP_DEFAULT_SIGNALS;
    char list[256];
    if (strlen(text) >= sizeof list) {
        cp_install_say("CRASHPORT_SIGNALS is longer than %zu bytes; using the default signals",
                       sizeof list - 1);
        return CP_DEFAULT_SIGNALS;
    }
    /* Split the entries by their sign: bare ones name the set, signed ones edit the default. */
    char named[256] = "", added[256] = "", removed[256] = "";
    snprintf(list, sizeof list, "%s", text);
    for (char *save = NULL, *entry = strtok_r(list, ",", &save); entry != NULL;
         entry = strtok_r(NULL, ",", &save)) {
        char *target = *entry == '+' ? added : *entry == '-' ? removed : named;
        const char *name = *entry == '+' || *entry == '-' ? entry + 1 : entry;
        if (*name == '\0') name = "?"; /* a sign alone: unknown, said as such */
        size_t used = strlen(target);
        snprintf(target + used, sizeof named - used, "%s%s", used > 0 ? "," : "", name);
    }
    char bad[32] = "";
    uint64_t signals = 0, add = 0, remove = 0;
    const char *problem = NULL;
    if (named[0] != '\0' && (added[0] != '\0' || removed[0] != '\0')) {
        problem = "names signals and edits the default at once (use \"SEGV,BUS\" or \"-ILL,+7\")";
    } else if (!cp_install_parse_signals(named[0] != '\0' ? named : "SEGV", &signals, bad, sizeof bad) ||
               (added[0] != '\0' && !cp_install_parse_signals(added, &add, bad, sizeof bad)) ||
               (removed[0] != '\0' && !cp_install_parse_signals(removed, &remove, bad, sizeof bad))) {
        problem = "names an unknown signal or one that cannot be handled";
    } else {
        if (named[0] == '\0') signals = (CP_DEFAULT_SIGNALS | add) & ~remove;
        if (signals == 0) problem = "leaves no signal";
    }
    if (problem != NULL) {
        cp_install_say("CRASHPORT_SIGNALS=%s %s%s%s%s; using the default signals", text, problem,
                       bad[0] != '\0' ? " (\"" : "", bad, bad[0] != '\0' ? "\")" : "");
        return CP_DEFAULT_SIGNALS;
    }
    return signals;
}

/* Lets the watcher at the other end of the socket ptrace us (Yama's PR_SET_PTRACER), and
 * remembers its pid for forked children. The pid comes from the socket's credentials. */
static void cp_install_allow_watcher(int fd)
{
    struct ucred peer;
    socklen_t peer_length = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) == 0 && peer.pid > 0 &&
        peer.pid != getpid()) {
        cp_state.watcher_pid = peer.pid;
        /* EINVAL: no Yama, nothing to allow. Any other failure leaves the watcher with the
         * record's stack copy, which needs no ptrace. */
        (void)prctl(PR_SET_PTRACER, (unsigned long)peer.pid, 0, 0, 0);
    }
}

/* Opens the spool directory into cp_state.spool_fd: options->spool_path, else CRASHPORT_SPOOL
 * (an empty one: no spool; never in a secure process), else in sidecar mode the directory the
 * sidecar offered (offered, may be NULL: only a trusted sidecar's reply gets here), else
 * /var/spool/crashport when it is a directory this process may write. A
 * directory we may write but not list is opened O_PATH (enough for openat and renameat).
 * Copies the path chosen into chosen and returns true; false (said why, unless there is simply
 * none) when crashes no watcher answers will not be kept. */
static bool cp_install_spool(const crashport_options *options, const char *offered, bool sidecar,
                             char *chosen, size_t size)
{
    const char *path = options->spool_path;
    if (path == NULL) {
        path = cp_settings_getenv("CRASHPORT_SPOOL");
    }
    if (path != NULL && *path == '\0') {
        return false;
    }
    if (path == NULL && sidecar) {
        path = offered;
        struct stat status;
        if (path == NULL && stat(CP_DEFAULT_SPOOL, &status) == 0 && S_ISDIR(status.st_mode) &&
            faccessat(AT_FDCWD, CP_DEFAULT_SPOOL, W_OK | X_OK, AT_EACCESS) == 0) {
            path = CP_DEFAULT_SPOOL;
        }
    }
    if (path == NULL) {
        return false;
    }
    int directory = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0 && errno == EACCES) {
        directory = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (directory < 0) {
        cp_install_say("cannot open the spool directory %s (%s); a crash no watcher answers "
                       "will not be kept",
                       path, strerror(errno));
        return false;
    }
    if (faccessat(directory, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        cp_install_say("the spool directory %s is not writable by this process (%s); a crash no "
                       "watcher answers will not be kept",
                       path, strerror(errno));
        close(directory);
        return false;
    }
    cp_state.spool_fd = directory;
    snprintf(chosen, size, "%s", path);
    return true;
}

/* Sidecar mode: connects to the sidecar (a bounded wait while its backlog is full), trusts it
 * only as root or our own user, lets it ptrace us, says HELLO and reads its HELLO_REPLY, then
 * opens the spool directory and says in one line what a crash will do when something is off.
 * A sidecar that is not there does not stop the install: cp_state.fd stays -1 and the handler
 * connects at the crash. A sidecar that refuses this process is never asked again. */
static void cp_install_sidecar(const crashport_options *options)
{
    char name[sizeof cp_state.sidecar_address.sun_path + 2];
    cp_install_sidecar_name(name, sizeof name);
    char problem[512] = "";
    bool refused = false;
    cp_hello_reply reply;
    memset(&reply, 0, sizeof reply);
    int32_t peer_pid = 0;
    uint32_t peer_uid = 0;
    uint64_t deadline = cp_safe_clock_ns(CLOCK_MONOTONIC) + CP_CONNECT_WAIT_MS * 1000000ull;
    long fd = cp_handler_connect_sidecar(&cp_state, &cp_state.sidecar_address,
                                         cp_state.sidecar_address_length, deadline, &peer_pid, &peer_uid);
    if (fd == CP_CONNECT_UNTRUSTED && cp_state.secure) {
        snprintf(problem, sizeof problem,
                 "the listener at %s runs as uid %u, neither root nor this process's effective "
                 "user (uid %u; it runs with privileges its user does not have): not connecting "
                 "to it",
                 name, peer_uid, cp_state.trusted_uid);
    } else if (fd == CP_CONNECT_UNTRUSTED) {
        snprintf(problem, sizeof problem,
                 "the listener at %s runs as uid %u, neither root nor this process's user: not "
                 "connecting to it",
                 name, peer_uid);
    } else if (fd < 0) {
        snprintf(problem, sizeof problem, "no sidecar at %s (%s)", name, strerror((int)-fd));
    } else {
        cp_state.fd = (int)fd;
        if (peer_pid > 0 && peer_pid != getpid()) {
            cp_state.watcher_pid = peer_pid;
            (void)prctl(PR_SET_PTRACER, (unsigned long)peer_pid, 0, 0, 0);
        }
        const char *why = NULL;
        int error = cp_install_send_hello((int)fd, cp_state.hello);
        if (error != 0) {
            snprintf(problem, sizeof problem, "the sidecar at %s did not take HELLO (%s)", name,
                     strerror(-error));
        } else {
            error = cp_install_read_hello_reply((int)fd, &reply, &why);
            if (error == -ETIMEDOUT) {
                cp_install_say("the sidecar at %s did not answer HELLO within %d ms; keeping the "
                               "connection",
                               name, CP_HELLO_REPLY_WAIT_MS);
                error = 0;
            } else if (error != 0) {
                snprintf(problem, sizeof problem, "the sidecar at %s is not usable: %s", name, why);
            } else if (reply.status == CP_HELLO_REFUSED) {
                refused = true;
            } else {
                cp_app_set_last_run(&reply.last_run);
                if (reply.run_detail.kind != CP_RUN_UNKNOWN) cp_launch_set_detail(&reply.run_detail);
                cp_launch_set_send(&reply.last_send);
            }
        }
        if (error != 0 || refused) {
            close((int)fd);
            cp_state.fd = -1;
            if (cp_state.watcher_pid > 0) {
                cp_state.watcher_pid = 0;
                (void)prctl(PR_SET_PTRACER, 0UL, 0, 0, 0);
            }
        }
        if (refused) {
            cp_state.sidecar_address_length = 0; /* never ask it again */
        }
    }

    bool accepted = cp_state.fd >= 0 && reply.header.magic == CP_MAGIC;
    const char *offered = accepted && reply.spool[0] != '\0' ? reply.spool : NULL;
    char spool[PATH_MAX];
    bool spooling = cp_install_spool(options, offered, true, spool, sizeof spool);
    if (refused) {
        cp_install_say("the sidecar at %s refuses this process: %s; crashes will be %s", name,
                       reply.message, spooling ? "spooled" : "not reported");
    } else if (problem[0] != '\0') {
        if (spooling) {
            cp_install_say("%s; a crash will reconnect, else be spooled to %s", problem, spool);
        } else {
            cp_install_say("%s; a crash will reconnect, else not be reported", problem);
        }
    }
}

/* The bench's timing fd (CRASHPORT_TIMING_FD), when it names an open descriptor. */
static void cp_install_timing_fd(void)
{
    const char *timing = cp_settings_getenv("CRASHPORT_TIMING_FD");
    if (timing == NULL) return;
    unsigned long long parsed = 0;
    if (cp_install_parse(timing, 0, INT_MAX, &parsed) && fcntl((int)parsed, F_GETFD) != -1) {
        cp_state.timing_fd = (int)parsed;
    } else {
        cp_install_say("CRASHPORT_TIMING_FD=%s is not an open fd; timing is off", timing);
    }
}

static int cp_install_locked(const crashport_options *options)
{
    /* 0. Whom this process may trust: decided once, before any setting is read. */
    cp_state.secure = cp_settings_secure() ? 1u : 0u;
    cp_state.trusted_uid = (uint32_t)geteuid();

    /* 1. The socket (the launcher's, else the sidecar's address), the timeout and the signal
     * sets, checked before anything is changed. */
    int fd = cp_install_socket(options);
    bool sidecar = false;
    if (fd == -ENOENT) {
        int error = cp_install_sidecar_address(options);
        if (error == -ENOENT && cp_state.secure) {
            cp_install_say("this process runs with privileges its user does not have (setuid, "
                           "setgid or file capabilities): CRASHPORT_* settings from the "
                           "environment are ignored, and the program names no socket; crash "
                           "reporting is off");
            return -EINVAL;
        }
        if (error == -ENOENT) {
            cp_install_say("neither CRASHPORT_FD nor CRASHPORT_SOCKET is set; crash reporting is "
                           "off");
            return -EINVAL;
        }
        if (error != 0) {
            cp_install_forget();
            return error;
        }
        sidecar = true;
    } else if (fd < 0) {
        return fd;
    }
    uint32_t timeout_ms = cp_install_timeout(options);
    /* SIGKILL and SIGSTOP cannot be caught; bit 0 is no signal. */
    uint64_t signals = cp_install_signals(options);
    if (signals & (CP_BIT(0) | CP_BIT(SIGKILL) | CP_BIT(SIGSTOP))) {
        cp_install_say("signal set 0x%llx has bit 0, SIGKILL or SIGSTOP, which cannot be "
                       "handled; crash reporting is off",
                       (unsigned long long)signals);
        cp_install_forget();
        return -EINVAL;
    }
    uint64_t forward_first = cp_install_forward_first(options);

    /* 2. Everything the handler needs, allocated now: the record, the HELLO, the spool's
     * scratch buffer. */
    cp_crash_area *area = mmap(NULL, sizeof(cp_crash_area), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        int error = errno;
        cp_install_say("cannot map the crash record (%s); crash reporting is off",
                       strerror(error));
        cp_install_forget();
        return -error;
    }
    cp_state.record = &area->record;
    cp_state.error_record = &area->error_record;
    cp_state.hello = &area->hello;
    cp_state.scratch = area->scratch;
    cp_install_build_hello(cp_state.hello);
    cp_state.timeout_ms = timeout_ms;
    cp_state.forward_first = forward_first & signals;
    if (sidecar) {
        /* Connected (or not), HELLO answered, spool opened: all before a handler is live. */
        cp_install_sidecar(options);
    } else {
        char spool[PATH_MAX];
        cp_state.fd = fd;
        cp_install_allow_watcher(fd);
        (void)cp_install_spool(options, NULL, false, spool, sizeof spool);
    }
    cp_install_timing_fd();

    /* 3. The handlers (the previous action of each saved first). */
    int failed_signo = 0;
    int error = cp_install_handlers(signals, &failed_signo);
    if (error != 0) {
        cp_install_say("cannot handle signal %d (%s); crash reporting is off", failed_signo,
                       strerror(-error));
        cp_install_forget();
        return error;
    }

    /* 4. The installing thread's alternate stack: after the handlers, so that a failed
     * install leaves nothing behind. Not fatal: only a stack overflow goes unreported. */
    int altstack_error = cp_install_altstack();
    if (altstack_error != 0) {
        cp_install_say("cannot set up an alternate signal stack (%s); a stack overflow on this "
                       "thread will not be reported",
                       strerror(-altstack_error));
    }

    /* 5. Every thread created from now on gets its own alternate stack (threads.c), and a
     * forked child allows the watcher again (in sidecar mode, whichever the handler may
     * connect to later). */
    if (!cp_thread_key_ready && pthread_key_create(&cp_thread_key, cp_thread_release) == 0) {
        __atomic_store_n(&cp_thread_key_ready, 1, __ATOMIC_RELEASE);
    }
    static bool atfork_registered;
    if (!atfork_registered && (cp_state.watcher_pid > 0 || sidecar)) {
        atfork_registered = pthread_atfork(NULL, NULL, cp_install_after_fork_in_child) == 0;
    }

    /* The last run in full (launch.c), then the app area: the last run, the launch window and
     * the runtimes' abort messages, for the report's reason (app.c). The detail is in place
     * before app.c says crashport is installed, as the program's launch calls expect. */
    cp_launch_install();
    cp_app_install();

    /* 6. GOODBYE at a normal exit (_exit and _Exit are interposed in the .so). Not fatal: the
     * watcher then learns the exit from the kernel. */
    static bool on_exit_registered;
    if (!on_exit_registered) {
        on_exit_registered = on_exit(cp_install_on_exit, NULL) == 0;
    }

    /* 7. HELLO to the launcher (a sidecar had it in step 2, as it answers). */
    /* Not fatal: a crash is still reported if the watcher can read it then. */
    int hello_error = sidecar ? 0 : cp_install_send_hello(fd, cp_state.hello);
    if (hello_error != 0) {
        cp_install_say("could not send HELLO to the watcher (%s); installing anyway",
                       strerror(-hello_error));
    }
    return 0;
}

int crashport_install(const crashport_options *options)
{
    const crashport_options defaults = CRASHPORT_OPTIONS_DEFAULT;
    if (options == NULL) {
        options = &defaults;
    }
    pthread_mutex_lock(&cp_install_lock);
    int result = 0;
    if (!cp_installed) {
        result = cp_install_locked(options);
        cp_installed = result == 0;
    }
    pthread_mutex_unlock(&cp_install_lock);
    return result;
}

/* dl_iterate_phdr callback: 1 when the object carries a stub compiled in: the mark (type 1)
 * without interpose.c's (type 2), which only a libcrashport.so has (ours included). Two
 * libcrashport.so copies (a program linked with one, preloaded with another) both install, as
 * before: neither may stand down for the other. */
static int cp_install_find_other_mark(struct dl_phdr_info *object, size_t size, void *unused)
{
    (void)size;
    (void)unused;
    bool marked = false, interposing = false;
    for (int i = 0; i < object->dlpi_phnum; i++) {
        const ElfW(Phdr) *header = &object->dlpi_phdr[i];
        if (header->p_type != PT_NOTE) continue;
        size_t align = header->p_align == 8 ? 8 : 4;
        const char *cursor = (const char *)(object->dlpi_addr + header->p_vaddr);
        const char *end = cursor + header->p_memsz;
        while ((size_t)(end - cursor) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)cursor;
            size_t name_end = (sizeof *note + note->n_namesz + align - 1) & ~(align - 1);
            size_t total = (name_end + note->n_descsz + align - 1) & ~(align - 1);
            if (total > (size_t)(end - cursor)) break;
            if (note->n_namesz == 10 && memcmp(cursor + sizeof *note, "crashport", 10) == 0) {
                marked = marked || note->n_type == CP_MARK_STUB;
                interposing = interposing || note->n_type == CP_MARK_INTERPOSER;
            }
            cursor += total;
        }
    }
    return marked && !interposing ? 1 : 0;
}

/* True in libcrashport.so (the copy with the interposer) when another loaded object carries a
 * stub of its own: a program with crashport compiled in, given libcrashport.so as well
 * (`crashport run` preloads it). That copy stands down, or two stubs would be installed and the
 * program's API calls would write the annotations of the one that does not report. */
static bool cp_install_other_copy(void)
{
    return cp_interposing && dl_iterate_phdr(cp_install_find_other_mark, NULL) != 0;
}

/* LD_PRELOAD path (and any program linked with libcrashport): install when a launcher handed
 * us a socket (CRASHPORT_FD) or a sidecar's path is set (CRASHPORT_SOCKET), unless the program
 * asked to choose the moment itself (CRASHPORT_INSTALL=manual: it calls crashport_install()
 * once its own handlers, or its runtime's, are in place, so they sit below crashport in the
 * chain). */
__attribute__((constructor)) static void cp_install_from_environment(void)
{
    if (cp_settings_secure()) {
        /* Its user's environment is not its own: only the program may install crashport, with
         * its own options. Said once, when the user tried (getenv only to see that). */
        if (getenv("CRASHPORT_FD") != NULL || getenv("CRASHPORT_SOCKET") != NULL) {
            cp_install_say("this process runs with privileges its user does not have (setuid, "
                           "setgid or file capabilities): CRASHPORT_* settings from the "
                           "environment are ignored");
        }
        return;
    }
    const char *mode = cp_settings_getenv("CRASHPORT_INSTALL");
    if (mode != NULL && strcmp(mode, "manual") == 0) {
        return;
    }
    if (cp_install_other_copy()) {
        return; /* the program's own copy installs (its constructor, or the program's call) */
    }
    if (cp_settings_getenv("CRASHPORT_FD") != NULL || cp_settings_getenv("CRASHPORT_SOCKET") != NULL) {
        (void)crashport_install(NULL);
    }
}
