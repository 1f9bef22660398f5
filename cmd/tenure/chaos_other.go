//go:build !unix

package main

// chaosCommands is empty where processes cannot be paused with SIGSTOP.
func chaosCommands() []*command { return nil }
