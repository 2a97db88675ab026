package main

// The control socket's verbs that move a stream on (holder.go has the
// socket): resume runs a stream on the holder's host, whether its host runs
// it already or the directory only stores it; upgrade swaps a stream's
// processor where it is. So that rtfshost resume ID and rtfshost upgrade do
// on a directory a run holds what they do on one nobody holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// resume resumes stream id on the holder's host and returns its state
// after; with skip, it sets aside the chunk the failed stream is held on
// and goes on (Provider.Skip). A stream the host runs is resumed there
// (Provider.Resume). One the directory only stores (interrupted, paused or
// failed) is loaded and run by the host, as "rtfshost resume ID" runs it on
// a directory nobody holds. Either way the stream is the catch-all job's
// from then on: the holder waits for it to end.
func (hd *holder) resume(ctx context.Context, id string, skip bool) (provider.State, error) {
	p := hd.h.Provider()
	if _, err := p.Status(ctx, id); err != nil {
		view, err := hd.stored(ctx)
		if err != nil {
			return "", err
		}
		in, err := view.Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		view.Close()
		if err != nil {
			return "", fmt.Errorf("stream %q: %w", id, errNoStream)
		}
		if skip {
			if err := skippable(id, interrupted([]provider.StreamInfo{in})[0]); err != nil {
				return "", err // before anything is loaded or changed
			}
		}
		if in.Status.State == provider.StatePaused {
			if _, err := provider.SetStoredState(ctx, hd.h.Store(), id, provider.StateActive); err != nil {
				return "", err
			}
		}
		if err := p.RecoverStream(ctx, id); err != nil {
			return "", fmt.Errorf("stream %q was not loaded: %w", id, err)
		}
	}
	hd.owners.release(id)
	op := p.Resume
	if skip {
		op = p.Skip
	}
	st, err := op(ctx, id)
	return st.State, err
}

// upgradeRequest is the body of an upgrade: the new program and the
// processor's name in it ("" keeps the stream's).
type upgradeRequest struct {
	File      string `json:"file"`
	Source    string `json:"source"`
	Processor string `json:"processor"`
}

// upgradeStream swaps the processor of a stream: one the host runs between
// two chunks (Provider.Upgrade, which refuses a stream whose source is a
// program), one the directory only stores in its records
// (provider.UpgradeStored), as "rtfshost upgrade" does offline. It answers
// the provider.UpgradeResult.
func (hd *holder) upgradeStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req upgradeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": "an upgrade request: " + err.Error()})
		return
	}
	prog, err := rtfs.Compile(req.File, []byte(req.Source))
	if err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	u := provider.Upgrade{StreamID: id, Program: prog, Processor: req.Processor, Limits: hd.a.rt.limits()}
	p := hd.h.Provider()
	var res provider.UpgradeResult
	if _, serr := p.Status(r.Context(), id); serr == nil {
		res, err = p.Upgrade(r.Context(), u)
	} else {
		res, err = upgradeStored(r.Context(), hd.h.Store(), u)
		err = storedErr(id, err)
	}
	if err != nil {
		replyError(w, err)
		return
	}
	replyJSON(w, http.StatusOK, res)
}

// upgrade asks the holder to swap the processor of stream id for the one
// prog defines (its file read by the caller as src).
func (d *holderDesk) upgrade(ctx context.Context, id, file string, src []byte, processor string) (provider.UpgradeResult, error) {
	var res provider.UpgradeResult
	body, err := json.Marshal(upgradeRequest{File: file, Source: string(src), Processor: processor})
	if err != nil {
		return res, err
	}
	err = d.c.send(ctx, http.MethodPost, "/v1/streams/"+url.PathEscape(id)+"/upgrade", body, &res)
	if errors.Is(err, errNoStream) {
		return res, noStream(d, id)
	}
	return res, err
}

// send is call with a JSON body (none when body is nil).
func (c *holderClient) send(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://rtfshost"+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, out)
}
