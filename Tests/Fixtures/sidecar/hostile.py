#!/usr/bin/env python3
"""hostile.py SOCKET: a hostile client of `crashport watch` (a real process on the real socket):
garbage, a wrong version, a wrong size, a HELLO then nothing, crash records naming another
pid, carrying a pipe instead of a socket, carrying ten descriptors, one whose verdict is never
read, and a thousand idle connections. Prints "ready" when all of it is sent, then holds every
connection open until a line arrives on stdin."""
import os, socket, struct, sys

MAGIC, VERSION = 0x54525043, 3
HELLO, CRASH = 1, 2
FIXED = 1784  # offsetof(cp_crash, stack)
path = sys.argv[1]
held = []


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    held.append(s)
    return s


def send(s, data, fds=()):
    try:
        if fds:
            s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
        else:
            s.send(data)
    except OSError:
        pass  # the sidecar may have closed it already: that is the point


def header(size, kind, version=VERSION):
    return struct.pack("<4I", MAGIC, version, size, kind)


def crash_record(pid, tid):
    body = bytearray(FIXED)
    body[0:16] = header(FIXED, CRASH)
    struct.pack_into("<IIii", body, 16, pid, tid, 11, 1)
    struct.pack_into("<I", body, 44, 62)  # arch x86_64
    return bytes(body)


send(connect(), b"garbage, not a crashport message")
send(connect(), header(16, HELLO, version=99))
send(connect(), header(1000, HELLO))
hello = bytearray(80)
hello[0:16] = header(80, HELLO)
struct.pack_into("<I", hello, 16, os.getpid())
send(connect(), bytes(hello))  # then nothing, held open
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
send(connect(), crash_record(1, 1), [theirs.fileno()])  # names another pid
read_end, write_end = os.pipe()
send(connect(), crash_record(os.getpid(), os.getpid()), [read_end])  # a pipe, not a socket
many = [os.open("/dev/null", os.O_RDONLY) for _ in range(10)]
send(connect(), crash_record(os.getpid(), os.getpid()), many)  # ten descriptors
send(connect(), crash_record(os.getpid(), 999999), [theirs.fileno()])  # a tid not ours
for _ in range(1000):
    try:
        connect()
    except OSError:
        break
print("ready", len(held), flush=True)
sys.stdin.readline()
