//go:build !cgo

package main

// Without cgo there is no library to build: this keeps `go build ./...`
// and `go vet ./...` working, and the tests skip.
func main() {}
