//go:build unix && !linux

package chaos

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }
