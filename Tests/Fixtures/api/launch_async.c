/*
 * launch_async.c: launch protection for real programs (crashport_launch_with). Its launch crashes
 * on a corrupt cache; its own predicate protects after 2 launch crashes in a row (not the
 * threshold's 3); the protect work hands the repair to a thread that finishes 300 ms later (or
 * never: mode "never"), runs a one-shot task twice, and ends with crashport_protect_finished().
 *
 *   launch_async MODE CACHE     MODE: normal, never (the protect never finishes: 500 ms
 *                               timeout), predicate-crash (the predicate itself crashes)
 */
#include <crashport.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *mode;
static const char *cache_path;
static struct timespec protect_started;

static long elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static void reset_settings(void *context)
{
    (void)context;
    printf("task: settings reset\n");
}

static int should_protect(const crashport_run_detail *last, void *context)
{
    (void)context;
    if (strcmp(mode, "predicate-crash") == 0) {
        int *volatile nothing = NULL;
        return *nothing;
    }
    printf("predicate: known %d, %d launch crash(es) in a row\n", last->known, last->consecutive_launch_crashes);
    return last->known && last->consecutive_launch_crashes >= 2;
}

/* The repair, on a thread of its own: a configuration fetched, here 300 ms of sleep. */
static void *repair(void *argument)
{
    (void)argument;
    if (strcmp(mode, "never") == 0) {
        for (;;) pause();
    }
    struct timespec wait = {0, 300 * 1000000L};
    nanosleep(&wait, NULL);
    printf("safe mode: removing %s\n", cache_path);
    unlink(cache_path);
    crashport_run_task("reset-settings");
    printf("task again: %s\n", crashport_run_task("reset-settings") == -ENOENT ? "gone (one-shot)" : "ran twice");
    printf("protect finished: %d\n", crashport_protect_finished());
    return NULL;
}

static void protect(void *context)
{
    (void)context;
    clock_gettime(CLOCK_MONOTONIC, &protect_started);
    printf("protect: started\n");
    pthread_t thread;
    pthread_create(&thread, NULL, repair, NULL);
    pthread_detach(thread);
}

__attribute__((noinline)) static int load_cache(const char *path)
{
    char line[64] = "";
    FILE *file = fopen(path, "r");
    if (file != NULL) {
        if (fgets(line, sizeof line, file) == NULL) line[0] = '\0';
        fclose(file);
    }
    const char *volatile entry = strncmp(line, "corrupt", 7) == 0 ? NULL : line;
    return (int)strlen(entry);
}

static void launch(void *context)
{
    (void)context;
    if (protect_started.tv_sec != 0) printf("launch: %ld ms after the protect started\n", elapsed_ms(&protect_started));
    if (strcmp(mode, "never") != 0) load_cache(cache_path);
    crashport_launch_completed();
    printf("launched: serving\n");
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "normal";
    cache_path = argc > 2 ? argv[2] : "cache";
    crashport_install(NULL);
    setvbuf(stdout, NULL, _IONBF, 0);
    crashport_run_detail last = CRASHPORT_RUN_DETAIL_INIT;
    if (crashport_last_run_detail(&last) == 0) {
        printf("last run: kind %d, %d launch crash(es) in a row, protected %d, protect timed out %d\n", last.kind,
               last.consecutive_launch_crashes, last.launch_protected, last.protect_timed_out);
    }
    crashport_register_task("reset-settings", reset_settings, NULL);
    crashport_launch_options options = CRASHPORT_LAUNCH_OPTIONS_INIT;
    options.threshold = 3;
    options.should_protect = should_protect;
    options.protect = protect;
    options.launch = launch;
    options.asynchronous = 1;
    options.protect_timeout_ms = strcmp(mode, "never") == 0 ? 500 : 10000;
    int how = crashport_launch_with(&options);
    printf("result: %s\n", how == CRASHPORT_LAUNCH_PROTECTED           ? "protected"
                           : how == CRASHPORT_LAUNCH_PROTECT_TIMED_OUT ? "protect timed out"
                           : how == CRASHPORT_LAUNCH_NORMAL            ? "normal"
                                                                       : strerror(-how));
    return 0;
}
