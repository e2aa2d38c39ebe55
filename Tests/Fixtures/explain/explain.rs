// explain.rs: explain.c's faults in Rust (issue 49), through raw pointers and libc's malloc and
// free, with Rust's kinds of values: i32, a fieldless enum, bool, &str, a raw struct pointer
// and a reference, a [u8; N] array, f64. `explain MODE` dies the way MODE names (the modes are
// explain.c's), in a function called through main -> explain::run_mode -> (explain::fill_order
// ->) the faulting function.
//
// Built with -g at opt-level 0 and 2, -C debug-assertions=off (at opt-level 0 they would turn
// the NULL dereference into a "null pointer dereference" panic, the checks of raw pointer
// reads being debug assertions), and for stack-smash with -Z stack-protector=strong. Every
// bad value goes through black_box, so the optimiser cannot see it is NULL (or a literal) and
// the fault stays the one named. The memory is libc's own malloc and free, declared here: a
// double free or a use after free through Box would be undefined behaviour without the fault.
//
// use-after-free follows a freed node's `next`, as explain.c: glibc's free-list link is there
// now, and it points nowhere.

#![allow(unconditional_recursion)]

use std::hint::black_box;

extern "C" {
    fn malloc(size: usize) -> *mut u8;
    fn free(pointer: *mut u8);
}

#[derive(Clone, Copy)]
#[allow(dead_code)]
pub enum Color {
    Red,
    Green,
    Blue,
}

/// repr(C): sku at offset 8, as in explain.c.
#[repr(C)]
pub struct Order {
    id: i32,
    sku: i64,
    price: f64,
    name: &'static str,
}

type Pricing = unsafe extern "C" fn(*const Order, f64) -> i64;
type Handler = unsafe extern "C" fn(i32) -> i32;

#[inline(never)]
fn read_sku(o: *const Order, quantity: i32, color: Color, urgent: bool) -> i64 {
    let mut tag = *b"sku\0\0\0\0\0";
    let base = quantity as i64 * 100 + color as i64;
    tag[3] = if urgent { b'!' } else { b'.' };
    black_box(&tag);
    unsafe { (*o).sku + base } // o is NULL: reads 8 bytes at 0x8
}

#[inline(never)]
fn fill_order(found: *const Order, fallback: &Order, label: &str, price: f64, color: Color, urgent: bool) -> i64 {
    let quantity = label.len() as i32;
    let code = *b"AB\0\0";
    let total = price * quantity as f64;
    let mut sku = 0;
    sku += read_sku(found, quantity, color, urgent);
    black_box((code, total, fallback.id));
    sku
}

#[inline(never)]
fn apply_pricing(order: &Order, callback: Pricing, discount: f64, rounds: i32, color: Color) -> i64 {
    let unit = *b"EUR\0";
    let ok = rounds > 0;
    let mut cents = 0;
    cents += unsafe { callback(order, discount) }; // callback is NULL: the call goes to 0
    black_box((unit, ok));
    cents * rounds as i64 + color as i64
}

#[inline(never)]
fn stamp_label(label: *mut u8, index: usize, mark: u8, upper: bool, color: Color) {
    let prefix = *b"lbl-\0\0";
    let weight = 0.5 * index as f64;
    unsafe { *label.add(index) = if upper { mark - 32 } else { mark } } // label is a string literal
    black_box((prefix, weight, color as i32));
}

#[inline(never)]
fn recurse(order: &Order, label: &str, step: usize, scale: f64, color: Color) -> i32 {
    // The same values in every frame, whatever the depth the stack ran out at.
    let pad = black_box([label.as_bytes()[0]; 64]);
    let mut below = 0;
    below += recurse(order, label, step, scale, color); // not a tail call: pad is read after
    below + pad[step] as i32 + scale as i32 + order.id + color as i32
}

#[inline(never)]
fn release_twice(buffer: *mut u8, size: usize, times: i32, clear: bool, color: Color) {
    let note = *b"twice\0\0\0";
    let ratio = size as f64 / 4.0;
    if clear {
        unsafe { std::ptr::write_bytes(buffer, 0, size) }
    }
    for _ in 0..times {
        unsafe { free(black_box(buffer)) } // the second free aborts
    }
    black_box((note, ratio, color as i32));
}

#[inline(never)]
fn copy_name(name: &str, length: usize, shout: bool, color: Color, scale: f64) -> usize {
    let mut buffer = [0u8; 8];
    let fill = name.as_bytes()[0] - if shout { 32 } else { 0 };
    // length is 512: LLVM places the canary where it likes (at opt-level 0 some 200 bytes of
    // other locals lie between the array and it), so the overflow runs far enough to cover it
    // at every level, over the frames above too (they never run again: the canary check
    // calls __stack_chk_fail, which aborts). One memset: no loop state on the stack to clobber.
    unsafe { std::ptr::write_bytes(black_box(buffer.as_mut_ptr()), fill, length) }
    black_box((&buffer, color as i32, scale));
    length
}

#[inline(never)]
fn jump_to(address: usize, argument: i32, reason: &str, log: bool, color: Color) -> i32 {
    let code = *b"JMP\0";
    let factor = 2.5;
    let target: Handler = unsafe { std::mem::transmute::<usize, Handler>(black_box(address)) };
    let mut result = 0;
    result += unsafe { target(argument) }; // nothing is mapped at address
    black_box((code, factor, reason, log, color as i32));
    result
}

#[repr(C)]
pub struct Node {
    next: *mut Node, // offset 0: glibc's free-list link once freed
    count: i64,      // offset 8
}

#[inline(never)]
fn read_stock(stock: *const Node, slot: usize, warehouse: &str, strict: bool, color: Color) -> i32 {
    let zone = *b"B7\0\0";
    let fill = slot as f64 * 0.25;
    let mut count = 0;
    count += unsafe { (*(*stock).next).count } as i32; // stock was freed: its next is a free-list link
    black_box((zone, fill, warehouse, strict, color as i32));
    count
}

#[inline(never)]
fn find_pricing(name: &str) -> Pricing {
    black_box(name);
    unsafe { std::mem::transmute::<usize, Pricing>(black_box(0usize)) }
}

#[inline(never)]
fn find_order(orders: &[Order], id: i32) -> *const Order {
    orders.iter().find(|order| order.id == black_box(id)).map_or(std::ptr::null(), |order| order as *const Order)
}

#[inline(never)]
fn run_mode(mode: &str, orders: &[Order], label: &str, price: f64, color: Color, urgent: bool) -> i32 {
    let initial = [mode.as_bytes()[0], mode.as_bytes()[1], 0, 0];
    let mut result: i64 = 0;
    match mode {
        "null-field" => result = fill_order(find_order(orders, 99), &orders[0], label, price, color, urgent),
        "null-call" => result = apply_pricing(&orders[0], find_pricing(label), 0.25, 3, color),
        "literal-write" => stamp_label(black_box("literal".as_ptr() as *mut u8), 2, b'x', urgent, color),
        "stack-overflow" => result = recurse(&orders[1], label, 5, 1.5, color) as i64,
        "double-free" => release_twice(unsafe { malloc(48) }, 48, 2, urgent, color),
        "stack-smash" => result = copy_name(label, 512, urgent, color, 0.75) as i64,
        "wild-jump" => result = jump_to(0x414141414140, orders.len() as i32, label, urgent, color) as i64,
        "use-after-free" => {
            let stock = unsafe { malloc(std::mem::size_of::<Node>()) } as *mut Node;
            let second = unsafe { malloc(std::mem::size_of::<Node>()) } as *mut Node;
            if stock.is_null() || second.is_null() {
                return 3;
            }
            unsafe {
                second.write(Node { next: std::ptr::null_mut(), count: orders.len() as i64 });
                stock.write(Node { next: second, count: orders.len() as i64 });
                free(second as *mut u8);
                free(stock as *mut u8);
            }
            result = read_stock(black_box(stock), 7, label, urgent, color) as i64;
        }
        _ => {
            eprintln!("unknown mode {mode}");
            return 2;
        }
    }
    black_box((initial, result));
    0
}

fn main() {
    let Some(mode) = std::env::args().nth(1) else {
        eprintln!("usage: explain MODE");
        std::process::exit(2);
    };
    let orders = [
        Order { id: 7, sku: 1234, price: 12.5, name: "widget" },
        Order { id: 8, sku: 5678, price: 3.25, name: "gadget" },
    ];
    std::process::exit(run_mode(&mode, &orders, "paid", 12.5, Color::Green, true));
}
