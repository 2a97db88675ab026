package provider

// A full disk holds the streams; it does not end them. A store that can
// tell that its disk is about to refuse writes (persistence.SpaceChecker:
// a BadgerStore says so two memtables before its reserve) is asked before
// every chunk a stream takes; while it says so, the stream is held as
// StateFailed, kind FailureStore, with the store's "no space left: ..."
// as its error, and takes no chunk. No commit has been refused, so nothing
// is lost: the chunk waits in the queue (and, from a source that cannot
// replay, in the journal; its Deliver waits once the queue is full, which
// keeps a program's output in its pipe). Resume, once space is freed,
// carries on exactly where the stream stopped; while the disk is still
// short it holds the stream again at once. A commit the store refuses
// nevertheless (a disk filled faster than the headroom) ends the stream
// in :error as before.
