// Warehouse.swift: two distinct Swift bugs in async code, for the crash-signature tests: an
// index out of range in `Warehouse.stock(at:)` and a nil dictionary value force-unwrapped in
// `Warehouse.price(of:)`. Built at -Onone, -O, and -O with UNRELATED defined.
#if UNRELATED
@inline(never)
func checksumBanner(_ text: String) -> UInt32 {
    text.utf8.reduce(0) { $0 &* 31 &+ UInt32($1) }
}
#endif

struct Warehouse {
    var shelves: [Int]
    var prices: [String: Int]

    @inline(never)
    func stock(at shelf: Int) -> Int {
        shelves[shelf]
    }

    @inline(never)
    func price(of item: String) -> Int {
        prices[item]!
    }
}

@inline(never)
func audit(_ warehouse: Warehouse, mode: String) async -> Int {
    await Task.yield()
    if mode == "stock" { return warehouse.stock(at: CommandLine.arguments.count + 5) }
    if mode == "price" { return warehouse.price(of: "saffron" + String(CommandLine.arguments.count)) }
    return 0
}

#if UNRELATED
print("banner \(checksumBanner("crashport"))")
#endif
let mode = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ""
let warehouse = Warehouse(shelves: [3, 1, 4], prices: ["tea": 4])
print(await audit(warehouse, mode: mode))
