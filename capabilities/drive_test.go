package capabilities_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// TestDrive: Drive answers each host call with serve's value, throws serve's
// error into the program (try/catch sees it), ends the run with a Halt's
// error unresumed, and ends it naming the call once ctx has ended.
func TestDrive(t *testing.T) {
	prog, err := rtfs.Compile("drive.rtfs", []byte(`
(def a (call :twice 21))
(def b (try (call :fail) (catch e (str "caught " (ex-message e)))))
[a b (call :last)]`))
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, last func() error) (rtfs.Outcome, error) {
		th := rtfs.NewThread(rtfs.Limits{})
		out, err := th.Run(ctx, prog)
		return capabilities.Drive(ctx, th, out, err, func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
			switch out.Call.Capability {
			case "twice":
				return rtfs.Int(2 * int64(out.Call.Args[0].(rtfs.Int))), nil
			case "fail":
				return nil, errors.New("no")
			default:
				if err := last(); err != nil {
					return nil, err
				}
				return rtfs.String("end"), nil
			}
		})
	}
	out, err := run(context.Background(), func() error { return nil })
	if err != nil || out.Value.String() != `[42 "caught fail: no" "end"]` {
		t.Fatalf("value %v, error %v", out.Value, err)
	}

	stop := errors.New("stop here")
	out, err = run(context.Background(), func() error { return capabilities.Halt(stop) })
	if !errors.Is(err, stop) || out.Call == nil || out.Call.Capability != "last" {
		t.Fatalf("a halt: outcome at %v, error %v", out.Call, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	_, err = run(ctx, func() error { cancel(); return errors.New("late") })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "host call :last at drive.rtfs:4") {
		t.Fatalf("a cancelled run: %v", err)
	}
}
