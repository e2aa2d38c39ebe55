/*
 * attach.c: attachments from memory (crashport_attach_bytes, crashport_attach_text,
 * crashport_attach_ring, crashport_attach_append, crashport_detach_memory; crashport.h documents
 * each). A named buffer with a content type, set or appended to at any time, that the watcher
 * reads out of the process when it is held for a report (a crash, a handled error, a hang) and
 * writes beside the report: the last lines of a log kept in memory, a state dump.
 *
 * The slots live in cp_app (cp_memory_attachment, crashport_protocol.h); their bytes in memory
 * this file maps for each (mmap, at set time: the program's own call, never the crash path). A
 * slot's sequence is its writers' lock: odd while a writer changes it, so the watcher knows a
 * write was cut short by the crash. Finding or freeing a slot by name takes app.c's writers' flag
 * first, so that a name has one slot; an append takes only its slot's sequence. No lock is held
 * across a system call: a new buffer is mapped before, an old one unmapped after.
 *
 * Off the crash path the stub's files call one way (off_path.h): install.c → launch.c → attach.c
 * → app.c → settings.c. This file calls app.c (the area, the writers' flag) and nothing above.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "crashport.h"
#include "off_path.h"
#include "stub_state.h"

/* How long a writer waits for a slot another writer holds before it gives up (-EBUSY). */
#define CP_ATTACH_SPINS 1024u
#define CP_ATTACH_WAIT_NS 1000000000ull

static uint64_t cp_attach_now_ns(void)
{
    struct timespec now = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* Turns the slot's sequence odd (its writers' lock): 0, or -EBUSY after a second. */
static int cp_attach_hold(cp_memory_attachment *slot)
{
    uint64_t give_up = 0;
    for (uint32_t attempt = 0;; attempt++) {
        uint32_t sequence = __atomic_load_n(&slot->sequence, __ATOMIC_RELAXED);
        if ((sequence & 1u) == 0 &&
            __atomic_compare_exchange_n(&slot->sequence, &sequence, sequence + 1u, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            return 0;
        }
        if (attempt < CP_ATTACH_SPINS) continue;
        uint64_t now = cp_attach_now_ns();
        if (give_up == 0) give_up = now + CP_ATTACH_WAIT_NS;
        if (now >= give_up) return -EBUSY;
        sched_yield();
    }
}

static void cp_attach_release(cp_memory_attachment *slot)
{
    __atomic_fetch_add(&slot->sequence, 1u, __ATOMIC_RELEASE);
}

/* A name: not empty, at most 63 bytes, no '/', not "." or ".." (it names a file beside the
 * report). */
static int cp_attach_check_name(const char *name)
{
    if (name == NULL || name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0) {
        return -EINVAL;
    }
    if (strlen(name) >= CP_MEMORY_NAME_BYTES) return -ENAMETOOLONG;
    return 0;
}

static cp_memory_attachment *cp_attach_find(const char *name)
{
    uint32_t used = __atomic_load_n(&cp_app.memory_attachments_used, __ATOMIC_ACQUIRE);
    for (uint32_t index = 0; index < used && index < CP_MEMORY_ATTACHMENT_MAX; index++) {
        cp_memory_attachment *slot = &cp_app.memory_attachments[index];
        if ((__atomic_load_n(&slot->flags, __ATOMIC_ACQUIRE) & CP_SLOT_USED) &&
            strncmp(slot->name, name, CP_MEMORY_NAME_BYTES) == 0) {
            return slot;
        }
    }
    return NULL;
}

/* The slot named `name`, held (its sequence odd): found, or (create) a free one taken for it
 * with no buffer yet. -ENOENT, -ENOSPC, or the locks' -EDEADLK / -EBUSY. */
static int cp_attach_take(const char *name, bool create, cp_memory_attachment **taken)
{
    int locked = cp_app_writers_lock();
    if (locked != 0) return locked;
    cp_memory_attachment *slot = cp_attach_find(name);
    int result = 0;
    if (slot == NULL && !create) {
        result = -ENOENT;
    } else if (slot == NULL) {
        for (uint32_t index = 0; slot == NULL && index < CP_MEMORY_ATTACHMENT_MAX; index++) {
            if (!(cp_app.memory_attachments[index].flags & CP_SLOT_USED)) slot = &cp_app.memory_attachments[index];
        }
        if (slot == NULL) {
            result = -ENOSPC;
        } else if ((result = cp_attach_hold(slot)) == 0) {
            memset(slot->name, 0, sizeof slot->name);
            memcpy(slot->name, name, strlen(name));
            slot->content_type[0] = '\0';
            slot->address = 0;
            slot->capacity = 0;
            slot->length = 0;
            __atomic_store_n(&slot->flags, CP_SLOT_USED, __ATOMIC_RELEASE);
            uint32_t used = (uint32_t)(slot - cp_app.memory_attachments) + 1;
            if (used > cp_app.memory_attachments_used) {
                __atomic_store_n(&cp_app.memory_attachments_used, used, __ATOMIC_RELEASE);
            }
        }
    } else {
        result = cp_attach_hold(slot);
    }
    cp_app_writers_unlock();
    if (result == 0) *taken = slot;
    return result;
}

/* The bytes a buffer of `capacity` maps: whole pages. */
static size_t cp_attach_mapped(size_t capacity)
{
    return capacity == 0 ? 4096u : (capacity + 4095u) / 4096u * 4096u;
}

/* Sets the slot `name` to a plain buffer of `size` bytes (`ring`: an empty ring of that
 * capacity) of `content_type`, copying `bytes` (NULL for a ring). A plain buffer large enough is
 * kept; otherwise a new one is mapped with no lock held, and the old one unmapped after. */
static int cp_attach_set(const char *name, const char *content_type, const void *bytes, size_t size, bool ring)
{
    int checked = cp_attach_check_name(name);
    if (checked != 0) return checked;
    if (bytes == NULL && size != 0 && !ring) return -EINVAL;
    cp_app_mark_ready();
    bool cut = size > CP_MEMORY_ATTACHMENT_CAP;
    if (cut) size = CP_MEMORY_ATTACHMENT_CAP;
    void *fresh = NULL;
    for (;;) {
        cp_memory_attachment *slot = NULL;
        int taken = cp_attach_take(name, true, &slot);
        if (taken != 0) {
            if (fresh != NULL) munmap(fresh, cp_attach_mapped(size));
            return taken;
        }
        void *old = (void *)(uintptr_t)slot->address;
        size_t old_capacity = (size_t)slot->capacity;
        bool old_ring = (slot->flags & CP_SLOT_RING) != 0;
        void *spare = NULL;
        size_t spare_mapped = 0;
        if (!ring && old != NULL && !old_ring && old_capacity >= size) {
            spare = fresh; /* mapped for nothing: the slot's own buffer holds it */
            spare_mapped = cp_attach_mapped(size);
            fresh = old;
        } else if (fresh != NULL) {
            spare = old;
            spare_mapped = old != NULL ? cp_attach_mapped(old_capacity) : 0;
            slot->address = (uint64_t)(uintptr_t)fresh;
            old_capacity = ring ? size : cp_attach_mapped(size);
        } else {
            /* A buffer to map first, with no lock held. */
            if (old == NULL) __atomic_store_n(&slot->flags, CP_SLOT_USED, __ATOMIC_RELEASE);
            cp_attach_release(slot);
            fresh = mmap(NULL, cp_attach_mapped(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
            if (fresh == MAP_FAILED) return -ENOMEM;
            continue;
        }
        slot->capacity = old_capacity;
        if (!ring && size != 0) memcpy(fresh, bytes, size);
        slot->length = ring ? 0 : size;
        memset(slot->content_type, 0, sizeof slot->content_type);
        const char *type = content_type != NULL && content_type[0] != '\0' ? content_type : "application/octet-stream";
        bool type_cut = strlen(type) >= sizeof slot->content_type;
        cp_app_copy_text(slot->content_type, sizeof slot->content_type, type, strlen(type));
        __atomic_store_n(&slot->flags, CP_SLOT_USED | (ring ? CP_SLOT_RING : 0u) | (cut ? CP_SLOT_TRUNCATED : 0u),
                         __ATOMIC_RELEASE);
        cp_attach_release(slot);
        if (spare != NULL) munmap(spare, spare_mapped);
        return cut || type_cut ? CRASHPORT_TRUNCATED : 0;
    }
}

__attribute__((visibility("default"))) int crashport_attach_bytes(const char *name, const char *content_type,
                                                                  const void *bytes, size_t size)
{
    return cp_attach_set(name, content_type, bytes, size, false);
}

__attribute__((visibility("default"))) int crashport_attach_text(const char *name, const char *text)
{
    if (text == NULL) return -EINVAL;
    return cp_attach_set(name, "text/plain; charset=utf-8", text, strlen(text), false);
}

__attribute__((visibility("default"))) int crashport_attach_ring(const char *name, const char *content_type,
                                                                 size_t capacity)
{
    if (capacity == 0) return -EINVAL;
    return cp_attach_set(name, content_type != NULL ? content_type : "text/plain; charset=utf-8", NULL, capacity,
                         true);
}

__attribute__((visibility("default"))) int crashport_attach_append(const char *name, const void *bytes, size_t size)
{
    int checked = cp_attach_check_name(name);
    if (checked != 0) return checked;
    if (bytes == NULL && size != 0) return -EINVAL;
    /* No writers' flag: the slot is found by name, then checked again once held (it may have
     * been detached, or taken for another name, in between). */
    for (int attempt = 0; attempt < 4; attempt++) {
        cp_memory_attachment *slot = cp_attach_find(name);
        if (slot == NULL) return -ENOENT;
        int held = cp_attach_hold(slot);
        if (held != 0) return held;
        if (!(slot->flags & CP_SLOT_USED) || strncmp(slot->name, name, CP_MEMORY_NAME_BYTES) != 0) {
            cp_attach_release(slot);
            continue;
        }
        if (!(slot->flags & CP_SLOT_RING) || slot->capacity == 0 || slot->address == 0) {
            cp_attach_release(slot);
            return -EINVAL;
        }
        unsigned char *ring = (unsigned char *)(uintptr_t)slot->address;
        uint64_t capacity = slot->capacity;
        const unsigned char *from = bytes;
        size_t count = size;
        /* More than the ring holds: only its last `capacity` bytes matter. */
        if (count > capacity) {
            from += count - capacity;
            slot->length += count - capacity;
            count = (size_t)capacity;
        }
        size_t at = (size_t)(slot->length % capacity);
        size_t first = count < capacity - at ? count : (size_t)(capacity - at);
        memcpy(ring + at, from, first);
        memcpy(ring, from + first, count - first);
        slot->length += count;
        cp_attach_release(slot);
        return 0;
    }
    return -EBUSY;
}

__attribute__((visibility("default"))) int crashport_detach_memory(const char *name)
{
    int checked = cp_attach_check_name(name);
    if (checked != 0) return checked;
    cp_memory_attachment *slot = NULL;
    int taken = cp_attach_take(name, false, &slot);
    if (taken != 0) return taken;
    void *buffer = (void *)(uintptr_t)slot->address;
    size_t mapped = cp_attach_mapped((size_t)slot->capacity);
    __atomic_store_n(&slot->flags, 0u, __ATOMIC_RELEASE);
    slot->address = 0;
    slot->capacity = 0;
    slot->length = 0;
    cp_attach_release(slot);
    if (buffer != NULL) munmap(buffer, mapped);
    return 0;
}
