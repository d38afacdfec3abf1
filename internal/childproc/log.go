package childproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LogTailBytes is how much of a child's log LogTail returns: what a failure message includes.
const LogTailBytes = 16 << 10

// LogFrom returns a child's log file from byte off on (the whole of it for 0), or why it cannot be read.
func LogFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log %s: %v)", path, err)
	}
	if off > 0 && off <= int64(len(b)) {
		b = b[off:]
	}
	return string(b)
}

// LogTail returns the last LogTailBytes of a child's log file.
func LogTail(path string) string {
	s := LogFrom(path, 0)
	if len(s) > LogTailBytes {
		s = "...\n" + s[len(s)-LogTailBytes:]
	}
	return s
}

// FileSize returns the size of a file, 0 when it cannot be read: where a child's log ends before a new start.
func FileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// QuoteArgs renders a command line for a failure message, quoting the arguments a shell would split or lose.
func QuoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
