#!/usr/bin/env python3
"""wild-record.py SOCKET: a client of `crashport watch` that says HELLO, then sends a CRASH record
about its own live process whose values are all legal on the wire and absurd as a crash:
SIGABRT, rsp = 2^64-1, and a 256-byte stack copy that starts at address 0 (issue 30, attack 3).
The record names the client itself, so every check of the sidecar (pid from the socket's
credentials, tid in /proc/PID/task, the uid) passes and the capture runs on it. Prints
"verdict" when the sidecar answers on the reply socket, "closed" when the reply socket ends
without an answer (the sidecar died), "timeout" when nothing comes in 30 s."""
import os, socket, struct, sys

MAGIC, VERSION = 0x54525043, 3
HELLO, CRASH = 1, 2
SIGABRT, SI_TKILL = 6, -6
ARCH_X86_64 = 62
HELLO_SIZE = 88  # sizeof(cp_hello)
FIXED = 1784  # offsetof(cp_crash, stack)
REGS, RIP, RSP = 88, 16, 19  # offsetof(cp_crash, regs); user_regs_struct indexes
STACK_START, STACK_SIZE = 1768, 1776  # offsetof(cp_crash, stack_start), (…, stack_size)
path = sys.argv[1]


def header(size, kind):
    return struct.pack("<4I", MAGIC, VERSION, size, kind)


def wild_record(pid, stack):
    body = bytearray(FIXED + len(stack))
    body[0:16] = header(len(body), CRASH)
    # pid, tid, signo, code, errno, sender_pid, sender_uid, arch
    struct.pack_into("<IIiiiiII", body, 16, pid, pid, SIGABRT, SI_TKILL, 0, pid, os.getuid(), ARCH_X86_64)
    struct.pack_into("<Q", body, REGS + RIP * 8, 0x401000)
    struct.pack_into("<Q", body, REGS + RSP * 8, 0xFFFF_FFFF_FFFF_FFFF)
    struct.pack_into("<QI", body, STACK_START, 0, len(stack))
    body[FIXED:] = stack
    return bytes(body)


connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
connection.connect(path)
hello = bytearray(HELLO_SIZE)
hello[0:16] = header(HELLO_SIZE, HELLO)
struct.pack_into("<I", hello, 16, os.getpid())
connection.send(bytes(hello))
connection.settimeout(30)
connection.recv(4096)  # the HELLO reply
# A stack copy of words that look like (pointer, length) pairs and small numbers, as a real
# abort's stack holds: what the stack-string scan reads.
stack = b"".join(struct.pack("<QQ", 0x10 * i, 16) for i in range(16))
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
connection.sendmsg([wild_record(os.getpid(), stack)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", theirs.fileno()))])
theirs.close()
ours.settimeout(30)
try:
    answer = ours.recv(4096)
    print("verdict" if answer else "closed", flush=True)
except socket.timeout:
    print("timeout", flush=True)
except OSError as error:
    print("closed", error, flush=True)
