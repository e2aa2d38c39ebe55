/* libvictim.so: a library of the throwaway user's own, which the user's program (loader.c)
 * crashes in. The watcher opens it to read the crash's frames; the user truncates it the moment
 * it is opened (truncator.c). */
__attribute__((noinline)) void victim_crash(volatile int *target)
{
    *target = 46;
}
