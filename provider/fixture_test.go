package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Fixtures of stored streams, as earlier versions of rtfshost wrote them: a
// newer rtfshost must recover them. Each file under testdata/ is the whole
// store (keys and values) at a moment of a stream's life, written by the
// version it names with writeFixture (RTFSHOST_PROVIDER_WRITE_FIXTURE=DIR
// go test ./provider/ writes them to DIR; a fixture once committed is never
// rewritten).

// fixtureEnv makes TestMain write the fixtures to the directory it names.
const fixtureEnv = "RTFSHOST_PROVIDER_WRITE_FIXTURE"

// fixtureExecSrc is the program of the exec fixture: it records the lines
// it is given, and holds the second in the processor (test.hold) while the
// store is copied.
const fixtureExecSrc = `
(defn proc [state chunk meta]
  (call :test.hold {:line (:line chunk)})
  {:state (conj state (:line chunk)) :output (:line chunk)})`

// fixtureExecV1 is an :exec stream of sh printing 1..4, its queue capacity
// 2, copied while line 2 was in the processor: line 1 processed, lines 2-4
// journaled, no record of the process (the first record format).
const fixtureExecV1 = "testdata/store-exec-v1.json"

// TestStoredFixtureExecV1 recovers the exec fixture: its journal is
// processed in order, after line 1, and the stream then ends with
// :source-lost (its program did not survive the host, and it has no
// :restart).
func TestStoredFixtureExecV1(t *testing.T) {
	store := loadFixture(t, fixtureExecV1)
	reg, err := holdRegistry(nil)
	must(t, err)
	p := New(Options{Store: store, LookupEnv: noEnv, Capabilities: reg, Transports: procCatalog()})
	t.Cleanup(func() { p.Close() })
	for _, c := range p.Capabilities() {
		must(t, p.opts.Capabilities.Register(c))
	}
	must(t, p.Recover(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.Await(ctx, "fixture")
	st, _ := p.Status(ctx, "fixture")
	if st.State != StateError || st.EndReason != "source-lost" {
		t.Fatalf("Await: %v; status %+v, want error (source-lost)", err, st)
	}
	info, err := p.Inspect("fixture", InspectOptions{})
	must(t, err)
	want := rtfs.NewVector(rtfs.String("1"), rtfs.String("2"), rtfs.String("3"), rtfs.String("4"))
	if got := path(info, "current-state"); !rtfs.Equal(got, want) {
		t.Fatalf("state %v, want %v", got, want)
	}
}

// holdRegistry serves test.hold: it blocks a call whose :line is "2" until
// held is closed or the call's context ends (when held is nil, nothing
// blocks).
func holdRegistry(held chan struct{}) (*capabilities.Registry, error) {
	reg := capabilities.NewRegistry()
	err := reg.Register(capabilities.Capability{ID: "test.hold", Handler: func(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		if line, _ := capabilities.Field(c.Args[0].(*rtfs.Map), "line"); held != nil && line == rtfs.String("2") {
			select {
			case held <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return capabilities.Answer{}, ctx.Err()
		}
		return capabilities.Now(nil), nil
	}})
	return reg, err
}

// fixtureKV is one stored key and value.
type fixtureKV struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

func loadFixture(t *testing.T, file string) *persistence.MemStore {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var kvs []fixtureKV
	if err := json.Unmarshal(b, &kvs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	store := persistence.NewMemStore()
	var batch persistence.Batch
	for _, kv := range kvs {
		batch.Put(kv.Key, kv.Value)
	}
	must(t, store.Commit(context.Background(), &batch))
	return store
}

// writeFixtures writes the fixtures of this version into dir.
func writeFixtures(dir string) error {
	store := persistence.NewMemStore()
	held := make(chan struct{}, 1)
	reg, err := holdRegistry(held)
	if err != nil {
		return err
	}
	p := New(Options{Store: store, LookupEnv: noEnv, Capabilities: reg, Transports: procCatalog()})
	defer p.Close()
	for _, c := range p.Capabilities() {
		if err := p.opts.Capabilities.Register(c); err != nil {
			return err
		}
	}
	prog, err := rtfs.Compile("fixture.rtfs", []byte(fixtureExecSrc))
	if err != nil {
		return err
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil {
		return err
	}
	_, err = p.Start(StartRequest{StreamID: "fixture", Transport: "exec", Processor: rtfs.Symbol("proc"), Globals: out.Globals,
		InitialState: rtfs.NewVector(), QueueCapacity: 2, TransportKeys: map[string]json.RawMessage{
			"command": json.RawMessage(`"sh"`), "args": json.RawMessage(`["-c", "echo 1; echo 2; echo 3; echo 4; sleep 60"]`)}})
	if err != nil {
		return err
	}
	<-held
	// Wait until lines 2-4 are journaled and line 1's progress is stored.
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var journaled int
		var progress bool
		err := store.Scan(ctx, []byte(stream.StreamPrefix), func(key, value []byte) error {
			switch _, suffix, _, _ := stream.ParseStreamKey(key); suffix {
			case stream.SuffixJournal:
				journaled++
			case stream.SuffixProg:
				var r stream.ProgressRecord
				if err := r.Decode(key, value); err != nil {
					return err
				}
				progress = r.ProcNext == 1 // line 1, seq 0, is processed
			}
			return nil
		})
		if err != nil {
			return err
		}
		if journaled == 3 && progress {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fixture stream did not reach its moment (journaled %d)", journaled)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var kvs []fixtureKV
	err = store.Scan(ctx, nil, func(key, value []byte) error {
		kvs = append(kvs, fixtureKV{Key: append([]byte(nil), key...), Value: append([]byte(nil), value...)})
		return nil
	})
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(kvs, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, filepath.Base(fixtureExecV1)), append(b, '\n'), 0o644)
}
