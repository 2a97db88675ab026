package host

// ResumedRunning returns how many of the programs that Recover resumed are
// still running, those parked on an await included (Parked counts those).
// A command that resumed only some streams uses both to tell when the
// programs left wait on streams nothing runs. Safe for concurrent use.
func (h *Host) ResumedRunning() int {
	h.programs.mu.Lock()
	defer h.programs.mu.Unlock()
	return h.programs.n
}
