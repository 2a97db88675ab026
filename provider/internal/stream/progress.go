package stream

import (
	"fmt"
	"math"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A stream's progress: how much of its work is done, out of how much, and
// when it will likely end. A result reports it with :progress {:done D
// :total T :message M} (any of the three), or by naming one of the
// stream's :milestones with :milestone ID, which adds the milestone's
// weight to :done (once) out of the sum of the weights. It is stream
// state: stored with the stream and restored by recovery.

// Progress is a stream's progress, guarded by the stream's mu.
type Progress struct {
	Known     bool    // a result reported progress, or the stream has milestones
	Done      float64 // work done, in the unit of total
	Total     float64 // work in all; 0: not known
	Message   string
	Milestone string    // the milestone reached last
	Reached   []bool    // by the index of definition.milestones
	At        time.Time // when done last changed; zero: never
}

// ProgressInfo is a stream's :progress, as inspect and the events show it.
type ProgressInfo struct {
	Done float64 `json:"done"`
	// Total is nil while the total is not known.
	Total *float64 `json:"total"`
	// Fraction is Done/Total, from 0 to 1; nil without a total.
	Fraction *float64 `json:"fraction"`
	// EtaMs is how many milliseconds the rest of the work will likely
	// take (see etaLocked); nil when nothing tells.
	EtaMs     *int64 `json:"eta-ms"`
	Message   string `json:"message,omitempty"`
	Milestone string `json:"milestone,omitempty" rtfs:"keyword"`
}

// newProgress is the progress of a new stream with milestones ms.
func newProgress(ms []Milestone) Progress {
	pr := Progress{}
	if len(ms) > 0 {
		pr.Known = true
		pr.Reached = make([]bool, len(ms))
		for _, m := range ms {
			pr.Total += m.Weight
		}
	}
	return pr
}

// ApplyProgressLocked applies a result's :milestone and :progress (nil when
// absent) and reports whether the progress changed. A bad value is an
// error naming the key; nothing is applied then.
func (s *Stream) ApplyProgressLocked(milestone, prog rtfs.Value, now time.Time) (bool, error) {
	pr := s.progress
	reached := "" // a milestone reached for the first time, for the timeline
	if milestone != nil && milestone != rtfs.Nil {
		id := milestoneID(milestone)
		i := s.Def.milestoneIndex(id)
		if i < 0 {
			return false, fmt.Errorf(":milestone %s is not one of the stream's :milestones (%s)", KindOf(milestone), s.Def.milestoneList())
		}
		pr.Reached = append([]bool(nil), pr.Reached...)
		if !pr.Reached[i] {
			pr.Reached[i] = true
			pr.Done += s.Def.Milestones[i].Weight
			pr.At = now
			reached = id
		}
		pr.Milestone = id
	}
	if prog != nil && prog != rtfs.Nil {
		m, ok := prog.(*rtfs.Map)
		if !ok {
			return false, fmt.Errorf(":progress must be a map {:done :total :message}, got %s", KindOf(prog))
		}
		var err error
		m.Range(func(k, v rtfs.Value) bool {
			switch name := keyName(k); name {
			case "done", "total":
				n, isNum := number(v)
				if !isNum || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) || (name == "total" && n == 0) {
					err = fmt.Errorf(":progress :%s must be a non-negative number (the total positive), got %s", name, KindOf(v))
					return false
				}
				if name == "total" {
					pr.Total = n
				} else if n != pr.Done {
					pr.Done, pr.At = n, now
				}
			case "message":
				str, isStr := v.(rtfs.String)
				if !isStr && v != rtfs.Nil {
					err = fmt.Errorf(":progress :message must be a string, got %s", KindOf(v))
					return false
				}
				pr.Message = string(str)
			default:
				err = fmt.Errorf(":progress has an unknown key %s; valid keys are :done :total :message", k)
				return false
			}
			return true
		})
		if err != nil {
			return false, err
		}
	}
	changed := !pr.Known || pr.Done != s.progress.Done || pr.Total != s.progress.Total ||
		pr.Message != s.progress.Message || pr.Milestone != s.progress.Milestone
	pr.Known = true
	s.progress = pr
	if changed {
		s.progressVer++
	}
	if reached != "" {
		s.noteLocked(TimelineEvent{Kind: "milestone", Message: reached})
	}
	return changed, nil
}

// ProgressInfoLocked returns the stream's :progress at now, nil when it has
// none.
func (s *Stream) ProgressInfoLocked(now time.Time) *ProgressInfo {
	pr := &s.progress
	if !pr.Known {
		return nil
	}
	in := &ProgressInfo{Done: pr.Done, Message: pr.Message, Milestone: pr.Milestone}
	if pr.Total > 0 {
		total := pr.Total
		frac := min(max(pr.Done/total, 0), 1)
		in.Total, in.Fraction = &total, &frac
	}
	if eta, ok := s.etaLocked(now); ok {
		ms := eta.Milliseconds()
		in.EtaMs = &ms
	}
	return in
}

// etaLocked estimates the time the rest of the work takes, from the time
// the work done so far took: the elapsed time from the stream's start to
// the last change of :done, per unit of work, times the work left, less
// the time since that change (never below 0). Before any work is done it
// is what the milestones not reached are estimated to take (their
// :estimated-ms), less the time since the start; with no estimate it is
// not known. A stream whose work is all done has 0 left.
func (s *Stream) etaLocked(now time.Time) (time.Duration, bool) {
	pr := &s.progress
	if pr.Total <= 0 {
		return 0, false
	}
	if pr.Done >= pr.Total {
		return 0, true
	}
	if pr.Done > 0 && !pr.At.IsZero() {
		perUnit := float64(pr.At.Sub(s.Started)) / pr.Done
		left := time.Duration(perUnit*(pr.Total-pr.Done)) - now.Sub(pr.At)
		return max(left, 0), true
	}
	var est time.Duration
	for i, m := range s.Def.Milestones {
		if !pr.Reached[i] {
			est += m.Estimated
		}
	}
	if est == 0 {
		return 0, false
	}
	return max(est-now.Sub(s.Started), 0), true
}

// milestoneIndex returns the index of milestone id, -1 if none.
func (d *Definition) milestoneIndex(id string) int {
	for i, m := range d.Milestones {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// milestoneList names the stream's milestones for an error.
func (d *Definition) milestoneList() string {
	if len(d.Milestones) == 0 {
		return "it declares none"
	}
	s := ""
	for i, m := range d.Milestones {
		if i > 0 {
			s += " "
		}
		s += ":" + m.ID
	}
	return s
}
