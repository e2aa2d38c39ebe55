// A Go program for GoTests: a fault in C code called through cgo, a nil dereference in Go code
// (a panic nobody recovers), and one that is recovered. Built by the test with `go build`.
//
//	ledger cgo        C code called from Go writes through NULL: Go's runtime prints
//	                  "fatal error: unexpected signal during runtime execution" and exits 2
//	ledger cgo-goroutine  the same from a goroutine, on another thread than the main one
//	ledger nil        a Go method on a nil pointer: "panic: runtime error: invalid memory
//	                  address or nil pointer dereference", exit 2
//	ledger recovered  the same panic, recovered: "recovered" on stdout, exit 0
//	ledger recovered-then-cgo  ten such panics recovered, then the cgo fault
package main

/*
// noinline and noclone: the crashing function keeps its own frame and its own name at -O2
// (cgo's default flags), as gdb shows it.
__attribute__((noinline, noclone)) void ledger_write_entry(int *entry, int amount) { *entry = amount; }
__attribute__((noinline, noclone)) int ledger_post(int amount) {
	ledger_write_entry((int *)0, amount);
	return amount + 1;
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
)

type ledger struct {
	balance int
}

//go:noinline
func (l *ledger) credit(amount int) { l.balance += amount }

//go:noinline
func postThroughC(amount int) int { return int(C.ledger_post(C.int(amount))) }

//go:noinline
func recoveredCredit() (message string) {
	defer func() { message = fmt.Sprint(recover()) }()
	var missing *ledger
	missing.credit(7)
	return "not reached"
}

// The main goroutine keeps the main thread (init runs on it), so every other goroutine runs on
// another thread.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ledger cgo|cgo-goroutine|nil|recovered|recovered-then-cgo")
		os.Exit(64)
	}
	switch os.Args[1] {
	case "cgo":
		fmt.Println(postThroughC(5))
	case "cgo-goroutine":
		done := make(chan int)
		go func() { done <- postThroughC(6) }()
		fmt.Println(<-done)
	case "nil":
		var missing *ledger
		missing.credit(5)
	case "recovered":
		fmt.Println("recovered:", recoveredCredit())
	case "recovered-then-cgo":
		for i := 0; i < 10; i++ {
			recoveredCredit()
		}
		fmt.Println(postThroughC(8))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(64)
	}
}
