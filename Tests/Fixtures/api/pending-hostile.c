/* A hostile client of a consent dialog's messages (AppAPITests): on its own connection to the
 * sidecar at argv[1], without the stub (a new connection for each: the sidecar closes one that
 * sent a message it rejects), it sends pending-reports queries that are wrong (no
 * descriptor, a pipe for a reply, too short, reserved bytes set, two descriptors) and a report's
 * consent whose id is not an id, then a valid query. For each query with a reply socket it prints
 * what came back on it: "eof" (the watcher closed it unanswered), "answer N" (a list of N) or
 * "nothing" (no word in 5 s).
 */
#define _GNU_SOURCE
#include <crashport_protocol.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int send_with(int fd, const void *bytes, size_t length, const int *fds, int count)
{
    struct iovec part = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        struct cmsghdr header;
        char bytes[CMSG_SPACE(2 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1};
    if (count > 0) {
        message.msg_control = control.bytes;
        message.msg_controllen = CMSG_SPACE((size_t)count * sizeof(int));
        struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN((size_t)count * sizeof(int));
        memcpy(CMSG_DATA(rights), fds, (size_t)count * sizeof(int));
    }
    return sendmsg(fd, &message, MSG_NOSIGNAL) == (ssize_t)length ? 0 : -1;
}

/* Sends `length` bytes of query with one end of a new socketpair (two when `twice`) and says
 * what came back on the other end. */
static void ask(int fd, const char *what, const cp_pending_query *query, size_t length, int twice)
{
    int pair[2];
    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair);
    int fds[2] = {pair[1], pair[1]};
    if (send_with(fd, query, length, fds, twice ? 2 : 1) != 0) perror("sendmsg");
    close(pair[1]);
    static cp_pending_list answer;
    struct pollfd watch = {.fd = pair[0], .events = POLLIN};
    const char *said = "nothing";
    ssize_t got = -1;
    if (poll(&watch, 1, 5000) == 1) {
        got = recv(pair[0], &answer, sizeof answer, MSG_DONTWAIT);
        said = got == 0 ? "eof" : got == (ssize_t)sizeof answer ? "answer" : "short";
    }
    if (got == (ssize_t)sizeof answer) {
        printf("%s: %s %u\n", what, said, answer.count);
    } else {
        printf("%s: %s\n", what, said);
    }
    close(pair[0]);
}

static const char *socket_path;

/* A new connection to the sidecar (it closes one whose message it rejected). */
static int connection(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, socket_path, sizeof address.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) perror("connect");
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    socket_path = argv[1];
    cp_pending_query query;
    memset(&query, 0, sizeof query);
    query.header = (cp_header){CP_MAGIC, CP_VERSION, sizeof query, CP_MSG_PENDING_QUERY};

    int fd = connection();
    if (send_with(fd, &query, sizeof query, NULL, 0) != 0) perror("sendmsg");
    close(fd);
    int pipe_ends[2];
    if (pipe(pipe_ends) != 0) return 1;
    fd = connection();
    if (send_with(fd, &query, sizeof query, &pipe_ends[1], 1) != 0) perror("sendmsg");
    close(fd);
    close(pipe_ends[1]);
    close(pipe_ends[0]);

    cp_pending_query short_query = query;
    short_query.header.size = 20;
    fd = connection();
    ask(fd, "short", &short_query, 20, 0);
    close(fd);
    cp_pending_query reserved = query;
    reserved.reserved = 7;
    fd = connection();
    ask(fd, "reserved", &reserved, sizeof reserved, 0);
    close(fd);
    fd = connection();
    ask(fd, "two descriptors", &query, sizeof query, 1);
    close(fd);

    cp_consent_report decision;
    memset(&decision, 0, sizeof decision);
    decision.header = (cp_header){CP_MAGIC, CP_VERSION, sizeof decision, CP_MSG_CONSENT_REPORT};
    decision.action = CP_CONSENT_SEND;
    memcpy(decision.id, "../../etc/passwd", 16);
    fd = connection();
    if (send_with(fd, &decision, sizeof decision, NULL, 0) != 0) perror("sendmsg");
    close(fd);
    memset(decision.id, 'A', sizeof decision.id); /* not NUL-terminated */
    fd = connection();
    if (send_with(fd, &decision, sizeof decision, NULL, 0) != 0) perror("sendmsg");
    close(fd);

    fd = connection();
    ask(fd, "valid", &query, sizeof query, 0);
    close(fd);
    return 0;
}
