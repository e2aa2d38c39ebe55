/*
 * lastrun.c: prints what crashport_last_run_detail says of the previous run, one line
 * ("detail ..."), then ends the way argv[1] says:
 *   crash     writes through NULL in parse_header (SIGSEGV), after its launch
 *   sigkill   raise(SIGKILL)
 *   oom CG    moves itself into the memory cgroup directory CG, then grows in grow_forever
 *             until the OOM killer ends it
 *   errors    reports a handled error, then exits 0
 *   exit3     exits 3
 *   clean     exits 0
 * Linked with libcrashport (its constructor installs it under crashport run or a sidecar).
 */
#include <crashport.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) static int parse_header(const char *header)
{
    return (int)strlen(header); /* NULL: SIGSEGV */
}

/* Touches page after page of fresh anonymous memory until the OOM killer ends it. */
__attribute__((noinline)) static void grow_forever(void)
{
    for (size_t total = 0;; total += 1 << 20) {
        volatile char *chunk = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (chunk == MAP_FAILED) continue;
        for (size_t page = 0; page < (1 << 20); page += 4096) chunk[page] = (char)(total >> 20);
    }
}

/* Writes this process's pid into CG/cgroup.procs (exit 93 when it cannot). */
static void enter_cgroup(const char *cgroup)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", cgroup);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || dprintf(fd, "%d\n", (int)getpid()) < 0 || close(fd) != 0) {
        perror(path);
        _exit(93);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    crashport_run_detail last = CRASHPORT_RUN_DETAIL_INIT;
    int result = crashport_last_run_detail(&last);
    printf("detail %d known %d kind %d crashed %d abnormal %d launch %d consecutive %d signal %d %s exit %d "
           "oom %d pressure %d test %d protected %d errors %u hangs %u started %d duration %lld id %s path %s\n",
           result, last.known, last.kind, last.crashed, last.abnormal, last.during_launch,
           last.consecutive_launch_crashes, last.signal, last.signal_name[0] ? last.signal_name : "-",
           last.exit_status, last.oom_killed, last.memory_pressure, last.test_crash, last.launch_protected,
           last.errors, last.hangs, last.started_ms > 1600000000000LL, (long long)last.duration_ms,
           last.report_id[0] ? last.report_id : "-", last.report_path[0] ? last.report_path : "-");
    printf("title %s\nreason %s\n", last.title, last.reason);

    /* A caller built against an older header (a smaller struct) gets only what it knows. */
    struct {
        size_t size;
        int known;
        int kind;
        int guard;
    } older = {sizeof(size_t) + 2 * sizeof(int), 0, 0, 0x5a5a};
    crashport_last_run_detail((crashport_run_detail *)&older);
    printf("older known %d kind %d guard %x\n", older.known, older.kind, older.guard);

    const char *how = argc > 1 ? argv[1] : "clean";
    crashport_launch_completed();
    if (strcmp(how, "crash") == 0) {
        const char *volatile header = NULL;
        return parse_header(header);
    }
    if (strcmp(how, "sigkill") == 0) raise(SIGKILL);
    if (strcmp(how, "oom") == 0 && argc > 2) {
        enter_cgroup(argv[2]);
        grow_forever();
    }
    if (strcmp(how, "errors") == 0) crashport_report_error("LedgerError", "the ledger is unbalanced");
    if (strcmp(how, "exit3") == 0) return 3;
    return 0;
}
