package browser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a browser, Find fails (the tests that need one fail, never skip)
// and says what to install.
func TestFindWithoutBrowser(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvPath, "")
	_, err := Find()
	if err == nil {
		t.Fatal("Find found a browser on an empty PATH")
	}
	for _, want := range []string{"apt-get install -y chromium", "$" + EnvPath, "README"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Find's error %q does not say %q", err, want)
		}
	}
}

// The README, all a newcomer follows, says that the test command needs
// Chromium (and how to name one) and Node.js with npm, and that the first
// run compiles for a while; .ci/run, what CI runs from a clean checkout,
// installs them.
func TestReadmeSaysWhatTheTestsNeed(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	for _, want := range []string{"go test -race ./...", "Chromium, for the dashboard's tests", "apt-get install chromium", "Node.js with npm", "apt-get install nodejs npm", "$" + EnvPath, "fail (they never skip)", "a minute or two"} {
		if !strings.Contains(text, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "apt-get install -y -qq chromium") || !strings.Contains(string(ci), "apt-get install -y -qq nodejs npm") || !strings.Contains(string(ci), "go test -race ./...") {
		t.Errorf(".ci/run does not install chromium, nodejs and npm before the README's test command")
	}
}
