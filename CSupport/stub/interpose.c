/*
 * interpose.c: pthread_create, interposed (libcrashport.so only, where LD_PRELOAD or link order
 * puts it before libc's), so that every new thread gets an alternate signal stack (threads.c).
 * A static archive leaves it out: there it would collide with libc.a's own definition.
 *
 * When crashport is not installed, or the mapping fails, the thread is created exactly as
 * without crashport. Not signal context: dlsym is fine here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

typedef struct cp_thread_region cp_thread_region;
cp_thread_region *cp_thread_prepare(void *(*start)(void *), void *argument) __attribute__((visibility("hidden")));
void cp_thread_discard(cp_thread_region *region) __attribute__((visibility("hidden")));
void *cp_thread_start(void *argument) __attribute__((visibility("hidden")));

typedef int (*cp_create_function)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attributes,
                                                           void *(*start)(void *), void *argument)
{
    static cp_create_function real;
    cp_create_function create = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (create == NULL) {
        create = (cp_create_function)dlsym(RTLD_NEXT, "pthread_create");
        if (create == NULL) {
            return EAGAIN;
        }
        __atomic_store_n(&real, create, __ATOMIC_RELEASE);
    }
    cp_thread_region *region = cp_thread_prepare(start, argument);
    if (region == NULL) {
        return create(thread, attributes, start, argument);
    }
    int result = create(thread, attributes, cp_thread_start, region);
    if (result != 0) {
        cp_thread_discard(region);
    }
    return result;
}
