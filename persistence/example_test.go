package persistence_test

import (
	"context"
	"fmt"

	"github.com/rtfshost/rtfshost/persistence"
)

// A stream worker commits, per processed chunk, its progress record (state
// and cursor in one key) and the delete of the chunk's journal entry, as one
// batch. Submit does not wait; Commit waits, for example before an
// acknowledgement leaves the host.
func ExampleCommitter() {
	ctx := context.Background()
	store := persistence.NewMemStore() // persistence.OpenBadger(dir, opts) on disk
	defer store.Close()
	c := persistence.NewCommitter(store, persistence.CommitterOptions{})
	defer c.Close()

	const kindProgress persistence.RecordKind = 1
	var b persistence.Batch
	for seq := 1; seq <= 3; seq++ {
		b.Reset()
		progress := fmt.Appendf(nil, "state=%d cursor=%d", seq*10, seq)
		b.Put([]byte("stream/s1/progress"), persistence.EncodeRecord(kindProgress, 1, progress))
		b.Delete(fmt.Appendf(nil, "stream/s1/journal/%d", seq))
		err := c.Submit(ctx, &b, func(err error) {
			if err != nil {
				fmt.Println("put the stream in :error:", err)
			}
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		fmt.Println(err)
	}

	key := []byte("stream/s1/progress")
	rec, err := store.Get(ctx, key)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, payload, err := persistence.DecodeRecord(key, rec, kindProgress, 1)
	fmt.Printf("%s %v\n", payload, err)
	// How many store commits the three batches took depends on timing: one
	// when they arrived within MaxDelay of each other, with the two older
	// progress records skipped.
	st := c.Stats()
	fmt.Printf("batches=%d failed=%d\n", st.Batches, st.Failed)
	// Output:
	// state=30 cursor=3 <nil>
	// batches=3 failed=0
}
