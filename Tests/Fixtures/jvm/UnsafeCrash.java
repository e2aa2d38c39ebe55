/*
 * UnsafeCrash.java: a JVM that dies in its own compiled code, with no native frame of the program's.
 *
 *   java UnsafeCrash [ROUNDS]   calls writeThrough ROUNDS times (default 200,000) on a scratch
 *                               long, so that C2 compiles it, then once with address 0
 *
 * sun.misc.Unsafe.putLong is an intrinsic: the compiled writeThrough stores through the address
 * itself, so the SIGSEGV's pc is in the JIT's code. HotSpot's handler writes its fatal-error log,
 * whose "Problematic frame" is `J <id> c2 UnsafeCrash.writeThrough(JI)V`.
 */
import java.lang.reflect.Field;
import sun.misc.Unsafe;

public class UnsafeCrash {
    static Unsafe unsafe;
    static long sink;

    static void writeThrough(long address, int round) {
        unsafe.putLong(address, round);
    }

    static void crash(int rounds) {
        long scratch = unsafe.allocateMemory(8);
        for (int i = 0; i < rounds; i++) writeThrough(scratch, i);
        writeThrough(0L, 42);
    }

    public static void main(String[] arguments) throws Exception {
        Field field = Unsafe.class.getDeclaredField("theUnsafe");
        field.setAccessible(true);
        unsafe = (Unsafe) field.get(null);
        crash(arguments.length > 0 ? Integer.parseInt(arguments[0]) : 200_000);
    }
}
