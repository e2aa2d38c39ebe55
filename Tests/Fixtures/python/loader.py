# A Python program that crashes in native code (Tests/EndToEndTests/PythonTests.swift): a row
# parser reads through a bad pointer with ctypes ("ctypes"), or calls the C extension crashext
# built by the test ("ext", its directory in CRASHPORT_TEST_EXT), on the main thread or on a
# worker thread ("thread"). A second thread waits in a known line, so the report's other thread
# has Python frames too. The lines named in the tests are marked.
import ctypes
import os
import sys
import threading


class Loader:
    def __init__(self, how):
        self.how = how

    def parse_row(self, row):
        if self.how == "ext":
            import crashext
            return crashext.write_record(row)  # line 19: the extension's call
        return ctypes.string_at(row)  # line 20: ctypes reads address 0x10


def idle(ready):
    ready.set()
    threading.Event().wait()  # line 25: the idle thread waits here


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "ctypes"
    where = sys.argv[2] if len(sys.argv) > 2 else "main"
    if how == "ext":
        sys.path.insert(0, os.environ["CRASHPORT_TEST_EXT"])
    ready = threading.Event()
    threading.Thread(target=idle, args=(ready,), name="idle", daemon=True).start()
    ready.wait()
    loader = Loader(how)
    if where == "thread":
        worker = threading.Thread(target=loader.parse_row, args=(16,), name="worker")
        worker.start()
        worker.join()
    else:
        loader.parse_row(16)  # line 42


main()
