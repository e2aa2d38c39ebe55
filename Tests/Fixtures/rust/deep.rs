// deep.rs: runaway recursion in optimised Rust (built with -O), for "every frame of an overflowed
// stack": the fault is taken inside a stack probe, and the report must reach the thread's start.
//   deep thread-small   a spawned thread "deep", 2 KiB frames: thousands of frames
//   deep thread-probe   a spawned thread "deep", 64 KiB frames: each prologue probes its frame
//                       page by page in a loop (sub rsp / store / cmp r11), and the fault is
//                       taken in that loop, before the frame is set up
//   deep main-probe     the main thread, 16 KiB frames: an unrolled inline probe
// Rust's own SIGSEGV handler names the overflow and aborts, as without crashport.

use std::hint::black_box;

macro_rules! recursion {
    ($name:ident, $size:expr) => {
        #[inline(never)]
        fn $name(depth: u64, seed: &mut [u8; 64]) -> u64 {
            let mut local = [0u8; $size];
            local[(depth as usize) % $size] = seed[(depth % 64) as usize];
            black_box(&mut local);
            if depth == u64::MAX {
                return 0;
            }
            // The result is used after the call returns, so the call is not a tail call.
            $name(depth + 1, black_box(&mut [local[7]; 64])) + local[3] as u64
        }
    };
}

recursion!(small_frames, 2048);
recursion!(probed_frames, 65536);
recursion!(unrolled_probes, 16384);

fn on_thread(body: fn() -> u64) {
    let worker = std::thread::Builder::new().name("deep".into()).spawn(body).expect("spawn");
    println!("{}", worker.join().unwrap_or(0));
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "thread-small" => on_thread(|| small_frames(0, &mut [0; 64])),
        "thread-probe" => on_thread(|| probed_frames(0, &mut [0; 64])),
        "main-probe" => println!("{}", unrolled_probes(0, &mut [0; 64])),
        _ => {
            eprintln!("usage: deep thread-small|thread-probe|main-probe");
            std::process::exit(2);
        }
    }
}
