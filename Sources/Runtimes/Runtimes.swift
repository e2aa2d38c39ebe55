// Runtimes: the language runtimes inside a crashed process, read from outside it.
//
// A native unwind names the interpreter's C (`_PyEval_EvalFrameDefault`), a JIT's code as `?`,
// and the JVM's death as `abort`. The runtime itself knows better, and leaves it where an outside
// reader can find it: CPython's frames in its memory (PythonStackReader), a JIT's names in its
// perf map (PerfMap), the JVM's and Node's crash logs on disk (RuntimeCrashLogs). Each reader
// takes hostile bytes (memory and files the process's user controls), bounds what it reads and
// keeps, and returns ReportModel's RuntimeState values; LiveProcess calls them while the process
// is held, Reports places what they found.
