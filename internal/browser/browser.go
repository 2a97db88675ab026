// Package browser finds and starts the headless Chromium that the
// dashboard's end-to-end tests drive with github.com/chromedp/chromedp.
//
// Find looks for the browser (the Debian package chromium, which .ci/run
// installs when it is missing); New starts it. Nothing here downloads a
// browser: a machine without one makes the tests fail, never skip.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/chromedp/chromedp"
)

// EnvPath names a browser executable to use instead of looking one up.
const EnvPath = "RTFSHOST_CHROME"

// candidates are the executables Find tries, in order.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// Find returns the path of a Chromium-based browser: $RTFSHOST_CHROME, else
// the first of chromium, chromium-browser, google-chrome... on PATH. The
// error says how to install one.
func Find() (string, error) {
	if p := strings.TrimSpace(os.Getenv(EnvPath)); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("browser: $%s: %w", EnvPath, err)
		}
		return p, nil
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: no Chromium found on PATH (tried " + strings.Join(candidates, ", ") +
		"): the dashboard's tests need one (the README says so); install it (Debian: apt-get install -y chromium; macOS: brew install --cask chromium; .ci/run does) or set $" + EnvPath)
}

// New starts a headless browser at exe, with a 1440x900 window, and
// returns a chromedp context for a tab and the function that closes the
// browser and waits for it to exit. The sandbox is off so that it runs
// as root in CI containers. A browser that crashes while it starts (it
// happens to Chromium on a loaded machine) is started again, up to three
// times; the error is the last start's.
func New(ctx context.Context, exe string) (context.Context, context.CancelFunc, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
	)
	var err error
	for range 3 {
		actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
		tctx, cancelTab := chromedp.NewContext(actx)
		if err = chromedp.Do(tctx, chromedp.Navigate("about:blank")); err == nil { // starts the browser and its first tab
			return tctx, func() {
				cancelTab()
				cancelAlloc()
			}, nil
		}
		cancelTab()
		cancelAlloc()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, fmt.Errorf("browser: starting %s: %w", exe, err)
}
