// Inventory.swift: a Swift program that traps (an index out of range), for the coexistence
// test with the Swift runtime's own backtracer and for Swift symbol names in reports.
struct Inventory {
    var items: [String]

    @inline(never)
    func item(at index: Int) -> String {
        items[index]
    }
}

let inventory = Inventory(items: ["apples", "pears"])
print("looking up item \(CommandLine.arguments.count + 4)")
print(inventory.item(at: CommandLine.arguments.count + 4))
