/*
 * app.c: what the program tells crashport about itself, and what crashport tells it: annotations,
 * breadcrumbs and files to attach, handled errors, the runtimes' abort messages, the last run
 * and the launch window, enabling and disabling (crashport.h documents each call). The program's
 * words live in cp_app (the cp_app_area of crashport_protocol.h, static memory defined in
 * report.c), which the watcher reads out of the crashed process; nothing is shared with the
 * crash path but that memory, so a crash in the middle of any of these calls still gets
 * reported (the slot being written is skipped). Nothing here allocates, except the
 * std::terminate handler, which runs in the program's own terminate path (demangling the type).
 *
 * Not signal context: these are the program's own calls, on any thread. Annotations and
 * attachments take a spin flag among themselves (never held across a system call, never taken
 * by the crash path) so that a key has one slot; breadcrumbs take none; handled errors go one at
 * a time under an error-checking mutex.
 *
 * Off the crash path the stub's files call one way (off_path.h): install.c → launch.c → attach.c
 * → app.c → settings.c. This file calls only settings.c (for CRASHPORT_*); install.c and launch.c call
 * into it, and it calls neither back (tools/build-stub checks it on the built objects): the
 * last run in full is launch.c's, which install.c sets up before calling cp_app_install.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "crashport.h"
#include "off_path.h"
#include "report.h"
#include "stub_state.h"

/* Spins before a contended writer starts yielding, and how long it yields before it gives up
 * (-EBUSY: the holder was stopped, or starved it that long). */
#define CP_APP_SPINS 1024u
#define CP_APP_WAIT_NS 1000000000ull

static cp_error_stack cp_error_stack_block; /* a handled error's own stack: below */

/* Marks the area in use: the watcher ignores an area without its magic. Idempotent, so that a
 * call from another library's constructor, before crashport's own, works too. */
static void cp_app_ready(void)
{
    if (__atomic_load_n(&cp_app.magic, __ATOMIC_ACQUIRE) == CP_APP_MAGIC) return;
    __atomic_store_n(&cp_app.version, CP_APP_VERSION, __ATOMIC_RELAXED);
    __atomic_store_n(&cp_app.size, (uint32_t)sizeof cp_app, __ATOMIC_RELAXED);
    __atomic_store_n(&cp_app.error_stack, (uint64_t)(uintptr_t)&cp_error_stack_block, __ATOMIC_RELAXED);
    __atomic_store_n(&cp_app.magic, CP_APP_MAGIC, __ATOMIC_RELEASE);
}

static void cp_app_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Takes the writers' flag. -EDEADLK when this very thread holds it (a signal handler that
 * interrupted the thread's own annotate), -EBUSY when another writer kept it past every
 * retry (it was stopped, or crashed, holding it). */
static int cp_app_lock(void)
{
    uint64_t self = (uint64_t)pthread_self();
    uint64_t give_up = 0;
    for (uint32_t attempt = 0;; attempt++) {
        uint32_t expected = 0;
        if (__atomic_compare_exchange_n(&cp_app.writer, &expected, 1u, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&cp_app.writer_thread, self, __ATOMIC_RELAXED);
            return 0;
        }
        if (__atomic_load_n(&cp_app.writer_thread, __ATOMIC_RELAXED) == self) return -EDEADLK;
        if (attempt < CP_APP_SPINS) {
            cp_app_relax();
            continue;
        }
        struct timespec now = {0, 0};
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
        if (give_up == 0) give_up = now_ns + CP_APP_WAIT_NS;
        if (now_ns >= give_up) return -EBUSY;
        sched_yield();
    }
}

static void cp_app_unlock(void)
{
    __atomic_store_n(&cp_app.writer_thread, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cp_app.writer, 0u, __ATOMIC_RELEASE);
}

/* Copies text into a slot of `capacity` bytes, NUL included, cutting a longer text at a UTF-8
 * character boundary. Returns whether it was cut. */
static bool cp_app_copy(char *slot, size_t capacity, const char *text)
{
    size_t length = strnlen(text, capacity);
    bool cut = length == capacity;
    if (cut) {
        length = capacity - 1;
        /* Back off over continuation bytes (10xxxxxx) to the start of a character, and drop it. */
        while (length > 0 && ((unsigned char)text[length] & 0xC0u) == 0x80u) length--;
    }
    memcpy(slot, text, length);
    slot[length] = '\0';
    return cut;
}

/* A slot's sequence goes odd while it is written, even again once it is consistent. */
static void cp_app_begin(uint32_t *sequence)
{
    __atomic_fetch_add(sequence, 1u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void cp_app_end(uint32_t *sequence)
{
    __atomic_fetch_add(sequence, 1u, __ATOMIC_RELEASE);
}

/* The annotation slot holding `key` as stored (already cut to the slot), or NULL. */
static cp_annotation *cp_app_find(const char *key)
{
    for (uint32_t index = 0; index < CP_ANNOTATION_MAX; index++) {
        cp_annotation *slot = &cp_app.annotations[index];
        if ((slot->flags & CP_SLOT_USED) && strncmp(slot->key, key, sizeof slot->key) == 0) return slot;
    }
    return NULL;
}

__attribute__((visibility("default"))) int crashport_annotate(const char *key, const char *value)
{
    if (key == NULL || key[0] == '\0') return -EINVAL;
    cp_app_ready();
    char stored[CP_ANNOTATION_KEY_BYTES];
    bool key_cut = cp_app_copy(stored, sizeof stored, key);
    int locked = cp_app_lock();
    if (locked != 0) return locked;
    cp_annotation *slot = cp_app_find(stored);
    int result = 0;
    if (value == NULL) {
        if (slot != NULL) {
            cp_app_begin(&slot->sequence);
            slot->flags = 0;
            cp_app_end(&slot->sequence);
        }
    } else {
        for (uint32_t index = 0; slot == NULL && index < CP_ANNOTATION_MAX; index++) {
            if (!(cp_app.annotations[index].flags & CP_SLOT_USED)) slot = &cp_app.annotations[index];
        }
        if (slot == NULL) {
            result = -ENOSPC;
        } else {
            uint32_t used = (uint32_t)(slot - cp_app.annotations) + 1;
            if (used > cp_app.annotations_used) __atomic_store_n(&cp_app.annotations_used, used, __ATOMIC_RELEASE);
            cp_app_begin(&slot->sequence);
            memcpy(slot->key, stored, sizeof stored);
            bool value_cut = cp_app_copy(slot->value, sizeof slot->value, value);
            slot->flags = CP_SLOT_USED | (key_cut || value_cut ? CP_SLOT_TRUNCATED : 0u);
            cp_app_end(&slot->sequence);
            result = key_cut || value_cut ? CRASHPORT_TRUNCATED : 0;
        }
    }
    cp_app_unlock();
    return result;
}

__attribute__((visibility("default"))) int crashport_annotation(const char *key, char *value, size_t size)
{
    if (key == NULL || key[0] == '\0' || (value == NULL && size != 0)) return -EINVAL;
    char stored[CP_ANNOTATION_KEY_BYTES];
    (void)cp_app_copy(stored, sizeof stored, key);
    int locked = cp_app_lock();
    if (locked != 0) return locked;
    const cp_annotation *slot = cp_app_find(stored);
    int result = -ENOENT;
    if (slot != NULL) {
        size_t length = strnlen(slot->value, sizeof slot->value);
        if (size > 0) {
            size_t copied = length < size - 1 ? length : size - 1;
            memcpy(value, slot->value, copied);
            value[copied] = '\0';
        }
        result = (int)length;
    }
    cp_app_unlock();
    return result;
}

__attribute__((visibility("default"))) void crashport_breadcrumb(const char *category, const char *message)
{
    cp_app_ready();
    uint64_t number = __atomic_fetch_add(&cp_app.breadcrumb_count, 1u, __ATOMIC_RELAXED);
    cp_breadcrumb *slot = &cp_app.breadcrumbs[number % CP_BREADCRUMB_MAX];
    __atomic_store_n(&slot->sequence, 2 * number + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    struct timespec now = {0, 0};
    clock_gettime(CLOCK_REALTIME, &now); /* the vDSO: no system call on x86_64 and aarch64 */
    slot->time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    bool cut = cp_app_copy(slot->category, sizeof slot->category, category != NULL ? category : "");
    cut |= cp_app_copy(slot->message, sizeof slot->message, message != NULL ? message : "");
    slot->flags = cut ? CP_SLOT_TRUNCATED : 0u;
    __atomic_store_n(&slot->sequence, 2 * number + 2, __ATOMIC_RELEASE);
}

/* The attachment slot holding `path`, or NULL. */
static cp_attachment *cp_app_find_attachment(const char *path)
{
    for (uint32_t index = 0; index < CP_ATTACHMENT_MAX; index++) {
        cp_attachment *slot = &cp_app.attachments[index];
        if ((slot->flags & CP_SLOT_USED) && strncmp(slot->path, path, sizeof slot->path) == 0) return slot;
    }
    return NULL;
}

/* `path` made absolute (the watcher opens it from another process, maybe after this one's
 * working directory changed) into `absolute`. Returns 0 or -errno. */
static int cp_app_absolute(const char *path, char absolute[CP_ATTACHMENT_PATH_BYTES])
{
    size_t length = strnlen(path, CP_ATTACHMENT_PATH_BYTES);
    if (path[0] == '/') {
        if (length == CP_ATTACHMENT_PATH_BYTES) return -ENAMETOOLONG;
        memcpy(absolute, path, length + 1);
        return 0;
    }
    if (getcwd(absolute, CP_ATTACHMENT_PATH_BYTES) == NULL) return -errno;
    size_t base = strlen(absolute);
    if (base + 1 + length + 1 > CP_ATTACHMENT_PATH_BYTES) return -ENAMETOOLONG;
    if (base > 1) absolute[base++] = '/';
    memcpy(absolute + base, path, length + 1);
    return 0;
}

__attribute__((visibility("default"))) int crashport_attach_file(const char *path)
{
    if (path == NULL || path[0] == '\0') return -EINVAL;
    cp_app_ready();
    char absolute[CP_ATTACHMENT_PATH_BYTES];
    int made = cp_app_absolute(path, absolute);
    if (made != 0) return made;
    int locked = cp_app_lock();
    if (locked != 0) return locked;
    int result = 0;
    if (cp_app_find_attachment(absolute) == NULL) {
        cp_attachment *slot = NULL;
        for (uint32_t index = 0; slot == NULL && index < CP_ATTACHMENT_MAX; index++) {
            if (!(cp_app.attachments[index].flags & CP_SLOT_USED)) slot = &cp_app.attachments[index];
        }
        if (slot == NULL) {
            result = -ENOSPC;
        } else {
            uint32_t used = (uint32_t)(slot - cp_app.attachments) + 1;
            if (used > cp_app.attachments_used) __atomic_store_n(&cp_app.attachments_used, used, __ATOMIC_RELEASE);
            cp_app_begin(&slot->sequence);
            memcpy(slot->path, absolute, strlen(absolute) + 1);
            slot->flags = CP_SLOT_USED;
            cp_app_end(&slot->sequence);
        }
    }
    cp_app_unlock();
    return result;
}

/*
 * Why a runtime aborted. glibc and the Swift runtime keep their last words where the watcher can
 * read them: their addresses go into the area. For C++, libstdc++'s std::terminate handler is
 * replaced by one that writes the uncaught exception's type and what() into the area, then
 * calls the handler it replaced (which prints "terminate called after throwing..." and aborts,
 * as before). Everything is looked up with dlsym, so a C program never loads libstdc++ for it;
 * a runtime loaded after install (dlopen) is not seen. A handler the program sets after install
 * does not displace crashport's: libcrashport.so interposes std::set_terminate and
 * std::get_terminate (interpose.c), which keep the program's handler as the next in the chain
 * (cp_app_chain_terminate), as sigaction keeps a signal's.
 */
static cp_terminate_handler (*cp_set_terminate)(cp_terminate_handler);
/* The program's own handler, which crashport's calls next: the one libstdc++ had at install,
 * then whatever the program sets after it through the interposed std::set_terminate (atomic:
 * any thread may set one while another terminates). */
static cp_terminate_handler cp_previous_terminate;
/* True once crashport's handler holds libstdc++'s slot: from then on std::set_terminate and
 * std::get_terminate, interposed, work on cp_previous_terminate. */
static bool cp_terminate_chained;
/* libstdc++'s default (__gnu_cxx::__verbose_terminate_handler): what std::set_terminate(nullptr)
 * installs since GCC 11, so what it stands for here too. NULL when not exported. */
static cp_terminate_handler cp_default_terminate;
static const void *(*cp_current_exception_type)(void);
/* std::current_exception() and ~exception_ptr(): a std::exception_ptr is one pointer, to the
 * thrown object, and (not trivially copyable) is returned through a hidden pointer, which is
 * the first argument when called from C. */
static void (*cp_current_exception)(void **object);
static void (*cp_release_exception)(void **object);
static char *(*cp_cxa_demangle)(const char *, char *, size_t *, int *);
static const void *cp_std_exception_type; /* typeinfo for std::exception */

/* The Itanium C++ ABI as libstdc++ lays it out: a type_info is {vtable, const char *name}, and
 * its vtable holds ~type_info (2), __is_pointer_p, __is_function_p, then __do_catch, which says
 * whether a handler of this type catches an object of another (adjusting the pointer). An
 * exception's vtable holds ~exception (2), then what(). */
typedef bool (*cp_do_catch)(const void *self, const void *thrown, void **object, unsigned outer);
typedef const char *(*cp_what)(const void *self);
#define CP_TYPE_INFO_DO_CATCH_SLOT 4
#define CP_EXCEPTION_WHAT_SLOT 2

static void cp_app_terminate(void)
{
    const void *type = cp_current_exception_type != NULL ? cp_current_exception_type() : NULL;
    if (type != NULL) {
        cp_app_begin(&cp_app.exception_sequence);
        const char *name = ((const char *const *)type)[1];
        if (name != NULL && name[0] == '*') name++; /* libstdc++ marks types local to a unit */
        int status = -1;
        char *readable = name != NULL && cp_cxa_demangle != NULL ? cp_cxa_demangle(name, NULL, NULL, &status) : NULL;
        bool cut = cp_app_copy(cp_app.exception_type, sizeof cp_app.exception_type,
                               readable != NULL ? readable : (name != NULL ? name : "?"));
        free(readable);
        cp_app.exception_message[0] = '\0';
        void *object = NULL;
        if (cp_current_exception != NULL && cp_release_exception != NULL) cp_current_exception(&object);
        if (object != NULL && cp_std_exception_type != NULL) {
            void *adjusted = object;
            cp_do_catch catches = (*(cp_do_catch *const *)cp_std_exception_type)[CP_TYPE_INFO_DO_CATCH_SLOT];
            if (catches(cp_std_exception_type, type, &adjusted, 1)) {
                cp_what what = (*(cp_what *const *)adjusted)[CP_EXCEPTION_WHAT_SLOT];
                const char *text = what(adjusted);
                cut |= cp_app_copy(cp_app.exception_message, sizeof cp_app.exception_message,
                                   text != NULL ? text : "");
            }
        }
        if (object != NULL) cp_release_exception(&object);
        cp_app.exception_flags = CP_SLOT_USED | (cut ? CP_SLOT_TRUNCATED : 0u);
        cp_app_end(&cp_app.exception_sequence);
    }
    cp_terminate_handler next = __atomic_load_n(&cp_previous_terminate, __ATOMIC_ACQUIRE);
    if (next != NULL) next();
    abort();
}

CP_HIDDEN bool cp_app_chain_terminate(cp_terminate_handler handler, cp_terminate_handler *previous)
{
    if (!__atomic_load_n(&cp_terminate_chained, __ATOMIC_ACQUIRE)) return false;
    if (handler == NULL) handler = cp_default_terminate;
    *previous = __atomic_exchange_n(&cp_previous_terminate, handler, __ATOMIC_ACQ_REL);
    return true;
}

CP_HIDDEN bool cp_app_chained_terminate(cp_terminate_handler *current)
{
    if (!__atomic_load_n(&cp_terminate_chained, __ATOMIC_ACQUIRE)) return false;
    *current = __atomic_load_n(&cp_previous_terminate, __ATOMIC_ACQUIRE);
    return true;
}

/*
 * Handled errors. One report at a time per process (an error-checking mutex: a signal handler
 * that interrupted this thread's own report gets -EDEADLK instead of a deadlock), and at most
 * CP_ERROR_BURST in a row, then one per CP_ERROR_REFILL_NS (a token bucket), so a loop cannot
 * keep the watcher capturing this process.
 */
#define CP_ERROR_BURST 10u
#define CP_ERROR_REFILL_NS (6ull * 1000000000ull)

static pthread_mutex_t cp_error_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static uint32_t cp_error_tokens = CP_ERROR_BURST;
static uint64_t cp_error_refilled_ns;

static uint64_t cp_app_monotonic_ns(void)
{
    struct timespec now = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Takes a token (under cp_error_lock). */
static bool cp_app_error_allowed(void)
{
    uint64_t now = cp_app_monotonic_ns();
    if (cp_error_refilled_ns == 0) cp_error_refilled_ns = now;
    uint64_t earned = (now - cp_error_refilled_ns) / CP_ERROR_REFILL_NS;
    if (earned > 0) {
        cp_error_tokens = earned >= CP_ERROR_BURST || cp_error_tokens + earned >= CP_ERROR_BURST
                              ? CP_ERROR_BURST
                              : cp_error_tokens + (uint32_t)earned;
        cp_error_refilled_ns += earned * CP_ERROR_REFILL_NS;
    }
    if (cp_error_tokens == 0) return false;
    cp_error_tokens--;
    return true;
}

/* Before an error report: connected, enabled, this thread's turn (cp_error_lock, held on 0 and
 * let go by the caller) and within the rate limit. Returns 0, or -errno with the lock not held. */
static int cp_app_error_begin(void)
{
    if (cp_state.error_record == NULL || cp_state.fd < 0) return -ENOTCONN;
    if (__atomic_load_n(&cp_state.disabled, __ATOMIC_RELAXED) != 0) return -ECANCELED;
    int locked = pthread_mutex_lock(&cp_error_lock);
    if (locked != 0) return -locked;
    if (!cp_app_error_allowed()) {
        pthread_mutex_unlock(&cp_error_lock);
        return -EAGAIN;
    }
    return 0;
}

/* Stores the error's type and message (under cp_error_lock); whether either was cut. */
static bool cp_app_set_error(const char *type, const char *message)
{
    cp_app_begin(&cp_app.error_sequence);
    bool cut = cp_app_copy(cp_app.error_type, sizeof cp_app.error_type, type != NULL && type[0] != '\0' ? type : "error");
    cut |= cp_app_copy(cp_app.error_message, sizeof cp_app.error_message, message != NULL ? message : "");
    cp_app.error_flags = CP_SLOT_USED | (cut ? CP_SLOT_TRUNCATED : 0u);
    cp_app_end(&cp_app.error_sequence);
    return cut;
}

/* Sends the ERROR record with this thread's registers as they are where it is written: a macro
 * (getcontext returns twice, so a function holding it cannot be inlined), so that the report's
 * frames start in the public function that reports (under cp_error_lock). */
#define CP_APP_SEND_ERROR(result, tid)                                                                                 \
    do {                                                                                                               \
        ucontext_t here;                                                                                               \
        getcontext(&here);                                                                                             \
        cp_fault caller;                                                                                               \
        cp_fault_copy(&caller, 0, NULL, &here);                                                                        \
        (result) = (int)cp_report_error(&cp_state, &caller, (tid));                                                    \
    } while (0)

__attribute__((visibility("default"), noinline)) int crashport_report_error(const char *type, const char *message)
{
    int result = cp_app_error_begin();
    if (result == 0) {
        (void)cp_app_set_error(type, message);
        CP_APP_SEND_ERROR(result, (uint32_t)syscall(SYS_gettid));
        pthread_mutex_unlock(&cp_error_lock);
    }
    return result;
}

/*
 * A handled error's own properties and files (crashport_report_error_with): written into
 * cp_app.error_details under cp_error_lock, so they belong to the one ERROR record sent while it
 * is held (the block names its thread), and cleared before the lock is let go, so that no other
 * report ever carries them. Paths are made absolute as crashport_attach_file makes them.
 */
_Static_assert(CP_ERROR_PATH_BYTES == CP_ATTACHMENT_PATH_BYTES, "cp_app_absolute fills an error file's path");

/* Fills the block for thread `tid` (under cp_error_lock). Returns whether anything was cut or
 * left out. */
static bool cp_app_set_error_details(uint32_t tid, const crashport_property *properties, size_t property_count,
                                     const char *const *files, size_t file_count)
{
    cp_error_details *details = &cp_app.error_details;
    cp_app_begin(&details->sequence);
    bool cut = false;
    uint32_t used = 0, properties_left_out = 0;
    for (size_t index = 0; index < property_count; index++) {
        char key[CP_ERROR_KEY_BYTES];
        bool key_cut = cp_app_copy(key, sizeof key, properties[index].key);
        cp_error_property *slot = NULL;
        for (uint32_t seen = 0; slot == NULL && seen < used; seen++) {
            if (strncmp(details->properties[seen].key, key, sizeof key) == 0) slot = &details->properties[seen];
        }
        if (slot == NULL) {
            if (used == CP_ERROR_PROPERTY_MAX) {
                properties_left_out++;
                continue;
            }
            slot = &details->properties[used++];
        }
        memcpy(slot->key, key, sizeof key);
        const char *value = properties[index].value;
        bool value_cut = cp_app_copy(slot->value, sizeof slot->value, value != NULL ? value : "");
        slot->flags = CP_SLOT_USED | (key_cut || value_cut ? CP_SLOT_TRUNCATED : 0u);
        cut |= key_cut || value_cut;
    }
    uint32_t files_used = 0, files_left_out = 0;
    for (size_t index = 0; index < file_count; index++) {
        if (files_used == CP_ERROR_FILE_MAX) {
            files_left_out++;
            continue;
        }
        cp_error_file *slot = &details->files[files_used];
        if (cp_app_absolute(files[index], slot->path) != 0) {
            files_left_out++;
            continue;
        }
        bool again = false;
        for (uint32_t seen = 0; !again && seen < files_used; seen++) {
            again = strncmp(details->files[seen].path, slot->path, sizeof slot->path) == 0;
        }
        if (again) continue;
        slot->flags = CP_SLOT_USED;
        files_used++;
    }
    details->tid = tid;
    details->property_count = used;
    details->file_count = files_used;
    details->properties_left_out = properties_left_out;
    details->files_left_out = files_left_out;
    details->flags = CP_SLOT_USED;
    cp_app_end(&details->sequence);
    return cut || properties_left_out > 0 || files_left_out > 0;
}

/* Empties the block (under cp_error_lock), once its report was made or given up. */
static void cp_app_clear_error_details(void)
{
    cp_error_details *details = &cp_app.error_details;
    cp_app_begin(&details->sequence);
    details->flags = 0;
    details->tid = 0;
    details->property_count = 0;
    details->file_count = 0;
    details->properties_left_out = 0;
    details->files_left_out = 0;
    cp_app_end(&details->sequence);
}

/*
 * A handled error's own stack (crashport_report_error_stack): written into cp_error_stack_block
 * under cp_error_lock, as the details are, and cleared before the lock is let go. Bounded: the
 * first CP_ERROR_FRAME_MAX frames are kept and the rest only counted, so a stack of a million
 * frames costs one pass to count, no more.
 */
/* Fills the stack for thread `tid` (under cp_error_lock). Returns whether anything was cut or
 * left out. */
static bool cp_app_set_error_stack(uint32_t tid, const crashport_frame *frames, size_t frame_count)
{
    cp_error_stack *stack = &cp_error_stack_block;
    cp_app_begin(&stack->sequence);
    uint32_t count = frame_count < CP_ERROR_FRAME_MAX ? (uint32_t)frame_count : CP_ERROR_FRAME_MAX;
    bool cut = false;
    for (uint32_t index = 0; index < count; index++) {
        const crashport_frame *given = &frames[index];
        cp_error_frame *slot = &stack->frames[index];
        slot->address = (uint64_t)given->address;
        slot->line = given->line;
        bool frame_cut = cp_app_copy(slot->function, sizeof slot->function, given->function != NULL ? given->function : "");
        frame_cut |= cp_app_copy(slot->file, sizeof slot->file, given->file != NULL ? given->file : "");
        slot->flags = CP_SLOT_USED | (frame_cut ? CP_SLOT_TRUNCATED : 0u);
        cut |= frame_cut;
    }
    stack->tid = tid;
    stack->count = count;
    stack->left_out = (uint64_t)(frame_count - count);
    stack->flags = CP_SLOT_USED;
    cp_app_end(&stack->sequence);
    return cut || frame_count > count;
}

static void cp_app_clear_error_stack(void)
{
    cp_error_stack *stack = &cp_error_stack_block;
    cp_app_begin(&stack->sequence);
    stack->flags = 0;
    stack->tid = 0;
    stack->count = 0;
    stack->left_out = 0;
    cp_app_end(&stack->sequence);
}

/* The arguments of crashport_report_error_with and _stack: 0 or -EINVAL. */
static int cp_app_error_arguments(const crashport_property *properties, size_t property_count, const char *const *files,
                                  size_t file_count, const crashport_frame *frames, size_t frame_count)
{
    if ((properties == NULL && property_count > 0) || (files == NULL && file_count > 0) ||
        (frames == NULL && frame_count > 0)) {
        return -EINVAL;
    }
    for (size_t index = 0; index < property_count; index++) {
        if (properties[index].key == NULL || properties[index].key[0] == '\0') return -EINVAL;
    }
    for (size_t index = 0; index < file_count; index++) {
        if (files[index] == NULL || files[index][0] == '\0') return -EINVAL;
    }
    return 0;
}

/* Everything before the ERROR record is sent: arguments, this thread's turn, the blocks.
 * Returns 0 with cp_error_lock held (`*cut`: something was cut or left out), or -errno. */
static int cp_app_error_open(uint32_t *tid, bool *cut, const char *type, const char *message,
                             const crashport_property *properties, size_t property_count, const char *const *files,
                             size_t file_count, const crashport_frame *frames, size_t frame_count)
{
    int result = cp_app_error_arguments(properties, property_count, files, file_count, frames, frame_count);
    if (result == 0) result = cp_app_error_begin();
    if (result != 0) return result;
    *tid = (uint32_t)syscall(SYS_gettid);
    *cut = cp_app_set_error_details(*tid, properties, property_count, files, file_count);
    if (frames != NULL && frame_count > 0) *cut |= cp_app_set_error_stack(*tid, frames, frame_count);
    *cut |= cp_app_set_error(type, message);
    return 0;
}

/* Everything after: the blocks emptied, the lock let go. Returns the call's answer. */
static int cp_app_error_close(int result, bool cut)
{
    cp_app_clear_error_details();
    cp_app_clear_error_stack();
    pthread_mutex_unlock(&cp_error_lock);
    return result == 0 && cut ? CRASHPORT_TRUNCATED : result;
}

__attribute__((visibility("default"), noinline)) int crashport_report_error_with(const char *type, const char *message,
                                                                                 const crashport_property *properties,
                                                                                 size_t property_count,
                                                                                 const char *const *files,
                                                                                 size_t file_count)
{
    uint32_t tid = 0;
    bool cut = false;
    int result = cp_app_error_open(&tid, &cut, type, message, properties, property_count, files, file_count, NULL, 0);
    if (result != 0) return result;
    CP_APP_SEND_ERROR(result, tid);
    return cp_app_error_close(result, cut);
}

__attribute__((visibility("default"), noinline)) int crashport_report_error_stack(
    const char *type, const char *message, const crashport_property *properties, size_t property_count,
    const char *const *files, size_t file_count, const crashport_frame *frames, size_t frame_count)
{
    uint32_t tid = 0;
    bool cut = false;
    int result = cp_app_error_open(&tid, &cut, type, message, properties, property_count, files, file_count, frames,
                                   frame_count);
    if (result != 0) return result;
    CP_APP_SEND_ERROR(result, tid);
    return cp_app_error_close(result, cut);
}

/*
 * The test crash (App Center's generateTestCrash). The crash is real, so that the whole path
 * runs as for any crash: crashport's handler, the watcher's capture, the report, the upload.
 * Only the thread's id, stored before the fault, tells the crash path (report.c) to mark the
 * record CP_CRASH_TEST. The address written is read from a volatile, so that the compiler
 * cannot see it is null and put a trap (SIGILL) in place of the store.
 */
static volatile uintptr_t cp_test_crash_address;

__attribute__((visibility("default"), noinline, noreturn)) void crashport_test_crash(void)
{
    crashport_breadcrumb("crashport", "crashport_test_crash()");
    __atomic_store_n(&cp_state.test_crash_tid, (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    *(volatile uint32_t *)cp_test_crash_address = 0x7e57u;
    /* A handler of the program's that skipped the faulting store: end anyway. */
    __builtin_trap();
}

/*
 * The last run and the launch window. The watcher keeps each program's runs (by executable path
 * and build-id) and hands the previous one down at install: a launcher in CRASHPORT_LAST_RUN, a
 * sidecar in its HELLO_REPLY. Known before main, so a program can pick a safe mode at once.
 */
static cp_last_run cp_previous_run;
static bool cp_previous_run_given;
static bool cp_app_installed;

CP_HIDDEN void cp_app_set_last_run(const cp_last_run *run)
{
    cp_previous_run = *run;
    cp_previous_run.report_id[sizeof cp_previous_run.report_id - 1] = '\0';
    cp_previous_run_given = true;
    if (run->disabled) __atomic_store_n(&cp_state.disabled, 1u, __ATOMIC_RELAXED);
}

/* CRASHPORT_LAST_RUN="known crashed during_launch consecutive disabled ID [pending]" (ID "-":
 * none). */
static void cp_app_last_run_from_environment(void)
{
    const char *text = cp_settings_getenv("CRASHPORT_LAST_RUN");
    if (text == NULL) return;
    cp_last_run run;
    memset(&run, 0, sizeof run);
    char id[sizeof run.report_id];
    unsigned known = 0, crashed = 0, during = 0, consecutive = 0, disabled = 0, pending = 0;
    if (sscanf(text, "%u %u %u %u %u %63s %u", &known, &crashed, &during, &consecutive, &disabled, id, &pending) < 6) {
        return;
    }
    run.pending_reports = pending;
    run.known = known != 0;
    run.crashed = crashed != 0;
    run.crashed_during_launch = during != 0;
    run.consecutive_launch_crashes = consecutive;
    run.disabled = disabled != 0;
    if (strcmp(id, "-") != 0) memcpy(run.report_id, id, strlen(id) + 1);
    cp_app_set_last_run(&run);
}

CP_HIDDEN const cp_last_run *cp_app_previous_run(void)
{
    return cp_previous_run_given && cp_previous_run.known ? &cp_previous_run : NULL;
}

CP_HIDDEN bool cp_app_is_installed(void) { return cp_app_installed; }

__attribute__((visibility("default"))) int crashport_last_run(crashport_last_run_info *info)
{
    if (info == NULL) return -EINVAL;
    memset(info, 0, sizeof *info);
    if (!cp_app_installed) return -ENOTCONN;
    if (!cp_previous_run_given || !cp_previous_run.known) return -ENOENT;
    info->crashed = (int)cp_previous_run.crashed;
    info->crashed_during_launch = (int)cp_previous_run.crashed_during_launch;
    info->consecutive_launch_crashes = (int)cp_previous_run.consecutive_launch_crashes;
    memcpy(info->report_id, cp_previous_run.report_id, sizeof info->report_id);
    return 0;
}

__attribute__((visibility("default"))) void crashport_heartbeat(void)
{
    /* The thread's id, asked of the kernel once per thread. */
    static __thread uint32_t thread_id;
    if (thread_id == 0) thread_id = (uint32_t)syscall(SYS_gettid);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* the vDSO: no system call */
    cp_app_ready();
    __atomic_store_n(&cp_app.heartbeat_tid, thread_id, __ATOMIC_RELAXED);
    __atomic_store_n(&cp_app.heartbeat_ns, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec,
                     __ATOMIC_RELAXED);
    __atomic_fetch_add(&cp_app.heartbeat_count, 1, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) void crashport_launch_completed(void)
{
    __atomic_store_n(&cp_app.launch_completed, 1u, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) int crashport_is_enabled(void)
{
    return cp_app_installed && __atomic_load_n(&cp_state.disabled, __ATOMIC_RELAXED) == 0;
}

CP_HIDDEN int cp_app_send(void *message, size_t size, uint32_t type)
{
    int fd = cp_state.fd;
    if (!cp_app_installed || fd < 0) return -ENOTCONN;
    *(cp_header *)message = (cp_header){CP_MAGIC, CP_VERSION, (uint32_t)size, type};
    ssize_t sent = send(fd, message, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    return sent == (ssize_t)size ? 0 : (sent < 0 ? -errno : -EPROTO);
}

__attribute__((visibility("default"))) int crashport_set_enabled(int enabled)
{
    __atomic_store_n(&cp_state.disabled, enabled ? 0u : 1u, __ATOMIC_RELAXED);
    cp_setting setting;
    memset(&setting, 0, sizeof setting);
    setting.enabled = enabled ? 1u : 0u;
    return cp_app_send(&setting, sizeof setting, CP_MSG_SETTING);
}

static int cp_app_consent(uint32_t action, uint32_t value)
{
    cp_consent consent;
    memset(&consent, 0, sizeof consent);
    consent.action = action;
    consent.value = value;
    return cp_app_send(&consent, sizeof consent, CP_MSG_CONSENT);
}

__attribute__((visibility("default"))) int crashport_set_consent(int consent)
{
    if (consent != CRASHPORT_CONSENT_ASK && consent != CRASHPORT_CONSENT_ALWAYS && consent != CRASHPORT_CONSENT_NEVER) {
        return -EINVAL;
    }
    return cp_app_consent(CP_CONSENT_SET, (uint32_t)consent);
}

__attribute__((visibility("default"))) int crashport_pending_reports(void)
{
    if (!cp_app_installed) return -ENOTCONN;
    return (int)__atomic_load_n(&cp_previous_run.pending_reports, __ATOMIC_RELAXED);
}

static int cp_app_decide(uint32_t action)
{
    int result = cp_app_consent(action, 0);
    if (result == 0) __atomic_store_n(&cp_previous_run.pending_reports, 0u, __ATOMIC_RELAXED);
    return result;
}

__attribute__((visibility("default"))) int crashport_send_pending(void) { return cp_app_decide(CP_CONSENT_SEND); }

__attribute__((visibility("default"))) int crashport_discard_pending(void) { return cp_app_decide(CP_CONSENT_DISCARD); }

/* crashport_pending_list: a query carrying one end of a fresh socketpair (SCM_RIGHTS, as an
 * ERROR record carries its reply fd), answered once on it by the watcher (cp_pending_list). Each
 * call has its own pair, so threads asking at once do not share an answer. */
static int cp_app_pending_query(int *reply, uint32_t flags)
{
    int fd = cp_state.fd;
    if (!cp_app_installed || fd < 0) return -ENOTCONN;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return -errno;
    cp_pending_query query;
    memset(&query, 0, sizeof query);
    query.header = (cp_header){CP_MAGIC, CP_VERSION, sizeof query, CP_MSG_PENDING_QUERY};
    query.flags = flags;
    struct iovec part = {.iov_base = &query, .iov_len = sizeof query};
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.bytes,
                             .msg_controllen = sizeof control.bytes};
    struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(rights), &pair[1], sizeof(int));
    ssize_t sent = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    int failure = sent == (ssize_t)sizeof query ? 0 : (sent < 0 ? -errno : -EPROTO);
    close(pair[1]);
    if (failure != 0) {
        close(pair[0]);
        return failure;
    }
    *reply = pair[0];
    return 0;
}

/* For attach.c (off_path.h): the area marked in use, and the writers' flag that keeps a name in
 * one slot. */
CP_HIDDEN void cp_app_mark_ready(void) { cp_app_ready(); }
CP_HIDDEN int cp_app_writers_lock(void) { return cp_app_lock(); }
CP_HIDDEN void cp_app_writers_unlock(void) { cp_app_unlock(); }

CP_HIDDEN void cp_app_copy_text(char *to, size_t to_size, const char *from, size_t from_size)
{
    size_t length = strnlen(from, from_size);
    if (length >= to_size) length = to_size - 1;
    memcpy(to, from, length);
    to[length] = 0;
}

/* Waits on fd until it is readable (1), until total_ms from start have passed (0), or an error
 * (-errno): off_path.h. */
CP_HIDDEN int cp_app_poll_until(int fd, const struct timespec *start, int total_ms)
{
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (long)(now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
        if (elapsed >= total_ms) return 0;
        struct pollfd entry = {.fd = fd, .events = POLLIN, .revents = 0};
        int ready = poll(&entry, 1, (int)(total_ms - elapsed));
        if (ready > 0) return 1;
        if (ready < 0 && errno != EINTR) return -errno;
        /* Interrupted, or a wake-up before the time was up: the loop looks at the clock. */
    }
}

/* Sends a query (flags: 0 or CP_QUERY_SEND_STATES) and receives its one answer of `size` bytes
 * and `type` into `answer`, checked: 0, or -errno (-ETIMEDOUT after 2 s, -EPROTO for anything
 * but the answer asked for). */
static int cp_app_query(uint32_t flags, void *answer, size_t size, uint32_t type)
{
    int reply = -1;
    int failure = cp_app_pending_query(&reply, flags);
    if (failure != 0) return failure;
    /* The answer, at most 2 s away: a watcher that refuses the query closes the fd (EOF). */
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int ready = cp_app_poll_until(reply, &start, 2000);
    if (ready <= 0) {
        close(reply);
        return ready < 0 ? ready : -ETIMEDOUT;
    }
    memset(answer, 0, size);
    ssize_t got = recv(reply, answer, size, MSG_DONTWAIT | MSG_TRUNC);
    int error = got < 0 ? -errno : 0;
    close(reply);
    const cp_header *header = answer;
    if (error == 0 && (got != (ssize_t)size || header->magic != CP_MAGIC || header->version != CP_VERSION ||
                       header->size != size || header->type != type)) {
        error = -EPROTO;
    }
    return error;
}

static void cp_app_copy_entry(crashport_pending_report *to, const cp_pending_entry *entry)
{
    memset(to, 0, sizeof *to);
    cp_app_copy_text(to->id, sizeof to->id, entry->id, sizeof entry->id);
    cp_app_copy_text(to->title, sizeof to->title, entry->title, sizeof entry->title);
    cp_app_copy_text(to->kind, sizeof to->kind, entry->kind, sizeof entry->kind);
    to->time_ms = entry->time_ms;
}

/* The answers, kept off the caller's stack (a thread's may be small: 11 and 22 KB), one caller
 * at a time. */
static pthread_mutex_t cp_app_answer_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("default"))) int crashport_pending_list(crashport_pending_report *out, size_t capacity)
{
    if (out == NULL && capacity > 0) return -EINVAL;
    static cp_pending_list answer;
    pthread_mutex_lock(&cp_app_answer_lock);
    int error = cp_app_query(0, &answer, sizeof answer, CP_MSG_PENDING_LIST);
    if (error == 0 && answer.count > CP_PENDING_MAX) error = -EPROTO;
    if (error != 0) {
        pthread_mutex_unlock(&cp_app_answer_lock);
        return error;
    }
    size_t count = answer.count < capacity ? answer.count : capacity;
    for (size_t i = 0; i < count; i++) cp_app_copy_entry(&out[i], &answer.entries[i]);
    pthread_mutex_unlock(&cp_app_answer_lock);
    return (int)count;
}

__attribute__((visibility("default"))) int crashport_report_states(crashport_report_state *out, size_t capacity)
{
    if (out == NULL && capacity > 0) return -EINVAL;
    static cp_report_states answer;
    pthread_mutex_lock(&cp_app_answer_lock);
    int error = cp_app_query(CP_QUERY_SEND_STATES, &answer, sizeof answer, CP_MSG_REPORT_STATES);
    if (error == 0 && answer.count > CP_PENDING_MAX) error = -EPROTO;
    if (error != 0) {
        pthread_mutex_unlock(&cp_app_answer_lock);
        return error;
    }
    size_t count = answer.count < capacity ? answer.count : capacity;
    for (size_t i = 0; i < count; i++) {
        const cp_report_state *entry = &answer.entries[i];
        memset(&out[i], 0, sizeof out[i]);
        cp_app_copy_entry(&out[i].report, &entry->report);
        out[i].send_state = entry->send.state <= CP_SEND_NOT_SENT ? (int)entry->send.state : CRASHPORT_SEND_NONE;
        out[i].sent_ms = entry->send.sent_ms;
        cp_app_copy_text(out[i].send_id, sizeof out[i].send_id, entry->send.server_id, sizeof entry->send.server_id);
        cp_app_copy_text(out[i].send_reason, sizeof out[i].send_reason, entry->send.reason, sizeof entry->send.reason);
    }
    pthread_mutex_unlock(&cp_app_answer_lock);
    return (int)count;
}

static int cp_app_decide_report(uint32_t action, const char *id)
{
    if (id == NULL) return -EINVAL;
    size_t length = strnlen(id, CP_PENDING_ID_SIZE);
    if (length == 0 || length >= CP_PENDING_ID_SIZE) return -EINVAL;
    cp_consent_report decision;
    memset(&decision, 0, sizeof decision);
    decision.action = action;
    memcpy(decision.id, id, length);
    int failure = cp_app_send(&decision, sizeof decision, CP_MSG_CONSENT_REPORT);
    if (failure != 0) return failure;
    /* One fewer awaits (the count at install), never below none. */
    uint32_t pending = __atomic_load_n(&cp_previous_run.pending_reports, __ATOMIC_RELAXED);
    while (pending > 0 && !__atomic_compare_exchange_n(&cp_previous_run.pending_reports, &pending, pending - 1, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return 0;
}

__attribute__((visibility("default"))) int crashport_send_report(const char *id)
{
    return cp_app_decide_report(CP_CONSENT_SEND, id);
}

__attribute__((visibility("default"))) int crashport_discard_report(const char *id)
{
    return cp_app_decide_report(CP_CONSENT_DISCARD, id);
}

/* Called once by crashport_install: marks the area in use and finds the runtimes' messages. */
CP_HIDDEN void cp_app_install(void)
{
    cp_app_ready();
    struct timespec now = {0, 0};
    clock_gettime(CLOCK_REALTIME, &now);
    cp_app.install_time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    cp_app.launch_ms = 5000;
    const char *launch = cp_settings_getenv("CRASHPORT_LAUNCH_MS");
    if (launch != NULL) {
        char *end = NULL;
        unsigned long parsed = strtoul(launch, &end, 10);
        if (end != launch && *end == '\0' && parsed <= UINT32_MAX) cp_app.launch_ms = (uint32_t)parsed;
    }
    const char *release = cp_settings_getenv("CRASHPORT_RELEASE");
    if (release != NULL) (void)cp_app_copy(cp_app.release, sizeof cp_app.release, release);
    if (!cp_previous_run_given) cp_app_last_run_from_environment();
    cp_app_installed = true;
    void *abort_message = dlsym(RTLD_DEFAULT, "__abort_msg");
    __atomic_store_n(&cp_app.abort_message_address, (uint64_t)(uintptr_t)abort_message, __ATOMIC_RELAXED);
    void *(*swift_buffer)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "swift_getFatalErrorMessageBuffer");
    if (swift_buffer != NULL) {
        __atomic_store_n(&cp_app.swift_message_address, (uint64_t)(uintptr_t)swift_buffer(), __ATOMIC_RELAXED);
    }
    /* libstdc++ only: its type_info has the virtual __do_catch this relies on. */
    if (dlsym(RTLD_DEFAULT, "_ZNKSt9type_info10__do_catchEPKS_PPvj") == NULL) return;
    cp_set_terminate = (cp_terminate_handler(*)(cp_terminate_handler))dlsym(RTLD_DEFAULT, "_ZSt13set_terminatePFvvE");
    cp_current_exception_type = (const void *(*)(void))dlsym(RTLD_DEFAULT, "__cxa_current_exception_type");
    cp_current_exception = (void (*)(void **))dlsym(RTLD_DEFAULT, "_ZSt17current_exceptionv");
    cp_release_exception = (void (*)(void **))dlsym(RTLD_DEFAULT, "_ZNSt15__exception_ptr13exception_ptrD1Ev");
    cp_cxa_demangle = (char *(*)(const char *, char *, size_t *, int *))dlsym(RTLD_DEFAULT, "__cxa_demangle");
    cp_std_exception_type = dlsym(RTLD_DEFAULT, "_ZTISt9exception");
    cp_default_terminate = (cp_terminate_handler)dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx27__verbose_terminate_handlerEv");
    if (cp_set_terminate != NULL && cp_current_exception_type != NULL) {
        /* In libcrashport.so, cp_set_terminate may be the interposed std::set_terminate
         * (interpose.c), which passes this call on to libstdc++'s: nothing is chained yet. */
        __atomic_store_n(&cp_previous_terminate, cp_set_terminate(cp_app_terminate), __ATOMIC_RELEASE);
        __atomic_store_n(&cp_terminate_chained, true, __ATOMIC_RELEASE);
    }
}

__attribute__((visibility("default"))) int crashport_detach_file(const char *path)
{
    if (path == NULL || path[0] == '\0') return -EINVAL;
    char absolute[CP_ATTACHMENT_PATH_BYTES];
    int made = cp_app_absolute(path, absolute);
    if (made != 0) return made;
    int locked = cp_app_lock();
    if (locked != 0) return locked;
    cp_attachment *slot = cp_app_find_attachment(absolute);
    if (slot != NULL) {
        cp_app_begin(&slot->sequence);
        slot->flags = 0;
        cp_app_end(&slot->sequence);
    }
    cp_app_unlock();
    return slot != NULL ? 0 : -ENOENT;
}
