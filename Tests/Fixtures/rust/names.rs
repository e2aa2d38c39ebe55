// Symbols for DemanglerTests, built with each of rustc's symbol manglings (legacy and v0): a
// closure, a method of a generic impl (Wrapper<T>::apply) and a trait impl (<Foo as Display>::fmt).
use std::fmt;

pub struct Wrapper<T>(pub T);

impl<T: Copy + Into<u64>> Wrapper<T> {
    #[inline(never)]
    pub fn apply(&self) -> u64 { self.0.into() * 3 }
}

pub struct Foo(pub u32);

impl fmt::Display for Foo {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "Foo({})", self.0) }
}

fn main() {
    let w = Wrapper(7u32);
    let add = |x: u64| x + w.apply();
    println!("{} {}", add(std::env::args().count() as u64), Foo(3));
}
