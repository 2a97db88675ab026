package stream

import (
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// The metadata builder reuses boxed values between chunks; every map must
// still hold exactly its own chunk's values, and a map kept from an earlier
// chunk (as a processor may keep it in its state) must not change.
func TestMetaBuilderMapsAreIndependent(t *testing.T) {
	mb := NewMetaBuilder(rtfs.String("s-1"), rtfs.String("ep"))
	t0 := time.UnixMilli(1725912345678)
	chunks := []transport.Chunk{
		{ID: "a", Event: "tick", ReceivedAt: t0},
		{ID: "a", Event: "tick", ReceivedAt: t0},                             // everything repeats
		{ID: "b", Event: "", ReceivedAt: t0.Add(time.Millisecond)},           // no event: nil
		{ID: "", Event: "tock", ReceivedAt: t0.Add(time.Millisecond)},        // no id
		{ID: "c", Event: "tock", ReceivedAt: t0.Add(400 * time.Microsecond)}, // earlier ms again
	}
	var got []rtfs.Value
	for i, c := range chunks {
		got = append(got, mb.Build(&Item{Seq: int64(i) + 1000, Event: c.Event, ID: c.ID, Received: c.ReceivedAt}))
	}
	for i, c := range chunks {
		var event rtfs.Value = rtfs.Nil
		if c.Event != "" {
			event = rtfs.String(c.Event)
		}
		want := rtfs.MapOf(
			rtfs.Keyword("stream-id"), rtfs.String("s-1"),
			rtfs.Keyword("seq"), rtfs.Int(int64(i)+1001), // item.seq counts from 0, :seq from 1
			rtfs.Keyword("event"), event,
			rtfs.Keyword("id"), rtfs.String(c.ID),
			rtfs.Keyword("received-at-ms"), rtfs.Int(c.ReceivedAt.UnixMilli()),
			rtfs.Keyword("endpoint"), rtfs.String("ep"),
		)
		if !rtfs.Equal(got[i], want) {
			t.Errorf("chunk %d: metadata %v, want %v", i, got[i], want)
		}
	}
	if got[0] == got[1] {
		t.Error("two chunks share one metadata map")
	}
}
