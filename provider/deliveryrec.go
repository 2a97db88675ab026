package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
)

// A stream's delivery record keeps what its start said of its outputs'
// delivery (:delivery, :milestones) and what it made of them since: its
// progress and the outputs its subscribers dropped, by priority
// (docs/durability.md). It is written with the stream's first records when
// the start set either key, and then with a progress record whenever the
// progress or the drops changed; a stream that never used them has none.

// deliveryPrefix is the prefix of delivery records, "delivery/<stream id>".
// They live outside "stream/" so that a release that does not know them
// (and refuses unknown records of a stream) recovers the stream all the
// same, without its progress.
const deliveryPrefix = "delivery/"

func deliveryKey(id string) []byte { return []byte(deliveryPrefix + id) }

// A deliveryRecord is a stream's delivery record.
type deliveryRecord struct {
	delivery   *Delivery // the start's :delivery; nil: none
	milestones []Milestone
	progress   progress
	outDropped [3]int64 // by Priority
}

func (r *deliveryRecord) encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 64+32*len(r.milestones))}
	e.Bool(r.delivery != nil)
	if d := r.delivery; d != nil {
		for _, t := range [...]Throttle{d.Normal, d.Low} {
			e.Int(int64(t.Interval))
			e.Int(int64(t.MaxBatch))
		}
	}
	e.Uint(uint64(len(r.milestones)))
	for _, m := range r.milestones {
		e.Str(m.ID)
		e.Float(m.Weight)
		e.Int(int64(m.Estimated))
	}
	pr := &r.progress
	e.Bool(pr.known)
	e.Float(pr.done)
	e.Float(pr.total)
	e.Str(pr.message)
	e.Str(pr.milestone)
	for i := range r.milestones {
		e.Bool(i < len(pr.reached) && pr.reached[i])
	}
	at := int64(0)
	if !pr.at.IsZero() {
		at = pr.at.UnixMilli()
	}
	e.Int(at)
	for _, n := range r.outDropped {
		e.Int(n)
	}
	return persistence.EncodeRecord(kindDelivery, recordVersion, e.B)
}

func (r *deliveryRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindDelivery, func(d *bytecodec.Decoder) {
		if d.Bool("has delivery") {
			var ts [2]Throttle
			for i := range ts {
				ts[i] = Throttle{Interval: time.Duration(d.Int("interval")), MaxBatch: int(d.Int("batch"))}
			}
			r.delivery = &Delivery{Normal: ts[0], Low: ts[1]}
		}
		n := d.Uint("milestone count")
		if n > maxMilestones {
			d.Fail("milestone count", fmt.Errorf("%d milestones, at most %d", n, maxMilestones))
			return
		}
		for i := uint64(0); i < n && d.Err() == nil; i++ {
			r.milestones = append(r.milestones, Milestone{ID: d.Str("milestone id"), Weight: d.Float("milestone weight"),
				Estimated: time.Duration(d.Int("milestone estimate"))})
		}
		pr := &r.progress
		pr.known = d.Bool("progress known")
		pr.done, pr.total = d.Float("done"), d.Float("total")
		pr.message, pr.milestone = d.Str("message"), d.Str("milestone")
		if n > 0 {
			pr.reached = make([]bool, n)
			for i := range pr.reached {
				pr.reached[i] = d.Bool("milestone reached")
			}
		}
		if at := d.Int("progress time"); at != 0 {
			pr.at = time.UnixMilli(at)
		}
		for i := range r.outDropped {
			r.outDropped[i] = d.Int("dropped outputs")
		}
	})
}

// loadDelivery reads stream id's delivery record; nil when the store has
// none (a stream that used neither, or stored by an older release).
func loadDelivery(ctx context.Context, st persistence.Store, id string) (*deliveryRecord, error) {
	key := deliveryKey(id)
	data, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delivery record: %w", err)
	}
	r := &deliveryRecord{}
	if err := r.decode(key, data); err != nil {
		return nil, err
	}
	return r, nil
}

// deliveryMark is what a stream's last delivery record held of what
// changes: its progress's version and the dropped outputs. Guarded by the
// stream's mu.
type deliveryMark struct {
	written bool
	version int64
	dropped [3]int64
}

// deliverySnapshotLocked returns the stream's delivery record when it must
// be written: the stream's start set :delivery or :milestones and none is
// written yet, or its progress or drops changed since the last one. Called
// with the stream's mu held; it costs three atomic loads otherwise.
func (st *streamStore) deliverySnapshotLocked() *deliveryRecord {
	s := st.s
	var dropped [3]int64
	for p := range dropped {
		dropped[p] = s.out.dropped[p].Load()
	}
	m := &st.delivered
	declared := s.def.delivery != nil || len(s.def.milestones) > 0
	if m.written && m.version == s.progressVer && m.dropped == dropped {
		return nil
	}
	if !m.written && !declared && !s.progress.known && dropped == [3]int64{} {
		return nil
	}
	*m = deliveryMark{written: true, version: s.progressVer, dropped: dropped}
	// The progress's reached slice is replaced when it changes, never
	// changed in place: sharing it is safe.
	return &deliveryRecord{delivery: s.def.delivery, milestones: s.def.milestones, progress: s.progress, outDropped: dropped}
}

// restoreDelivery gives a recovered stream the progress and drops of its
// delivery record (nil: none).
func (st *streamStore) restoreDelivery(r *deliveryRecord) {
	if r == nil {
		return
	}
	s := st.s
	if r.progress.known {
		s.progress = r.progress
	}
	for p, n := range r.outDropped {
		s.out.dropped[p].Store(n)
	}
	st.delivered = deliveryMark{written: true, version: s.progressVer, dropped: r.outDropped}
}
