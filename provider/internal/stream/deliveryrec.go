package stream

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

// DeliveryPrefix is the prefix of delivery records, "delivery/<stream id>".
// They live outside "stream/" so that a release that does not know them
// (and refuses unknown records of a stream) recovers the stream all the
// same, without its progress.
const DeliveryPrefix = "delivery/"

func DeliveryKey(id string) []byte { return []byte(DeliveryPrefix + id) }

// A DeliveryRecord is a stream's delivery record.
type DeliveryRecord struct {
	Delivery   *Delivery // the start's :delivery; nil: none
	Milestones []Milestone
	Progress   Progress
	OutDropped [3]int64 // by Priority
}

func (r *DeliveryRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 64+32*len(r.Milestones))}
	e.Bool(r.Delivery != nil)
	if d := r.Delivery; d != nil {
		for _, t := range [...]Throttle{d.Normal, d.Low} {
			e.Int(int64(t.Interval))
			e.Int(int64(t.MaxBatch))
		}
	}
	e.Uint(uint64(len(r.Milestones)))
	for _, m := range r.Milestones {
		e.Str(m.ID)
		e.Float(m.Weight)
		e.Int(int64(m.Estimated))
	}
	pr := &r.Progress
	e.Bool(pr.Known)
	e.Float(pr.Done)
	e.Float(pr.Total)
	e.Str(pr.Message)
	e.Str(pr.Milestone)
	for i := range r.Milestones {
		e.Bool(i < len(pr.Reached) && pr.Reached[i])
	}
	at := int64(0)
	if !pr.At.IsZero() {
		at = pr.At.UnixMilli()
	}
	e.Int(at)
	for _, n := range r.OutDropped {
		e.Int(n)
	}
	return persistence.EncodeRecord(KindDelivery, RecordVersion, e.B)
}

func (r *DeliveryRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, KindDelivery, func(d *bytecodec.Decoder) {
		if d.Bool("has delivery") {
			var ts [2]Throttle
			for i := range ts {
				ts[i] = Throttle{Interval: time.Duration(d.Int("interval")), MaxBatch: int(d.Int("batch"))}
			}
			r.Delivery = &Delivery{Normal: ts[0], Low: ts[1]}
		}
		n := d.Uint("milestone count")
		if n > maxMilestones {
			d.Fail("milestone count", fmt.Errorf("%d milestones, at most %d", n, maxMilestones))
			return
		}
		for i := uint64(0); i < n && d.Err() == nil; i++ {
			r.Milestones = append(r.Milestones, Milestone{ID: d.Str("milestone id"), Weight: d.Float("milestone weight"),
				Estimated: time.Duration(d.Int("milestone estimate"))})
		}
		pr := &r.Progress
		pr.Known = d.Bool("progress known")
		pr.Done, pr.Total = d.Float("done"), d.Float("total")
		pr.Message, pr.Milestone = d.Str("message"), d.Str("milestone")
		if n > 0 {
			pr.Reached = make([]bool, n)
			for i := range pr.Reached {
				pr.Reached[i] = d.Bool("milestone reached")
			}
		}
		if at := d.Int("progress time"); at != 0 {
			pr.At = time.UnixMilli(at)
		}
		for i := range r.OutDropped {
			r.OutDropped[i] = d.Int("dropped outputs")
		}
	})
}

// LoadDelivery reads stream id's delivery record; nil when the store has
// none (a stream that used neither, or stored by an older release).
func LoadDelivery(ctx context.Context, st persistence.Store, id string) (*DeliveryRecord, error) {
	key := DeliveryKey(id)
	data, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("delivery record: %w", err)
	}
	r := &DeliveryRecord{}
	if err := r.Decode(key, data); err != nil {
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
func (st *StreamStore) deliverySnapshotLocked() *DeliveryRecord {
	s := st.s
	var dropped [3]int64
	for p := range dropped {
		dropped[p] = s.Out.dropped[p].Load()
	}
	m := &st.delivered
	declared := s.Def.Delivery != nil || len(s.Def.Milestones) > 0
	if m.written && m.version == s.progressVer && m.dropped == dropped {
		return nil
	}
	if !m.written && !declared && !s.progress.Known && dropped == [3]int64{} {
		return nil
	}
	*m = deliveryMark{written: true, version: s.progressVer, dropped: dropped}
	// The progress's reached slice is replaced when it changes, never
	// changed in place: sharing it is safe.
	return &DeliveryRecord{Delivery: s.Def.Delivery, Milestones: s.Def.Milestones, Progress: s.progress, OutDropped: dropped}
}

// RestoreDelivery gives a recovered stream the progress and drops of its
// delivery record (nil: none).
func (st *StreamStore) RestoreDelivery(r *DeliveryRecord) {
	if r == nil {
		return
	}
	s := st.s
	if r.Progress.Known {
		s.progress = r.Progress
	}
	for p, n := range r.OutDropped {
		s.Out.dropped[p].Store(n)
	}
	st.delivered = deliveryMark{written: true, version: s.progressVer, dropped: r.OutDropped}
}
