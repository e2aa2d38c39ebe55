// A Rust panic deep in a generic method on a thread (Tests/EndToEndTests/CrashLogTests.swift),
// built with -C panic=abort so the panic aborts the process; with "unwrap", a None unwrapped in
// main (a message that is a literal of the standard library, not a formatted one).
struct Ledger<T>(T);

impl<T: std::fmt::Debug> Ledger<T> {
    #[inline(never)]
    fn balance(&self, depth: u32) -> u32 {
        if depth == 0 {
            panic!("the ledger is unbalanced: {:?}", self.0)
        }
        self.balance(depth - 1) + 1
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("unwrap") {
        let missing: Option<u8> = None;
        missing.unwrap();
    }
    let ledger = Ledger(vec![3, -1]);
    std::thread::Builder::new()
        .name("auditor".into())
        .spawn(move || ledger.balance(5))
        .unwrap()
        .join()
        .unwrap();
}
