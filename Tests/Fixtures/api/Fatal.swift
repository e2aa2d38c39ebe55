// Fatal.swift: a Swift program that stops with fatalError, whose message the Swift runtime
// keeps where crashport reads it (Tests/EndToEndTests/AppAPITests.swift).
@inline(never)
func balance(_ ledger: [Int]) -> Int {
    let total = ledger.reduce(0, +)
    if total != 0 { fatalError("the ledger is unbalanced by \(total)") }
    return total
}

print(balance([3, -1, CommandLine.arguments.count]))
