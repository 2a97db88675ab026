package host

import (
	"errors"
	"testing"

	"github.com/rtfshost/rtfshost/provider"
)

// An owner's "cannot resume: it is cancelled" reaches the asking host as
// a *provider.EndedError, errors.Is-matching provider.ErrEnded, with the
// owner's text; other errors stay plain text.
func TestForwardedEndedError(t *testing.T) {
	req := provider.Request{Verb: "resume", StreamID: "s"}
	sent := &provider.EndedError{StreamID: "s", Verb: "resume", State: provider.StateCancelled}
	_, err := decodeAnswer(encodeAnswer(provider.Answer{}, sent), req)
	var ended *provider.EndedError
	if !errors.Is(err, provider.ErrEnded) || !errors.As(err, &ended) || ended.State != provider.StateCancelled || err.Error() != sent.Error() {
		t.Fatalf("decoded %T %v, want %v", err, err, sent)
	}
	_, err = decodeAnswer(encodeAnswer(provider.Answer{}, errors.New("boom")), req)
	if err == nil || errors.Is(err, provider.ErrEnded) || err.Error() != "boom" {
		t.Fatalf("decoded %v, want boom", err)
	}
}
