"""A fake sidecar for StubTrustTests: listens on an AF_UNIX SOCK_SEQPACKET socket (a path, or
"@name" for an abstract one), accepts every connection, and appends every message it receives
to OUT as a 4-byte little-endian length then the bytes. It never answers: a HELLO waits out the
stub's reply timeout, and a record's reply channel is closed once it is read, so the stub goes
on to its spool at once. On every CRASH record, while the process still waits for an answer, it
notes in OUT.proc who owns /proc/PID (root when the process is not dumpable) and whether it could
open /proc/PID/mem. Prints "ready PID" once it listens; runs until killed."""
import os
import select
import socket
import struct
import sys

path, out = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
server.bind("\0" + path[1:] if path.startswith("@") else path)
server.listen(64)
print("ready %d" % os.getpid(), flush=True)
clients = []
while True:
    ready, _, _ = select.select([server] + clients, [], [])
    for sock in ready:
        if sock is server:
            clients.append(server.accept()[0])
            continue
        data, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 8))
        held = []  # a record's reply channel, held while /proc is looked at
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                held += struct.unpack("<%di" % (len(payload) // 4), payload[: len(payload) // 4 * 4])
        if not data:
            clients.remove(sock)
            sock.close()
            continue
        with open(out, "ab") as f:
            f.write(struct.pack("<I", len(data)) + data)
        if len(data) >= 16 and struct.unpack_from("<I", data, 12)[0] == 2:  # CP_MSG_CRASH
            pid = struct.unpack_from("<iII", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            try:
                owner = os.stat("/proc/%d/environ" % pid).st_uid
            except OSError as error:
                owner = "error %d" % error.errno
            try:
                os.close(os.open("/proc/%d/mem" % pid, os.O_RDONLY))
                mem = "opened"
            except OSError as error:
                mem = "error %d" % error.errno
            with open(out + ".proc", "a") as f:
                f.write("pid %d owner %s mem %s\n" % (pid, owner, mem))
        for fd in held:
            os.close(fd)
