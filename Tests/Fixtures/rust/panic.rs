// A Rust panic deep in a generic method on a thread (Tests/EndToEndTests/CrashLogTests.swift),
// built with -C panic=abort so the panic aborts the process.
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
    let ledger = Ledger(vec![3, -1]);
    std::thread::Builder::new()
        .name("auditor".into())
        .spawn(move || ledger.balance(5))
        .unwrap()
        .join()
        .unwrap();
}
