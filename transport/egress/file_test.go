package egress

import (
	"errors"
	"testing"
)

// TestCheckFile: a nil policy and AnyFile allow every file; otherwise only
// absolute paths inside an allowed directory (after cleaning), and a policy
// with no directories refuses every file.
func TestCheckFile(t *testing.T) {
	var nilPolicy *Policy
	if err := nilPolicy.CheckFile("relative.ndjson"); err != nil {
		t.Errorf("nil policy: %v", err)
	}
	none, _ := New(Options{})
	if err := none.CheckFile("/tmp/r.ndjson"); !errors.Is(err, ErrDenied) {
		t.Errorf("no directories: %v", err)
	}
	p, err := New(Options{FileDirs: []string{"/srv/rec/"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{
		"/srv/rec/a.ndjson": true, "/srv/rec/sub/b.ndjson": true, "/srv/rec": false,
		"/srv/rec/../etc/passwd": false, "/srv/record/x": false, "rec/a.ndjson": false,
	} {
		if err := p.CheckFile(path); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", path, err, ok)
		}
	}
	if _, err := New(Options{FileDirs: []string{"rel"}}); err == nil {
		t.Error("a relative directory was accepted")
	}
	any, _ := New(Options{AnyFile: true})
	if err := any.CheckFile("x"); err != nil {
		t.Errorf("AnyFile: %v", err)
	}
}
