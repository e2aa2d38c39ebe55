/*
 * safe-mode.c: launch protection. A program whose launch crashes on a corrupt cache file enters
 * safe mode after three launch crashes in a row: crashport runs its protect work (the cache is
 * removed), then its launch work, in the same process, and the program launches normally.
 *
 *   cc -g -o safe-mode safe-mode.c $(pkg-config --cflags --libs crashport)
 *   echo corrupt > cache
 *   crashport run -- ./safe-mode cache     # three times: each launch crashes in load_cache
 *   crashport run -- ./safe-mode cache     # the fourth: "safe mode: removing cache", then serves
 *
 * (or under the sidecar: CRASHPORT_SOCKET=/run/crashport/crashport.sock ./safe-mode cache).
 * At each start it prints what crashport_last_run_detail says of the run before.
 */
#include <crashport.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *cache_path;

/* The repair: whatever a launch crash may have come from. */
static void protect(void *context)
{
    (void)context;
    printf("safe mode: removing %s\n", cache_path);
    unlink(cache_path);
    crashport_run_task("reset-settings");
}

/* A cache that says "corrupt" stands for one the program cannot parse: a NULL it trusts. */
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
    load_cache(cache_path);
    /* The milestone: from here a crash is not a launch crash. */
    crashport_launch_completed();
    printf("launched: serving\n");
}

static void reset_settings(void *context)
{
    (void)context;
    printf("task: settings reset\n");
}

int main(int argc, char **argv)
{
    cache_path = argc > 1 ? argv[1] : "cache";
    crashport_install(NULL); /* nothing to do when it is preloaded or linked (it is idempotent) */
    setvbuf(stdout, NULL, _IONBF, 0);

    crashport_run_detail last = CRASHPORT_RUN_DETAIL_INIT;
    if (crashport_last_run_detail(&last) == 0) {
        static const char *const kinds[] = {"unknown", "clean", "crash", "termination", "hang", "errors"};
        int kind = last.kind >= 0 && last.kind <= CRASHPORT_RUN_ERRORS ? last.kind : 0;
        printf("last run: %s%s%s, %d launch crash(es) in a row%s%s%s%s\n", kinds[kind],
               last.signal_name[0] ? " by " : "", last.signal_name, last.consecutive_launch_crashes,
               last.oom_killed ? ", OOM-killed" : "", last.memory_pressure ? ", under memory pressure" : "",
               last.title[0] ? ": " : "", last.title);
        if (last.report_path[0]) printf("its report: %s\n", last.report_path);
    }

    crashport_register_task("reset-settings", reset_settings, NULL);
    int how = crashport_launch(3, protect, launch, NULL);
    printf("%s\n", how == CRASHPORT_LAUNCH_PROTECTED ? "launched after the protect work" : "launched normally");
    return 0;
}
