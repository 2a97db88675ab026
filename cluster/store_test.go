package cluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keyOwner makes keys "s/<id>/..." belong to stream <id>.
func keyOwner(key []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(key, []byte("s/"))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte("/"))
	return string(id), ok
}

func join(t testing.TB, s *server.Server, node string, owner func([]byte) (string, bool)) *Cluster {
	t.Helper()
	c, err := Connect(context.Background(), Options{URLs: []string{s.ClientURL()}, Node: node,
		LeaseTTL: time.Second, KeyOwner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStoreSuite runs the store conformance suite on the JetStream store,
// each case on a nats-server of its own.
func TestStoreSuite(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) persistence.Store {
		return join(t, clustertest.Server(t, clustertest.Options{}), "a", nil).Store()
	})
}

func TestKeySubject(t *testing.T) {
	for _, k := range []string{"a", "/", "a/b", "stream/x.y*z>\x00p", "stream/\x00j\x00\x00\x01", "x//y\x00\x00"} {
		subj := keySubject([]byte(k))
		back, ok := subjectKey(subj)
		if !ok || string(back) != k {
			t.Errorf("%q → %s → %q, %v", k, subj, back, ok)
		}
	}
	if got := prefixFilter([]byte("stream/ab\x00j")); got != "rtfshost.kv.k73747265616d.s6162.>" {
		t.Errorf("prefixFilter = %s", got)
	}
}

// TestScanBeyondOneRead: a scan of more keys than one direct get answers
// (1024) reads them in batches and still returns all, in order.
func TestScanBeyondOneRead(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	st := join(t, s, "a", nil).Store()
	ctx := context.Background()
	const n = 2500
	for i := 0; i < n; i += 500 {
		var b persistence.Batch
		for j := i; j < i+500; j++ {
			b.Put(fmt.Appendf(nil, "big/%05d", j), fmt.Appendf(nil, "%d", j))
		}
		if err := st.Commit(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	err := st.Scan(ctx, []byte("big/"), func(k, v []byte) error {
		if want := fmt.Sprintf("big/%05d", i); string(k) != want || string(v) != fmt.Sprint(i) {
			return fmt.Errorf("key %d: %s=%s, want %s", i, k, v, want)
		}
		i++
		return nil
	})
	if err != nil || i != n {
		t.Fatalf("scan: %v after %d keys, want %d", err, i, n)
	}
}

// cutAnswers answers the direct gets of a stream made without allow_direct
// as nats-server does, except that an answer ends after at most max
// messages: as the server's answers do once they reach its max_pending
// bytes, with the end-of-batch marker and the count of those left out
// (end "eob"); with a 404 as when a message fails to load, after them
// ("404") or instead of any ("lost"); or with nothing, as when the
// connection drops ("silent").
func cutAnswers(t *testing.T, s *server.Server, st jetstream.Stream, max int, end string) {
	t.Helper()
	name := st.CachedInfo().Config.Name
	closed := make(chan struct{})
	nc, err := nats.Connect(s.ClientURL(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = nc.Drain() // lets an answer under way end
		<-closed
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = js.Stream(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	fail := func(err error) {
		if !nc.IsDraining() && !nc.IsClosed() {
			t.Error(err)
		}
	}
	_, err = nc.Subscribe("$JS.API.DIRECT.GET."+name, func(req *nats.Msg) {
		var r struct {
			MultiLast []string `json:"multi_last"`
		}
		if err := json.Unmarshal(req.Data, &r); err != nil {
			fail(err)
			return
		}
		var msgs []*jetstream.RawStreamMsg
		for _, filter := range r.MultiLast {
			info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(filter))
			if err != nil {
				fail(err)
				return
			}
			for subj := range info.State.Subjects {
				m, err := st.GetLastMsgForSubject(context.Background(), subj)
				if err != nil {
					fail(err)
					return
				}
				msgs = append(msgs, m)
			}
		}
		slices.SortFunc(msgs, func(a, b *jetstream.RawStreamMsg) int { return cmp.Compare(a.Sequence, b.Sequence) })
		status := func(code, desc string, pending int) {
			m := nats.NewMsg(req.Reply)
			m.Header.Set("Status", code)
			m.Header.Set("Description", desc)
			m.Header.Set("Nats-Num-Pending", strconv.Itoa(pending))
			_ = nc.PublishMsg(m)
		}
		if len(msgs) == 0 {
			status("404", "No Results", 0)
			return
		}
		if end == "lost" && len(msgs) > max {
			status("404", "Message Not Found", 0)
			return
		}
		sent := min(max, len(msgs))
		for i, sm := range msgs[:sent] {
			m := nats.NewMsg(req.Reply)
			m.Data = sm.Data
			for k, v := range sm.Header {
				m.Header[k] = v
			}
			m.Header.Set("Nats-Stream", name)
			m.Header.Set("Nats-Subject", sm.Subject)
			m.Header.Set("Nats-Sequence", strconv.FormatUint(sm.Sequence, 10))
			m.Header.Set("Nats-Time-Stamp", sm.Time.UTC().Format(time.RFC3339Nano))
			m.Header.Set("Nats-Num-Pending", strconv.Itoa(len(msgs)-i-1))
			_ = nc.PublishMsg(m)
		}
		switch {
		case end == "404" && sent < len(msgs):
			status("404", "Message Not Found", 0)
		case end == "silent" && sent < len(msgs):
		default:
			status("204", "EOB", len(msgs)-sent)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestScanCutAnswer: a direct get's answer that ends before its last
// message is never taken for the whole. An answer cut at the server's
// max_pending bytes (its end-of-batch marker counting those left out) or
// by a 404 after some messages: the scan asks for the rest and returns
// every key. An answer that is a 404 other than "No Results", or breaks
// off, fails the scan, which retries until its context ends, and never
// returns a part or nothing for the whole.
func TestScanCutAnswer(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"eob", "404", "lost", "silent"} {
		t.Run(end, func(t *testing.T) {
			s := clustertest.Server(t, clustertest.Options{})
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CUT", Subjects: []string{kvRoot + ".>"},
				Storage: jetstream.MemoryStorage, MaxMsgsPerSubject: 1})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"one/": 50, "cut/": 300} // an answer holds 100
			for prefix, n := range want {
				for i := range n {
					if _, err := js.Publish(ctx, keySubject(fmt.Appendf(nil, "%s%04d", prefix, i)), fmt.Appendf(nil, "v%d", i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			cutAnswers(t, s, st, 100, end)
			c := &Cluster{opts: Options{Stream: "CUT"}, nc: nc, js: js, st: st, log: slog.New(slog.DiscardHandler),
				directGet: directGetSubject(js.Options(), "CUT")}
			store := c.Store()
			for _, prefix := range []string{"one/", "cut/"} {
				sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				i := 0
				err := store.Scan(sctx, []byte(prefix), func(k, v []byte) error {
					if string(k) != fmt.Sprintf("%s%04d", prefix, i) || string(v) != fmt.Sprintf("v%d", i) {
						return fmt.Errorf("%q=%q where %s%04d was due", k, v, prefix, i)
					}
					i++
					return nil
				})
				cancel()
				switch {
				case err == nil && i != want[prefix]:
					t.Errorf("scan of %s: %d of %d keys and no error", prefix, i, want[prefix])
				case err != nil && (end == "eob" || end == "404" || prefix == "one/"):
					t.Errorf("scan of %s: %v after %d of %d keys", prefix, err, i, want[prefix])
				case err == nil && (end == "lost" || end == "silent") && prefix == "cut/":
					t.Errorf("scan of %s: no error though every answer fails", prefix)
				}
			}
		})
	}
}

// TestScanKeys: ScanKeys lists the keys under a prefix, in order, those
// of more subjects than one read answers too, without values; a key with
// a separator or a NUL in it, and no key of another prefix; ErrStopScan
// ends it without an error.
func TestScanKeys(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	st := join(t, s, "a", nil).Store()
	ctx := context.Background()
	const n = 1500
	var want []string
	for i := 0; i < n; i += 500 {
		var b persistence.Batch
		for j := i; j < i+500; j++ {
			k := fmt.Sprintf("keys/%05d\x00p", j)
			b.Put([]byte(k), bytes.Repeat([]byte("v"), 100))
			want = append(want, k)
		}
		if err := st.Commit(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	var b persistence.Batch
	b.Put([]byte("keys/a/b"), []byte("1"))
	b.Put([]byte("keysx/1"), []byte("1"))
	b.Put([]byte("other/1"), []byte("1"))
	if err := st.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	want = append(want, "keys/a/b")
	var got []string
	if err := st.ScanKeys(ctx, []byte("keys/"), func(k []byte) error {
		got = append(got, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[n] != want[n] || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ScanKeys listed %d keys (first %q), want %d", len(got), got[:min(1, len(got))], len(want))
	}
	var through []string // persistence.ScanKeys uses it
	if err := persistence.ScanKeys(ctx, st, []byte("keys/0000"), func(k []byte) error {
		through = append(through, string(k))
		if len(through) == 3 {
			return persistence.ErrStopScan
		}
		return nil
	}); err != nil || strings.Join(through, ",") != strings.Join(want[:3], ",") {
		t.Fatalf("persistence.ScanKeys stopped after 3 = %q, %v", through, err)
	}
}

// TestFencing: a host writes a stream's records only while it owns the
// stream. When its heartbeat expires another host claims the stream, and
// the first host's next commit is refused by the server (ErrFenced),
// leaving the new owner's record in place; records of no stream are not
// fenced.
func TestFencing(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	ctx := context.Background()
	a, b := join(t, s, "a", keyOwner), join(t, s, "b", keyOwner)
	sa, sb := a.Store(), b.Store()
	put := func(st *Store, kv ...string) error {
		var batch persistence.Batch
		for i := 0; i < len(kv); i += 2 {
			batch.Put([]byte(kv[i]), []byte(kv[i+1]))
		}
		return st.Commit(ctx, &batch)
	}
	const id = "x.y* >z"
	if err := put(sa, "s/"+id+"/state", "1"); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("a wrote a stream it does not own: %v", err)
	}
	if err := a.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, id); !errors.Is(err, ErrOwned) {
		t.Fatalf("b claimed a live host's stream: %v", err)
	}
	if err := put(sa, "s/"+id+"/state", "1", "free", "a"); err != nil {
		t.Fatal(err)
	}
	if o, _ := b.OwnerOf(ctx, id); o.Node != "a" || !o.Alive {
		t.Fatalf("owner %+v, want a, alive", o)
	}
	// a stops renewing its heartbeat (a paused or partitioned host).
	a.stopHeartbeat()
	deadline := time.Now().Add(10 * time.Second)
	for {
		orphans, err := b.Orphans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(orphans) == 1 && orphans[0] == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's stream is not an orphan after its heartbeat expired: %v", orphans)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := put(sb, "s/"+id+"/state", "2"); err != nil {
		t.Fatal(err)
	}
	// The zombie's commit, a stream record and a free one in one batch:
	// refused as a whole.
	if err := put(sa, "s/"+id+"/state", "zombie", "free", "zombie"); !errors.Is(err, persistence.ErrFenced) {
		t.Fatalf("the zombie's commit: %v, want ErrFenced", err)
	}
	for k, want := range map[string]string{"s/" + id + "/state": "2", "free": "a"} {
		if v, err := sb.Get(ctx, []byte(k)); err != nil || string(v) != want {
			t.Fatalf("%s = %q, %v; want %q", k, v, err, want)
		}
	}
	if got := a.Owned(); len(got) != 0 {
		t.Fatalf("a still believes it owns %v", got)
	}
	// A handover: b releases, a claims at once.
	if err := b.Release(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx, id); err != nil {
		t.Fatalf("claim after a handover: %v", err)
	}
	if err := a.Release(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if orphans, err := b.Orphans(ctx); err != nil || len(orphans) != 0 {
		t.Fatalf("an ended stream is an orphan: %v %v", orphans, err)
	}
}

// TestConnectAuth: a NATS that requires a user and password is joined with
// them in the URL; a wrong password is an error that names the server but
// never the password.
func TestConnectAuth(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{User: "rtfs", Password: "s3cret-pw"})
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	c, err := Connect(context.Background(), Options{URLs: []string{"nats://rtfs:s3cret-pw@" + addr}, Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = Connect(context.Background(), Options{URLs: []string{"nats://rtfs:wrong-pw@" + addr}, Node: "a"})
	if err == nil || !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "wrong-pw") || !strings.Contains(err.Error(), "nats://"+addr) {
		t.Fatalf("a wrong password: %v", err)
	}
}

// TestStreamSettingsPutBack: a JetStream stream of the cluster's name whose
// settings someone changed gets back those the cluster needs (here atomic
// batches); its replicas are left alone.
func TestStreamSettingsPutBack(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RTFSHOST", Subjects: []string{"rtfshost.kv.>", "rtfshost.own.>", "rtfshost.node.>"},
		Storage: jetstream.FileStorage, MaxMsgsPerSubject: 1, AllowMsgTTL: true, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	c := join(t, s, "a", nil)
	var b persistence.Batch
	b.Put([]byte("a"), []byte("1"))
	b.Put([]byte("b"), []byte("2"))
	if err := c.Store().Commit(ctx, &b); err != nil {
		t.Fatalf("a two-key commit after the settings were put back: %v", err)
	}
}

// TestScanNATSDown: a scan while NATS does not answer fails when its
// context ends; it never passes an unanswered read for an empty one (a
// host would take every stream for an orphan, or a stream for one never
// stored).
func TestScanNATSDown(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	c := join(t, s, "a", nil)
	st := c.Store()
	var b persistence.Batch
	b.Put([]byte("k/1"), []byte("v"))
	if err := st.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	err := st.Scan(ctx, []byte("k/"), func(k, v []byte) error { n++; return nil })
	if err == nil {
		t.Fatalf("Scan with NATS down read %d keys and no error", n)
	}
	if live, err := c.alive(ctx); err == nil {
		t.Fatalf("alive with NATS down: %v and no error", live)
	}
}

// TestClaimWhileUnsettled: a host whose own heartbeat failed (a leader
// election, an outage) neither lists nor claims a stream whose owner's
// heartbeat is missing until its own has been renewed for a lease TTL: the
// owner may have been kept from renewing its own by the same outage. A
// live owner's claim error names it and its last heartbeat.
func TestClaimWhileUnsettled(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	ctx := context.Background()
	a, b := join(t, s, "a", keyOwner), join(t, s, "b", keyOwner)
	const id = "u"
	if err := a.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	var owned *OwnedError
	if err := b.Claim(ctx, id); !errors.As(err, &owned) || owned.Node != "a" || time.Since(owned.Heartbeat) > time.Second {
		t.Fatalf("b's claim of a live host's stream: %v, want an OwnedError naming a and its last heartbeat", err)
	}
	a.stopHeartbeat()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if o, err := b.OwnerOf(ctx, id); err == nil && !o.Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a's heartbeat did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	failed := time.Now()
	b.beats.failed(failed) // as if b's heartbeat had failed just now
	if orphans, err := b.Orphans(ctx); err != nil || len(orphans) != 0 {
		t.Fatalf("orphans of a host whose heartbeat just failed: %v %v, want none", orphans, err)
	}
	if err := b.Claim(ctx, id); !errors.As(err, &owned) || !owned.Heartbeat.IsZero() {
		t.Fatalf("claim of a host whose heartbeat just failed: %v, want an OwnedError without heartbeat", err)
	}
	for {
		orphans, err := b.Orphans(ctx)
		if err == nil && len(orphans) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's stream is not an orphan a while after b's heartbeat renewed: %v %v", orphans, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(failed); waited < time.Second {
		t.Fatalf("b took a's stream for an orphan %v after its own heartbeat failed; the lease TTL is 1s", waited)
	}
	if err := b.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// TestReady: a host that just joined is ready; once NATS is gone it is
// not, and the error says that the connection is down.
func TestReady(t *testing.T) {
	s := clustertest.Server(t, clustertest.Options{})
	c := join(t, s, "a", nil)
	if err := c.Ready(); err != nil {
		t.Fatalf("Ready after Connect: %v", err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Ready with NATS down for 10 s: still nil")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Ready(); !strings.Contains(err.Error(), "not connected to NATS") && !strings.Contains(err.Error(), "lease was last renewed") {
		t.Errorf("Ready with NATS down: %v", err)
	}
}
