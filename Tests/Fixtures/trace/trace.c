/* Deaths and hangs no signal handler sees, for TraceExitTests (crashport run --trace-exit,
 * --hang-ms): `trace.c MODE [ARG]`.
 *   kill      a worker thread parks in park_worker, main in wait_for_kill; a forked child (an
 *             outside process) SIGKILLs the program once both are there.
 *   oom CG    moves itself into the memory cgroup directory CG, then fills memory in
 *             fill_ledger until the OOM killer ends it.
 *   burst     idles half a second in idle_before_burst, then grows 1 MiB at a time in
 *             grow_in_a_burst, touching each page, until the OOM killer ends it (in a memory
 *             cgroup with a limit): from idle to the limit in tens of milliseconds.
 *   suicide   kill(getpid(), SIGKILL) as main's first statement: a death in the program's
 *             first microseconds.
 *   exit      exit(3) from leave_with_three, at once.
 *   stop      raise(SIGSTOP); a forked child sends SIGCONT once the program is stopped; exit 4.
 *   signal    a SIGUSR1 handler runs twice; exit 5.
 *   fork      fork + exec of `sh -c "exit 7"`, waited for; exit 6.
 *   exec      exec of `sh -c "exit 8"` from a process with two threads.
 *   deadlock  beats, then two threads take two mutexes in opposite orders (post_entry and
 *             audit_journal) and never beat again.
 *   stall     beats every 20 ms, stalls 2 s in stall_for_a_while, beats 300 ms more; exit 0.
 *   traceme-kill, traceme-exit, traceme-crash
 *             ptrace(PTRACE_TRACEME), as programs that look for a debugger do, printing
 *             "traceme ok" or "traceme failed: ERRNO"; then SIGKILLs itself in
 *             after_traceme, exits 11, or writes through NULL in after_traceme.
 *   clone     clone()s a child process with no exit signal (not a thread, not a fork: the
 *             kernel's TRACECLONE follows it), which SIGKILLs itself; prints "clone child
 *             status 9"; exit 12.
 *   forks     forks 1000 children that exit at once (child i with i % 100), reaps them and
 *             prints "reaped 1000 sum S"; exit 10.
 * The heartbeat comes from the preloaded stub (a weak reference: none without it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern void crashport_heartbeat(void) __attribute__((weak));

static void beat(void)
{
    if (crashport_heartbeat) crashport_heartbeat();
}

static int ready[2];
static volatile int parked;

__attribute__((noinline)) static void park_worker(void)
{
    __atomic_store_n(&parked, 1, __ATOMIC_RELEASE);
    for (;;) pause();
}

static void *worker(void *arg)
{
    (void)arg;
    park_worker();
    return NULL;
}

__attribute__((noinline)) static void wait_for_kill(void)
{
    while (!__atomic_load_n(&parked, __ATOMIC_ACQUIRE)) usleep(1000);
    if (write(ready[1], "r", 1) != 1) _exit(90);
    for (;;) pause();
}

static void kill_mode(void)
{
    if (pipe(ready) != 0) exit(91);
    pid_t parent = getpid();
    if (fork() == 0) {
        char byte;
        if (read(ready[0], &byte, 1) != 1) _exit(92);
        usleep(50000); /* let main get into pause() */
        kill(parent, SIGKILL);
        _exit(0);
    }
    pthread_t thread;
    pthread_create(&thread, NULL, worker, NULL);
    wait_for_kill();
}

__attribute__((noinline)) static void fill_ledger(void)
{
    for (;;) {
        char *block = malloc(1 << 20);
        if (block == NULL) continue;
        memset(block, 0x5a, 1 << 20);
    }
}

/* grow: grows in grow_forever, called from main, 1 MiB at a time until the OOM killer ends it
 * (in a memory cgroup with a limit). */
__attribute__((noinline)) static void grow_forever(void)
{
    for (;;) {
        char *block = malloc(1 << 20);
        if (block == NULL) continue;
        memset(block, 0x5a, 1 << 20);
    }
}

/* burst: half a second of idle (a sampler looking at its usage looks seldom), then memory
 * touched page by page as fast as it comes, 1 MiB at a time. */
__attribute__((noinline)) static void idle_before_burst(void)
{
    usleep(500000);
}

__attribute__((noinline)) static void grow_in_a_burst(void)
{
    for (;;) {
        volatile char *block = malloc(1 << 20);
        if (block == NULL) continue;
        for (size_t page = 0; page < (1 << 20); page += 4096) block[page] = 1;
    }
}

/* Moves this process into the cgroup (a no-op when it is already there). */
static void join_cgroup(const char *cgroup)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", cgroup);
    FILE *procs = fopen(path, "w");
    if (procs == NULL || fprintf(procs, "%d\n", (int)getpid()) < 0 || fclose(procs) != 0) {
        perror(path);
        exit(93);
    }
}

static void oom_mode(const char *cgroup)
{
    join_cgroup(cgroup);
    fill_ledger();
}

/* A cgroup's number file (memory.current, memory.usage_in_bytes...); 0 when unreadable. */
static unsigned long long cgroup_number(const char *cgroup, const char *v2, const char *v1)
{
    char path[4096];
    unsigned long long value = 0;
    snprintf(path, sizeof path, "%s/%s", cgroup, v2);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        snprintf(path, sizeof path, "%s/%s", cgroup, v1);
        file = fopen(path, "r");
    }
    if (file != NULL) {
        if (fscanf(file, "%llu", &value) != 1) value = 0;
        fclose(file);
    }
    return value;
}

/* Joins the cgroup (a no-op when it is already there), allocates until the cgroup uses 90 % of
 * its limit (whoever else is in it: a watcher in the same cgroup counts too), then crashes, or
 * with TRACE_PRESSURE_EXIT set exits 0: a run whose memory was under pressure. */
__attribute__((noinline)) static void tally_under_pressure(const char *cgroup)
{
    join_cgroup(cgroup);
    unsigned long long limit = cgroup_number(cgroup, "memory.max", "memory.limit_in_bytes");
    for (int i = 0; i < 4096 && limit > 0; i++) {
        if (cgroup_number(cgroup, "memory.current", "memory.usage_in_bytes") >= limit / 10 * 9) break;
        char *block = malloc(1 << 20);
        if (block != NULL) memset(block, 0x5a, 1 << 20);
    }
    if (getenv("TRACE_PRESSURE_EXIT") != NULL) exit(0);
    *(volatile int *)NULL = 1;
}

__attribute__((noinline)) static void leave_with_three(void)
{
    exit(3);
}

static int stopped_state(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *stat = fopen(path, "r");
    if (stat == NULL) return 0;
    char *got = fgets(line, sizeof line, stat);
    fclose(stat);
    char *close = got ? strrchr(line, ')') : NULL;
    return close != NULL && (close[2] == 'T' || close[2] == 't');
}

static volatile int handled;
static void on_usr1(int signo)
{
    (void)signo;
    handled++;
}

static pthread_mutex_t ledger = PTHREAD_MUTEX_INITIALIZER, journal = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both;

__attribute__((noinline)) static void post_entry(void)
{
    pthread_mutex_lock(&ledger);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&journal);
    pthread_mutex_unlock(&journal);
    pthread_mutex_unlock(&ledger);
}

__attribute__((noinline)) static void audit_journal(void)
{
    pthread_mutex_lock(&journal);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&ledger);
    pthread_mutex_unlock(&ledger);
    pthread_mutex_unlock(&journal);
}

static void *auditor(void *arg)
{
    (void)arg;
    audit_journal();
    return NULL;
}

__attribute__((noinline)) static void stall_for_a_while(void)
{
    struct timespec two = {2, 0};
    while (nanosleep(&two, &two) != 0) {}
}

static void *idle(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}

__attribute__((noinline)) static void after_traceme(const char *mode)
{
    if (!strcmp(mode, "traceme-kill")) kill(getpid(), SIGKILL);
    if (!strcmp(mode, "traceme-exit")) exit(11);
    *(volatile int *)NULL = 1;
}

static void traceme_mode(const char *mode)
{
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0)
        printf("traceme ok\n");
    else
        printf("traceme failed: %s\n", strerrorname_np(errno));
    after_traceme(mode);
}

static int clone_child(void *arg)
{
    (void)arg;
    kill(getpid(), SIGKILL);
    return 0;
}

static int clone_mode(void)
{
    static char stack[1 << 16];
    pid_t child = clone(clone_child, stack + sizeof stack, 0, NULL);
    int status = 0;
    if (child < 0 || waitpid(child, &status, __WALL) != child) return 96;
    printf("clone child status %d\n", WTERMSIG(status));
    return 12;
}

static int forks_mode(void)
{
    int reaped = 0, sum = 0;
    for (int i = 0; i < 1000; i++) {
        pid_t child = fork();
        if (child == 0) _exit(i % 100);
        if (child < 0) return 95;
    }
    int status;
    while (wait(&status) > 0) {
        reaped++;
        sum += WEXITSTATUS(status);
    }
    printf("reaped %d sum %d\n", reaped, sum);
    return 10;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "suicide")) kill(getpid(), SIGKILL);
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "kill")) kill_mode();
    if (!strcmp(mode, "oom") && argc > 2) oom_mode(argv[2]);
    if (!strcmp(mode, "grow")) grow_forever();
    if (!strcmp(mode, "burst")) {
        idle_before_burst();
        grow_in_a_burst();
    }
    if (!strcmp(mode, "pressure") && argc > 2) tally_under_pressure(argv[2]);
    if (!strcmp(mode, "exit")) leave_with_three();
    if (!strncmp(mode, "traceme-", 8)) traceme_mode(mode);
    if (!strcmp(mode, "forks")) return forks_mode();
    if (!strcmp(mode, "clone")) return clone_mode();
    if (!strcmp(mode, "stop")) {
        pid_t parent = getpid();
        if (fork() == 0) {
            while (!stopped_state(parent)) usleep(1000);
            kill(parent, SIGCONT);
            _exit(0);
        }
        raise(SIGSTOP);
        printf("continued\n");
        wait(NULL);
        return 4;
    }
    if (!strcmp(mode, "signal")) {
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
        raise(SIGUSR1);
        printf("handled %d\n", handled);
        return 5;
    }
    if (!strcmp(mode, "fork")) {
        pid_t child = fork();
        if (child == 0) {
            execlp("sh", "sh", "-c", "exit 7", (char *)NULL);
            _exit(99);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("child exited %d\n", WEXITSTATUS(status));
        return 6;
    }
    if (!strcmp(mode, "exec")) {
        pthread_t thread;
        pthread_create(&thread, NULL, idle, NULL);
        execlp("sh", "sh", "-c", "exit 8", (char *)NULL);
        return 98;
    }
    if (!strcmp(mode, "deadlock")) {
        for (int i = 0; i < 5; i++) {
            beat();
            usleep(20000);
        }
        pthread_barrier_init(&both, NULL, 2);
        pthread_t thread;
        pthread_create(&thread, NULL, auditor, NULL);
        post_entry();
        return 0;
    }
    if (!strcmp(mode, "stall")) {
        for (int i = 0; i < 10; i++) {
            beat();
            usleep(20000);
        }
        stall_for_a_while();
        for (int i = 0; i < 15; i++) {
            beat();
            usleep(20000);
        }
        printf("recovered\n");
        return 0;
    }
    fprintf(stderr, "usage: trace MODE\n");
    return 64;
}
