// tools/order-symbols' tracer: which functions of crashport a process runs, each function
// counted once. Every function's first byte becomes an int3; the first thread to reach one
// stops, the byte is put back, the thread goes on, and the function is written down. Code runs
// at full speed between first calls, so a sidecar profiled this way still reports its crashes.
//
//   function-hits ENTRIES OUT --pid PID     trace a running process (every thread, and the ones
//                                           it starts); "ready" on stdout once the traps are set
//   function-hits ENTRIES OUT -- PROGRAM... run PROGRAM traced from its exec
//
// ENTRIES: the functions' addresses in the binary (hex, one per line, as nm prints them; the
// process's own executable is assumed, position-independent, loaded from offset 0). OUT gets
// the addresses of those run, in the same form, when the process has exited.
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t *entries;
static unsigned char *original, *hit;
static size_t count;
static uint64_t bias;
static int mem = -1;  // /proc/PID/mem of the traced process, opened once it is traced

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static long find(uint64_t address) {
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = (low + high) / 2;
        if (entries[middle] < address) low = middle + 1;
        else high = middle;
    }
    return low < count && entries[low] == address ? (long)low : -1;
}

static uint64_t load_bias(pid_t pid) {
    char path[64], exe[4096], line[8192];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *maps = fopen(path, "r");
    if (!maps) return 0;
    uint64_t found = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, offset;
        char name[4096] = "";
        if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %4095[^\n]", &start, &offset, name) >= 2 && offset == 0 &&
            strcmp(name, exe) == 0) {
            found = start;
            break;
        }
    }
    fclose(maps);
    return found;
}

// Writes the int3s through /proc/PID/mem (which may write read-only code of a traced process),
// keeping each function's first byte.
static int arm(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    mem = open(path, O_RDWR | O_CLOEXEC);
    if (mem < 0) return -1;
    bias = load_bias(pid);
    size_t armed = 0;
    for (size_t i = 0; i < count; i++) {
        unsigned char byte, trap = 0xCC;
        if (pread(mem, &byte, 1, (off_t)(bias + entries[i])) != 1) continue;
        original[i] = byte;
        if (pwrite(mem, &trap, 1, (off_t)(bias + entries[i])) == 1) armed++;
        else hit[i] = 2;  // never armed: not counted as run
    }
    fprintf(stderr, "function-hits: %zu of %zu functions trapped\n", armed, count);
    return 0;
}

static void disarm(size_t i) { pwrite(mem, &original[i], 1, (off_t)(bias + entries[i])); }

static int load_entries(const char *file) {
    FILE *in = fopen(file, "r");
    if (!in) return -1;
    size_t capacity = 1 << 16;
    entries = malloc(capacity * sizeof *entries);
    char line[64];
    while (fgets(line, sizeof line, in)) {
        if (count == capacity) entries = realloc(entries, (capacity *= 2) * sizeof *entries);
        entries[count++] = strtoull(line, NULL, 16);
    }
    fclose(in);
    qsort(entries, count, sizeof *entries, compare);
    original = calloc(count, 1);
    hit = calloc(count, 1);
    return 0;
}

static void write_hits(const char *file) {
    FILE *out = fopen(file, "w");
    if (!out) return;
    size_t hits = 0;
    for (size_t i = 0; i < count; i++)
        if (hit[i] == 1 || hit[i] == 3) fprintf(out, "%lx\n", (unsigned long)entries[i]), hits++;
    fclose(out);
    fprintf(stderr, "function-hits: %zu functions run\n", hits);
}

// Calls `each` for every thread of `pid`.
static void for_each_thread(pid_t pid, int (*each)(pid_t)) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return;
    struct dirent *entry;
    while ((entry = readdir(tasks)))
        if (entry->d_name[0] != '.') each(atoi(entry->d_name));
    closedir(tasks);
}

static int seized;

static int seize(pid_t tid) {
    if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACECLONE) != 0) return 0;  // traced already
    ptrace(PTRACE_INTERRUPT, tid, 0, 0);
    int status;
    waitpid(tid, &status, __WALL);
    seized++;
    return 0;
}

static int resume(pid_t tid) { return (int)ptrace(PTRACE_CONT, tid, 0, 0); }

// A process traced once it runs has functions in progress, entered before their first byte was
// a trap: the ones its threads are in, and the callers on their stacks. Every word of a stack
// (up to 1 MiB of it) that points into a function counts: a few false callers cost nothing.
static void mark_containing(uint64_t address) {
    if (address < bias || !count || address - bias < entries[0]) return;
    uint64_t offset = address - bias;
    size_t low = 0, high = count;
    while (low + 1 < high) {
        size_t middle = (low + high) / 2;
        if (entries[middle] <= offset) low = middle;
        else high = middle;
    }
    if (!hit[low]) hit[low] = 3;  // in progress: run, but its trap stays (it may be called again)
}

static int mark_in_progress(pid_t tid) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, 0, &regs) != 0) return 0;
    mark_containing(regs.rip);
    uint64_t words[512];
    for (uint64_t at = regs.rsp & ~7ull; at < (regs.rsp & ~7ull) + (1 << 20); at += sizeof words) {
        ssize_t n = pread(mem, words, sizeof words, (off_t)at);
        if (n <= 0) break;
        for (ssize_t i = 0; i < n / 8; i++) mark_containing(words[i] - 1);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5 || load_entries(argv[1]) != 0) {
        fprintf(stderr, "usage: function-hits ENTRIES OUT --pid PID | -- PROGRAM [ARGS...]\n");
        return 2;
    }
    pid_t main_pid;
    if (strcmp(argv[3], "--pid") == 0) {
        main_pid = atoi(argv[4]);
        // Threads can start while we attach: go over the list until no new one appears.
        int before;
        do {
            before = seized;
            for_each_thread(main_pid, seize);
        } while (seized != before);
        if (!seized) return 1;
    } else {
        main_pid = fork();
        if (main_pid == 0) {
            ptrace(PTRACE_TRACEME, 0, 0, 0);
            execvp(argv[4], argv + 4);
            _exit(127);
        }
        int status;
        waitpid(main_pid, &status, 0);  // the exec's SIGTRAP
        ptrace(PTRACE_SETOPTIONS, main_pid, 0, PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL);
    }
    if (arm(main_pid) != 0) return 1;
    for_each_thread(main_pid, mark_in_progress);
    printf("ready\n");
    fflush(stdout);

    // Every stopped thread goes on; traps are ours; other signals are delivered.
    for_each_thread(main_pid, resume);

    int exit_status = 0;
    for (;;) {
        int status;
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == main_pid) exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            continue;
        }
        if (!WIFSTOPPED(status)) continue;
        int signal = WSTOPSIG(status), event = status >> 16;
        int deliver = 0;
        if (event == PTRACE_EVENT_STOP || event == PTRACE_EVENT_CLONE || signal == SIGSTOP) {
            deliver = 0;  // a new thread's first stop, or a group stop: just go on
        } else if (signal == SIGTRAP) {
            struct user_regs_struct regs;
            ptrace(PTRACE_GETREGS, tid, 0, &regs);
            long i = find(regs.rip - 1 - bias);
            if (i >= 0) {
                if (hit[i] != 1 && hit[i] != 2) {
                    hit[i] = 1;
                    disarm((size_t)i);
                }
                regs.rip -= 1;
                ptrace(PTRACE_SETREGS, tid, 0, &regs);
            } else {
                deliver = SIGTRAP;
            }
        } else {
            deliver = signal;
        }
        ptrace(PTRACE_CONT, tid, 0, deliver);
    }
    write_hits(argv[2]);
    return exit_status;
}
