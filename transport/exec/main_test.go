package exec

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// helperEnv makes the test binary a program for the exec transport to run
// (see helperMain) instead of the tests.
const helperEnv = "RTFSHOST_EXEC_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperMain is the child program. Modes:
//
//	lines N        write the lines 0..N-1 and exit 0
//	endless FILE   write lines 0, 1, ... forever, recording in FILE (8
//	               bytes, little endian) how many were written
//	fail           write two lines to stderr and exit 3
//	long N         write one line of N bytes
//	stderr N       write N lines to stdout and to stderr, alternating
//	ndjson         write NDJSON with a blank line and no final newline
//	ndjson-bad     write NDJSON whose fourth line is not JSON
//	sleep          write one line, then sleep for an hour
func helperMain(mode string, args []string) int {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	arg := func(i int) int {
		if i >= len(args) {
			return 0
		}
		n, _ := strconv.Atoi(args[i])
		return n
	}
	switch mode {
	case "lines":
		for i := range arg(0) {
			out.WriteString(strconv.Itoa(i))
			out.WriteByte('\n')
		}
	case "endless":
		count, err := transporttest.Counter(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(os.Stdout, "%d\n", i); err != nil {
				return 1
			}
			count()
		}
	case "fail":
		fmt.Fprintln(os.Stderr, "warming up")
		fmt.Fprintln(os.Stderr, "boom: the disk is on fire")
		return 3
	case "long":
		buf := make([]byte, arg(0))
		for i := range buf {
			buf[i] = 'x'
		}
		out.Write(buf)
		out.WriteByte('\n')
	case "stderr":
		for i := range arg(0) {
			fmt.Fprintf(os.Stdout, "out %d\n", i)
			fmt.Fprintf(os.Stderr, "err %d\n", i)
			time.Sleep(time.Millisecond)
		}
	case "ndjson":
		out.WriteString("{\"type\":\"text\",\"text\":\"hi\"}\n\n[1,2]\n{\"type\":\"done\"}")
	case "ndjson-bad":
		out.WriteString("{\"n\":1}\n\nstarting up...\n{\"n\":2}\n")
	case "sleep":
		fmt.Fprintln(os.Stdout, "started")
		out.Flush()
		time.Sleep(time.Hour)
	}
	return 0
}
