package host_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// The data directories of testdata/upgrade were written by earlier
// releases (scripts/make-upgrade-fixture.sh; testdata/upgrade/gen says
// what is in them): stream "sum1" killed after 40 of its 100 chunks, and
// stream "await1", 10 of 20 chunks in, awaited by a parked program. The
// current build resumes each and must reach the exact results.
const (
	fixtureSumChunks   = 100
	fixtureAwaitChunks = 20
)

// A fixture's manifest (RELEASE.txt beside RELEASE.tar.gz).
type fixtureManifest struct {
	release, commit, compile string
	store                    int
}

// fixtures reads the manifests of testdata/upgrade, oldest release first.
func fixtures(t *testing.T) []fixtureManifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "upgrade", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixture manifests in testdata/upgrade (%v): scripts/make-upgrade-fixture.sh makes them", err)
	}
	var list []fixtureManifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := fixtureManifest{}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "release":
				m.release = v
			case "commit":
				m.commit = v
			case "compile version":
				m.compile = v
			case "store format":
				m.store, _ = strconv.Atoi(v)
			}
		}
		if m.release == "" || m.compile == "" || m.store == 0 || m.release+".txt" != filepath.Base(f) {
			t.Fatalf("%s: a manifest needs release (its file's name), compile version and store format: %q", f, b)
		}
		list = append(list, m)
	}
	return list
}

func TestUpgradeFixturesResume(t *testing.T) {
	for _, m := range fixtures(t) {
		t.Run(m.release, func(t *testing.T) { resumeFixture(t, m.release) })
	}
}

// Every store format and compile version a build has written has a
// fixture: this build's too, made from the commit that brought them
// (docs/upgrading.md). A change of either fails here until
// scripts/make-upgrade-fixture.sh has made one.
func TestUpgradeFixtureOfThisFormat(t *testing.T) {
	var seen []string
	for _, m := range fixtures(t) {
		if m.compile == rtfs.CompileVersion() && m.store == persistence.StoreFormat {
			return
		}
		seen = append(seen, fmt.Sprintf("%s (%s, store format %d)", m.release, m.compile, m.store))
	}
	t.Fatalf("no fixture of this build's formats (%s, store format %d); there are %s. Commit the change, then run scripts/make-upgrade-fixture.sh NEXT-RELEASE HEAD and name the release in CHANGELOG.md",
		rtfs.CompileVersion(), persistence.StoreFormat, strings.Join(seen, ", "))
}

func resumeFixture(t *testing.T, rel string) {
	dir := t.TempDir()
	untarGz(t, filepath.Join("testdata", "upgrade", rel+".tar.gz"), dir)
	st, err := persistence.OpenBadger(dir, persistence.Options{GCInterval: -1, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mk := &mock.Transport{}
	h, err := host.New(host.Options{Store: st, Stdout: io.Discard,
		Streams: provider.Options{LookupEnv: env(nil), Transports: transport.NewCatalog(mock.Kind(mk))}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	feedFrom(t, mk, "sum1", fixtureSumChunks)
	feedFrom(t, mk, "await1", fixtureAwaitChunks)
	if err := h.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}

	v, err := h.Provider().Inspect("sum1", provider.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := fixtureSumChunks
	seen := make([]rtfs.Value, n)
	for i := range seen {
		seen[i] = rtfs.Int(i + 1)
	}
	want := rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(n), rtfs.Keyword("seen"), rtfs.NewVector(seen...), rtfs.Keyword("sum"), rtfs.Int(n*(n+1)/2))
	if got := get(v, "current-state"); !rtfs.Equal(got, want) {
		t.Fatalf("sum1 ends with\n%v\nwant (every chunk once, in order)\n%s", got, want)
	}
	if got := get(v, "status", "state"); got != rtfs.Keyword("completed") {
		t.Fatalf("sum1 is %v", got)
	}
	res, err := h.ResumedPrograms(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("ResumedPrograms = %v, %v", res, err)
	}
	total := fixtureAwaitChunks * (fixtureAwaitChunks + 1) / 2
	r := res[0]
	if r.Err != "" || r.StreamID != "await1" || r.Program != "await.rtfs" {
		t.Fatalf("the parked program ended with %+v", r)
	}
	got, err := rtfs.Compile("value.rtfs", []byte("(quote "+r.Value+")"))
	if err != nil {
		t.Fatal(err)
	}
	value, err := rtfs.NewThread(rtfs.Limits{}).Run(ctx, got)
	wantValue := rtfs.MapOf(rtfs.Keyword("stream"), rtfs.String("await1"), rtfs.Keyword("total"), rtfs.Int(total), rtfs.Keyword("double"), rtfs.Int(2*total))
	if err != nil || !rtfs.Equal(value.Value, wantValue) {
		t.Fatalf("the parked program's value is %s, want %v", r.Value, wantValue)
	}
}

// feedFrom sends the chunks of a resumed fixture stream after the cursor
// its transport was given, up to last, and ends its source.
func feedFrom(t *testing.T, mk *mock.Transport, id string, last int) {
	t.Helper()
	src := mk.Source(id)
	select {
	case <-src.Started():
	case <-time.After(10 * time.Second):
		t.Fatalf("stream %s did not reconnect", id)
	}
	from, err := strconv.Atoi(src.Cursor())
	if err != nil {
		t.Fatalf("stream %s resumed at cursor %q: %v", id, src.Cursor(), err)
	}
	for n := from + 1; n <= last; n++ {
		c := transport.Chunk{Data: []byte(`{"n":` + strconv.Itoa(n) + `}`), ID: strconv.Itoa(n)}
		if err := src.Send(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
}

// untarGz extracts the regular files of a .tar.gz into dir.
func untarGz(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("fixture %s: %v (scripts/make-upgrade-fixture.sh makes it)", file, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		out, err := os.OpenFile(filepath.Join(dir, filepath.Base(hdr.Name)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
