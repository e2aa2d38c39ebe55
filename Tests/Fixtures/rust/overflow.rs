// overflow.rs: runaway recursion in Rust until the stack overflows, for the stack-overflow
// report under Rust's own SIGSEGV handler (which recognises its guard page, prints "thread
// '…' has overflowed its stack" and "fatal runtime error: stack overflow" and aborts).
//   overflow main     recurses on the main thread
//   overflow thread   recurses on a spawned thread named "worker"
// Built with -C opt-level=0 so every call keeps its frame (no loop, no tail call).

use std::hint::black_box;
use std::thread;

/// Uses a little stack per call and reads it after the call returns, so no frame is elided.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut pad = [0u8; 128];
    pad[(depth % 128) as usize] = depth as u8;
    let pad = black_box(pad);
    if black_box(depth) == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + pad[0] as u64
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "main" => {
            black_box(recurse(0));
        }
        "thread" => {
            let worker = thread::Builder::new()
                .name("worker".into())
                .spawn(|| black_box(recurse(0)))
                .expect("spawn");
            let _ = worker.join();
        }
        _ => {
            eprintln!("usage: overflow main|thread");
            std::process::exit(2);
        }
    }
}
