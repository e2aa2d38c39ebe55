/* journal-lines: logs lines to journald as sd_journal_print does, then ends
 * (Tests/EndToEndTests/SystemLogReportTests.swift).
 *   journal-lines crash|exit IDENTIFIER MESSAGE...
 * Each MESSAGE is one entry: one datagram of KEY=VALUE lines (SYSLOG_IDENTIFIER, PRIORITY,
 * MESSAGE) sent to /run/systemd/journal/socket, the native protocol's socket; journald takes
 * the entry's _PID and _UID from the datagram's credentials, so the entries are this process's.
 * Then "crash" stores through a null pointer (SIGSEGV) and "exit" exits 0. No libsystemd: the
 * protocol is plain text for messages without newlines. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "crash") != 0 && strcmp(argv[1], "exit") != 0)) {
        fprintf(stderr, "usage: journal-lines crash|exit IDENTIFIER MESSAGE...\n");
        return 2;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX, .sun_path = "/run/systemd/journal/socket"};
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        char entry[2048];
        int length = snprintf(entry, sizeof entry, "SYSLOG_IDENTIFIER=%s\nPRIORITY=6\nMESSAGE=%s\n", argv[2], argv[i]);
        if (length < 0 || (size_t)length >= sizeof entry) return 1;
        if (sendto(fd, entry, (size_t)length, 0, (struct sockaddr *)&address, sizeof address) != length) {
            perror("sendto /run/systemd/journal/socket");
            return 1;
        }
    }
    printf("logged %d line(s) as pid %d\n", argc - 3, (int)getpid());
    fflush(stdout);
    if (strcmp(argv[1], "crash") == 0) *(volatile int *)0 = 0;
    return 0;
}
