package provider

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

// progress is a stream's progress, guarded by the stream's mu.
type progress struct {
	known     bool    // a result reported progress, or the stream has milestones
	done      float64 // work done, in the unit of total
	total     float64 // work in all; 0: not known
	message   string
	milestone string    // the milestone reached last
	reached   []bool    // by the index of definition.milestones
	at        time.Time // when done last changed; zero: never
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
func newProgress(ms []Milestone) progress {
	pr := progress{}
	if len(ms) > 0 {
		pr.known = true
		pr.reached = make([]bool, len(ms))
		for _, m := range ms {
			pr.total += m.Weight
		}
	}
	return pr
}

// applyProgressLocked applies a result's :milestone and :progress (nil when
// absent) and reports whether the progress changed. A bad value is an
// error naming the key; nothing is applied then.
func (s *stream) applyProgressLocked(milestone, prog rtfs.Value, now time.Time) (bool, error) {
	pr := s.progress
	reached := "" // a milestone reached for the first time, for the timeline
	if milestone != nil && milestone != rtfs.Nil {
		id := milestoneID(milestone)
		i := s.def.milestoneIndex(id)
		if i < 0 {
			return false, fmt.Errorf(":milestone %s is not one of the stream's :milestones (%s)", kindOf(milestone), s.def.milestoneList())
		}
		pr.reached = append([]bool(nil), pr.reached...)
		if !pr.reached[i] {
			pr.reached[i] = true
			pr.done += s.def.milestones[i].Weight
			pr.at = now
			reached = id
		}
		pr.milestone = id
	}
	if prog != nil && prog != rtfs.Nil {
		m, ok := prog.(*rtfs.Map)
		if !ok {
			return false, fmt.Errorf(":progress must be a map {:done :total :message}, got %s", kindOf(prog))
		}
		var err error
		m.Range(func(k, v rtfs.Value) bool {
			switch name := keyName(k); name {
			case "done", "total":
				n, isNum := number(v)
				if !isNum || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) || (name == "total" && n == 0) {
					err = fmt.Errorf(":progress :%s must be a non-negative number (the total positive), got %s", name, kindOf(v))
					return false
				}
				if name == "total" {
					pr.total = n
				} else if n != pr.done {
					pr.done, pr.at = n, now
				}
			case "message":
				str, isStr := v.(rtfs.String)
				if !isStr && v != rtfs.Nil {
					err = fmt.Errorf(":progress :message must be a string, got %s", kindOf(v))
					return false
				}
				pr.message = string(str)
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
	changed := !pr.known || pr.done != s.progress.done || pr.total != s.progress.total ||
		pr.message != s.progress.message || pr.milestone != s.progress.milestone
	pr.known = true
	s.progress = pr
	if changed {
		s.progressVer++
	}
	if reached != "" {
		s.noteLocked(TimelineEvent{Kind: "milestone", Message: reached})
	}
	return changed, nil
}

// progressInfoLocked returns the stream's :progress at now, nil when it has
// none.
func (s *stream) progressInfoLocked(now time.Time) *ProgressInfo {
	pr := &s.progress
	if !pr.known {
		return nil
	}
	in := &ProgressInfo{Done: pr.done, Message: pr.message, Milestone: pr.milestone}
	if pr.total > 0 {
		total := pr.total
		frac := min(max(pr.done/total, 0), 1)
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
func (s *stream) etaLocked(now time.Time) (time.Duration, bool) {
	pr := &s.progress
	if pr.total <= 0 {
		return 0, false
	}
	if pr.done >= pr.total {
		return 0, true
	}
	if pr.done > 0 && !pr.at.IsZero() {
		perUnit := float64(pr.at.Sub(s.started)) / pr.done
		left := time.Duration(perUnit*(pr.total-pr.done)) - now.Sub(pr.at)
		return max(left, 0), true
	}
	var est time.Duration
	for i, m := range s.def.milestones {
		if !pr.reached[i] {
			est += m.Estimated
		}
	}
	if est == 0 {
		return 0, false
	}
	return max(est-now.Sub(s.started), 0), true
}

// milestoneIndex returns the index of milestone id, -1 if none.
func (d *definition) milestoneIndex(id string) int {
	for i, m := range d.milestones {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// milestoneList names the stream's milestones for an error.
func (d *definition) milestoneList() string {
	if len(d.milestones) == 0 {
		return "it declares none"
	}
	s := ""
	for i, m := range d.milestones {
		if i > 0 {
			s += " "
		}
		s += ":" + m.ID
	}
	return s
}
