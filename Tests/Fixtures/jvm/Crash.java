/*
 * Crash.java: a JVM that uses SIGSEGV for its own work, then crashes in native code.
 *
 *   java Crash npe [COUNT]          throws and catches COUNT (default 100,000)
 *                                    NullPointerExceptions, prints "caught COUNT", exits 0
 *   java Crash jni LIBRARY [COUNT]  the same, then System.load(LIBRARY) and a JNI call into
 *                                    Java_Crash_crash (crash.c), which writes through NULL
 *
 * The NullPointerExceptions are implicit null checks: a virtual call on a null field. Neither
 * HotSpot's interpreter nor its compilers test the receiver; they load its class and let the
 * load fault, and the JVM's SIGSEGV handler turns the fault into the exception. So every
 * iteration (until C2 gives up on the trapping site and recompiles it with an explicit test) is
 * a SIGSEGV the JVM's handler recovers from, and under crashport none may be reported.
 */
public class Crash {
    static final class Box {
        int value = 1;

        int get() {
            return value;
        }
    }

    /** Never assigned: null, and the JIT cannot prove it. */
    static Box nothing;

    static native void crash();

    static int npe(int count) {
        int caught = 0;
        int sum = 0;
        for (int i = 0; i < count; i++) {
            try {
                sum += nothing.get();
            } catch (NullPointerException expected) {
                caught++;
            }
        }
        return caught + sum;
    }

    public static void main(String[] arguments) {
        String mode = arguments.length > 0 ? arguments[0] : "npe";
        int countIndex = mode.equals("jni") ? 2 : 1;
        int count = arguments.length > countIndex ? Integer.parseInt(arguments[countIndex]) : 100_000;
        System.out.println("caught " + npe(count));
        System.out.flush();
        if (mode.equals("jni")) {
            System.load(arguments[1]);
            crash();
            System.out.println("not reached");
        }
    }
}
