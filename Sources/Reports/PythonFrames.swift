// PythonFrames: a CPython process's Python frames among its native ones, where the interpreter
// ran them, as pystack and py-spy's `--native` show them.
//
// Each C-level call of the interpreter's eval loop (`_PyEval_EvalFrameDefault`) runs a run of
// Python frames, the innermost up to and including the one marked `entry` (PythonFrame). So the
// runs, innermost first, go just above (inner to) the eval-loop frames, innermost first: the
// native frames keep their order and the eval frame stays, below the Python code it ran. A run
// left over (a native unwind that stopped before the outer eval frames, or an eval loop whose
// name was not found) goes after the native frames, outermost last, so no Python frame is lost;
// a note says so.
//
// A Python frame is the program's own (in_app) unless its file is the interpreter's: its
// standard library (…/lib/python3.11/…), an installed package (site-packages, dist-packages) or
// a frozen module (`<frozen importlib._bootstrap>`); `--in-app`/`--not-in-app` patterns match
// its file as they match a module's path.

import BoundedBytes
import ReportModel

enum PythonFrames {
    /// The eval loop's C function; GCC may split off a `.cold` part.
    static func isEvalLoop(_ function: String?) -> Bool {
        guard let function else { return false }
        return function == "_PyEval_EvalFrameDefault" || function.hasPrefix("_PyEval_EvalFrameDefault.")
    }

    /// Puts every thread's Python frames among its native frames (matched by thread id), and
    /// notes what could not be read or placed.
    static func place(_ stacks: PythonStacks, into event: inout Event) {
        var notes = stacks.notes.map { "Python \(stacks.version): \($0)" }
        var threads = event.threads ?? []
        for python in stacks.threads where !python.frames.isEmpty || python.problem != nil {
            guard let tid = python.threadID, let position = threads.firstIndex(where: { $0.tid == tid }) else {
                notes.append(
                    "Python \(stacks.version): a thread state (native id \(python.threadID.map { "\($0.rawValue)" } ?? "unknown")) matches no thread of the process; its \(python.frames.count) frame(s) are left out"
                )
                continue
            }
            let placed = interleave(native: threads[position].frames ?? [], python: python)
            threads[position].frames = placed.frames
            if python.holdsGIL { threads[position].holdsGIL = true }
            if placed.unplaced > 0 {
                notes.append(
                    "Python \(stacks.version): thread \(tid.rawValue): \(placed.unplaced) Python frame(s) ran in eval-loop frames the native unwind did not reach; they follow its frames"
                )
            }
            if let problem = python.problem {
                notes.append("Python \(stacks.version): thread \(tid.rawValue): \(problem)")
            }
        }
        event.threads = threads
        if !notes.isEmpty { event.notes = (event.notes ?? []) + notes }
    }

    /// `native` with `python`'s frames placed (see the file's comment), renumbered; `unplaced`:
    /// how many Python frames found no eval-loop frame.
    static func interleave(native: [FrameRecord], python: PythonThread) -> (frames: [FrameRecord], unplaced: Int) {
        var runs: [[FrameRecord]] = []
        var run: [FrameRecord] = []
        for frame in python.frames {
            run.append(record(frame))
            if frame.entry {
                runs.append(run)
                run = []
            }
        }
        if !run.isEmpty { runs.append(run) }
        var next = runs.makeIterator()
        var frames: [FrameRecord] = []
        frames.reserveCapacity(native.count + python.frames.count)
        for frame in native {
            if isEvalLoop(frame.function), let run = next.next() {
                frames += run
            }
            frames.append(frame)
        }
        var unplaced = 0
        while let run = next.next() {
            frames += run
            unplaced += run.count
        }
        for index in frames.indices { frames[index].index = index }
        return (frames, unplaced)
    }

    /// A Python frame as the report shows it: no pc, its source's file and line.
    static func record(_ frame: PythonFrame) -> FrameRecord {
        var record = FrameRecord(function: frame.function, file: frame.file, line: frame.line)
        record.language = FrameRecord.pythonLanguage
        if let qualified = frame.qualifiedName, qualified != frame.function { record.qualifiedName = qualified }
        return record
    }

    /// Files of the interpreter's own Python: its standard library, installed packages, frozen
    /// modules.
    static func isInterpreterFile(_ file: String) -> Bool {
        if file.hasPrefix("<frozen ") { return true }
        for marker in ["/site-packages/", "/dist-packages/"] where file.containsUTF8(marker) { return true }
        // …/lib/python3.11/… and …/lib64/python3.11/…: the standard library of any installation.
        for marker in ["/lib/python", "/lib64/python"] {
            guard let range = file.firstUTF8Range(of: marker) else { continue }
            if file[range.upperBound...].first?.isNumber == true { return true }
        }
        return false
    }
}
