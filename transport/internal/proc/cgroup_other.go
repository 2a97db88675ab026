//go:build !linux

package proc

import (
	"log/slog"
	"os"
	"syscall"
)

// leaf is empty here: cgroups are Linux's, and a program is held by its
// keeper alone (keeper_unix.go).
type leaf struct{}

func (*leaf) keeperArg() string { return "-" }
func (*leaf) end() error        { return nil }
func (*leaf) remove() error     { return nil }

// childLeaf is nil: there are no cgroups on this OS.
func childLeaf(*slog.Logger) *leaf { return nil }

func dropCgroups(*slog.Logger, error) {}

func intoLeaf(*syscall.SysProcAttr, *leaf) (*os.File, error) { return nil, nil }

// joinLeaf does nothing: there are no cgroups on this OS.
func joinLeaf(string) (string, error) { return "", nil }

// killLeaf cannot kill: there are no cgroups on this OS.
func killLeaf(string) bool { return false }
