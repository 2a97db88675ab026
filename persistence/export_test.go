package persistence

// SetFreeSpace makes s see free bytes on its filesystem from its next
// commit on (for the tests of package persistence_test).
func SetFreeSpace(s *BadgerStore, free int64) { setFreeSpace(s, free) }
