package provider

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// listAll follows List's cursors from the first page with limit, and
// returns the ids of every page, page by page.
func listAll(t *testing.T, p *Provider, limit int, between func()) [][]string {
	t.Helper()
	var pages [][]string
	cursor := ""
	for {
		page, err := p.List(context.Background(), ListOptions{Cursor: cursor, Limit: limit, Inspect: InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}})
		if err != nil {
			t.Fatalf("List(cursor %q): %v", cursor, err)
		}
		var ids []string
		for _, in := range page.Streams {
			ids = append(ids, in.StreamID)
		}
		pages = append(pages, ids)
		if page.Next == "" {
			return pages
		}
		if len(pages) > 10 {
			t.Fatalf("List gave more than 10 pages: %v", pages)
		}
		cursor = page.Next
		if between != nil {
			between()
			between = nil
		}
	}
}

// List pages the streams in id order, by cursor: a stream started
// between two pages before the cursor moves nothing, one after it is on
// a later page; :total counts them all; SummaryPage says next-cursor on
// every page but the last. Bad cursors and limits are errors.
func TestList(t *testing.T) {
	g := compileGlobals(t, countSrc)
	f := newFixture(t, Options{Store: persistence.NewMemStore()})
	for _, id := range []string{"e", "b", "d", "a", "c"} { // started out of id order
		startCount(f, g, id, rtfs.Symbol("proc"))
	}
	f.Send("b", `{"done":true}`)
	f.Await("b") // ended streams are listed too

	pages := listAll(t, f.p, 2, func() {
		startCount(f, g, "aa", rtfs.Symbol("proc")) // before the cursor: not seen
		startCount(f, g, "f", rtfs.Symbol("proc"))  // after it: on a later page
	})
	want := [][]string{{"a", "b"}, {"c", "d"}, {"e", "f"}}
	if !slices.EqualFunc(pages, want, slices.Equal[[]string]) {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	if pages := listAll(t, f.p, 0, nil); len(pages) != 1 || len(pages[0]) != 7 {
		t.Errorf("one page of the default limit: %v", pages)
	}

	first, err := f.p.SummaryPage(context.Background(), ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if path(first, "total") != rtfs.Int(7) || path(first, "streams").(*rtfs.Vector).Len() != 3 || path(first, "next-cursor") == nil {
		t.Errorf("first page of 3: %v", first)
	}
	cursor := string(path(first, "next-cursor").(rtfs.String))
	last, err := f.p.SummaryPage(context.Background(), ListOptions{Cursor: cursor, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if path(last, "streams").(*rtfs.Vector).Len() != 4 || path(last, "next-cursor") != nil || path(last, "persistence-enabled") != rtfs.True {
		t.Errorf("last page: %v", last)
	}

	for _, c := range []string{"x", "a!!", cursor + "="} {
		if _, err := f.p.List(context.Background(), ListOptions{Cursor: c}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("List(cursor %q) = %v, want ErrBadCursor", c, err)
		}
	}
	for _, n := range []int{-1, MaxListLimit + 1} {
		if _, err := f.p.List(context.Background(), ListOptions{Limit: n}); err == nil {
			t.Errorf("List(limit %d) did not fail", n)
		}
	}
}
