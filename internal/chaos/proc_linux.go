package chaos

import "syscall"

// procAttr makes a child die with the runner: a run that is itself killed
// leaves no etcd, coordinator or worker behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
