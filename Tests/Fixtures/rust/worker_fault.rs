// A Rust service's worker thread that faults without panicking (Tests/EndToEndTests/
// CrashLogTests.swift): it writes through a bad pointer ("segv", the default) or calls
// std::process::abort() itself ("abort"). Every thread std::thread starts runs under
// std::panicking::catch_unwind, so the panic machinery is on its stack below the fault; the
// report must still say SIGSEGV (or a plain abort), not "panicked".
use std::ptr;

#[inline(never)]
fn apply_update(slot: *mut u64, value: u64, abort: bool) {
    if abort {
        std::process::abort();
    }
    unsafe { ptr::write_volatile(slot, value) };
}

fn main() {
    let abort = std::env::args().nth(1).as_deref() == Some("abort");
    let bad: usize = 0x10;
    std::thread::Builder::new()
        .name("updater".into())
        .spawn(move || apply_update(bad as *mut u64, 42, abort))
        .unwrap()
        .join()
        .unwrap();
}
