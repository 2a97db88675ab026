package stream

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// How a stream's outputs reach the people and programs that watch it
// (docs/streams.md, "Delivery"): each result may give its output a
// :priority and a :kind, and report the stream's :progress or a
// :milestone; the stream's start map may set its :delivery policy and
// declare its :milestones. This file holds those types and their parsing;
// outbox.go applies the policy for each subscriber; progress.go keeps the
// stream's progress and its ETA.

// A Priority says how urgently an output is delivered: a result's
// :priority. The zero value is PriorityNormal.
type Priority uint8

// The priorities.
const (
	// PriorityNormal outputs are throttled (Delivery.Normal) and never
	// dropped.
	PriorityNormal Priority = iota
	// PriorityImmediate outputs are delivered at once, alone, never
	// coalesced nor dropped.
	PriorityImmediate
	// PriorityLow outputs are throttled harder (Delivery.Low); a
	// subscriber that falls behind on them loses the oldest, counted.
	PriorityLow
)

// priorityNames are the names of the priorities, as :priority keywords.
var priorityNames = [...]string{PriorityNormal: "normal", PriorityImmediate: "immediate", PriorityLow: "low"}

// String returns "normal", "immediate" or "low".
func (p Priority) String() string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprintf("priority(%d)", uint8(p))
}

// parsePriority reads a :priority keyword or string.
func parsePriority(v rtfs.Value) (Priority, error) {
	switch v.(type) {
	case rtfs.Keyword, rtfs.String:
		for i, n := range priorityNames {
			if rtfs.TextOf(v) == n {
				return Priority(i), nil
			}
		}
	}
	return PriorityNormal, fmt.Errorf(":priority must be :immediate, :normal or :low, got %s", KindOf(v))
}

// A Throttle is how the outputs of one priority are delivered to one
// subscriber.
type Throttle struct {
	// Interval is the least time between two deliveries that carry outputs
	// of this priority; 0: as soon as the subscriber takes them.
	Interval time.Duration
	// MaxBatch is the most outputs of this priority one delivery carries.
	MaxBatch int
}

// A Delivery is the policy of a stream's normal and low outputs for each
// of its subscribers (immediate outputs are never held). A negative
// Interval or a MaxBatch below 1 is unset: Or fills it from another
// policy.
type Delivery struct {
	Normal, Low Throttle
}

// DefaultDelivery is the policy of a stream and a subscriber that set none:
// normal outputs at most one delivery per 200 ms carrying up to 10, low
// ones one per second carrying up to 20.
func DefaultDelivery() Delivery {
	return Delivery{
		Normal: Throttle{Interval: 200 * time.Millisecond, MaxBatch: 10},
		Low:    Throttle{Interval: time.Second, MaxBatch: 20},
	}
}

// Or returns d with its unset fields (a negative interval, a batch below
// 1) taken from def.
func (d Delivery) Or(def Delivery) Delivery {
	fill := func(t, def Throttle) Throttle {
		if t.Interval < 0 {
			t.Interval = def.Interval
		}
		if t.MaxBatch < 1 {
			t.MaxBatch = def.MaxBatch
		}
		return t
	}
	return Delivery{Normal: fill(d.Normal, def.Normal), Low: fill(d.Low, def.Low)}
}

// Unset is a Delivery whose every field is unset: Or fills it whole.
func Unset() Delivery {
	return Delivery{Normal: Throttle{Interval: -1}, Low: Throttle{Interval: -1}}
}

// ParseDelivery reads the :delivery map of a start call:
// {:normal {:interval-ms n :max-batch n} :low {:interval-ms n :max-batch n}},
// every key optional (an absent one keeps the subscriber's policy). Keys
// may be keywords or strings (JSON arguments). Errors name the key.
func ParseDelivery(v rtfs.Value) (Delivery, error) {
	d := Unset()
	m, ok := v.(*rtfs.Map)
	if !ok {
		return d, fmt.Errorf("must be a map {:normal {:interval-ms n :max-batch n} :low {...}}, got %s", KindOf(v))
	}
	var err error
	m.Range(func(k, val rtfs.Value) bool {
		name := keyName(k)
		var t *Throttle
		switch name {
		case "normal":
			t = &d.Normal
		case "low":
			t = &d.Low
		default:
			err = fmt.Errorf("unknown key %s; valid keys are :normal :low (immediate outputs are never held)", k)
			return false
		}
		if err = parseThrottle(val, t); err != nil {
			err = fmt.Errorf(":%s: %w", name, err)
			return false
		}
		return true
	})
	return d, err
}

func parseThrottle(v rtfs.Value, t *Throttle) error {
	m, ok := v.(*rtfs.Map)
	if !ok {
		return fmt.Errorf("must be a map {:interval-ms n :max-batch n}, got %s", KindOf(v))
	}
	var err error
	m.Range(func(k, val rtfs.Value) bool {
		name := keyName(k)
		n, isInt := val.(rtfs.Int)
		switch {
		case name != "interval-ms" && name != "max-batch":
			err = fmt.Errorf("unknown key %s; valid keys are :interval-ms :max-batch", k)
		case !isInt:
			err = fmt.Errorf(":%s must be an int, got %s", name, KindOf(val))
		case name == "interval-ms" && (n < 0 || n > maxIntervalMs):
			err = fmt.Errorf(":interval-ms must be 0 to %d, got %d", maxIntervalMs, n)
		case name == "interval-ms":
			t.Interval = time.Duration(n) * time.Millisecond
		case n < 1 || n > maxBatch:
			err = fmt.Errorf(":max-batch must be 1 to %d, got %d", maxBatch, n)
		default:
			t.MaxBatch = int(n)
		}
		return err == nil
	})
	return err
}

// The bounds of a :delivery policy: an hour between deliveries, 1,000
// outputs in one.
const (
	maxIntervalMs = 3_600_000
	maxBatch      = 1000
)

// keyName is the name of a map key given as a keyword or a string.
func keyName(k rtfs.Value) string {
	switch k := k.(type) {
	case rtfs.Keyword:
		return string(k)
	case rtfs.String:
		return string(k)
	}
	return ""
}

// A Milestone is one step of a stream's :milestones: its id, its weight in
// the stream's progress, and how long it is expected to take (0: no
// estimate).
type Milestone struct {
	ID        string
	Weight    float64
	Estimated time.Duration
}

// maxMilestones bounds a stream's :milestones.
const maxMilestones = 256

// ParseMilestones reads the :milestones vector of a start call: [{:id :scan
// :weight 0.2 :estimated-ms 15000} ...]. :id (a keyword or string, unique)
// is required; :weight defaults to 1 and must be positive; :estimated-ms is
// optional.
func ParseMilestones(v rtfs.Value) ([]Milestone, error) {
	var items []rtfs.Value
	switch v := v.(type) {
	case *rtfs.Vector:
		for i := range v.Len() {
			items = append(items, v.Index(i))
		}
	case *rtfs.List:
		for l := v; l != nil && l.Len() > 0; l = l.Rest() {
			items = append(items, l.First())
		}
	default:
		return nil, fmt.Errorf("must be a vector of maps {:id :weight :estimated-ms}, got %s", KindOf(v))
	}
	if len(items) == 0 || len(items) > maxMilestones {
		return nil, fmt.Errorf("must hold 1 to %d milestones, got %d", maxMilestones, len(items))
	}
	out := make([]Milestone, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		ms, err := parseMilestone(it)
		if err == nil && seen[ms.ID] {
			err = fmt.Errorf("id :%s is given twice", ms.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("milestone %d: %w", i, err)
		}
		seen[ms.ID] = true
		out = append(out, ms)
	}
	return out, nil
}

func parseMilestone(v rtfs.Value) (Milestone, error) {
	ms := Milestone{Weight: 1}
	m, ok := v.(*rtfs.Map)
	if !ok {
		return ms, fmt.Errorf("must be a map {:id :weight :estimated-ms}, got %s", KindOf(v))
	}
	var err error
	m.Range(func(k, val rtfs.Value) bool {
		switch name := keyName(k); name {
		case "id":
			if ms.ID = milestoneID(val); ms.ID == "" {
				err = fmt.Errorf(":id must be a keyword or a non-empty string, got %s", KindOf(val))
			}
		case "weight":
			w, isNum := number(val)
			if !isNum || w <= 0 || math.IsInf(w, 0) || math.IsNaN(w) {
				err = fmt.Errorf(":weight must be a positive number, got %s", KindOf(val))
			}
			ms.Weight = w
		case "estimated-ms":
			n, isInt := val.(rtfs.Int)
			if !isInt || n < 0 {
				err = fmt.Errorf(":estimated-ms must be a non-negative int, got %s", KindOf(val))
			}
			ms.Estimated = time.Duration(n) * time.Millisecond
		default:
			err = fmt.Errorf("unknown key %s; valid keys are :id :weight :estimated-ms", k)
		}
		return err == nil
	})
	if err == nil && ms.ID == "" {
		err = errors.New(":id is required")
	}
	return ms, err
}

// milestoneID reads a milestone id: a keyword's name or a non-empty string.
func milestoneID(v rtfs.Value) string {
	switch v := v.(type) {
	case rtfs.Keyword:
		return string(v)
	case rtfs.String:
		return strings.TrimPrefix(string(v), ":")
	}
	return ""
}

// number reads an int or a float.
func number(v rtfs.Value) (float64, bool) {
	switch v := v.(type) {
	case rtfs.Int:
		return float64(v), true
	case rtfs.Float:
		return float64(v), true
	}
	return 0, false
}

// batch is the most outputs of priority p one batch carries.
func (d Delivery) batch(p Priority) int {
	switch p {
	case PriorityNormal:
		return d.Normal.MaxBatch
	case PriorityLow:
		return d.Low.MaxBatch
	}
	return 1
}

// BatchSize is the most outputs of priority p one batch of policy d
// carries.
func BatchSize(d Delivery, p Priority) int { return d.batch(p) }
