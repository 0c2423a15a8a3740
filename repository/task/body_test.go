package task

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapBodyKeepsWhatFits(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 1000, MaxBodyBytes} {
		body := strings.Repeat("a", n)
		assert.Equal(t, body, CapBody(body), n)
	}
}

// A 9 MB body is kept as its first ~60 KiB, a marker naming what was cut
// and the Parent:/Depends: lines of the cut part, so mozi's conventions
// read the same links as from the whole body.
func TestCapBodyOfAHugeBody(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("## Task\nParent: #7\nRead the log.\n\n")
	for i := 0; b.Len() < 9_000_000; i++ {
		fmt.Fprintf(&b, "%07d the log goes on\n", i)
		if i == 300_000 {
			b.WriteString("Depends: #12, #13\n  - depends on: #14\nparental advice: none\n")
		}
	}
	b.WriteString("* Depends: #15")
	body := b.String()

	got := CapBody(body)
	require.LessOrEqual(t, len(got), MaxBodyBytes)
	assert.True(t, utf8.ValidString(got))
	head, tail, ok := strings.Cut(got, "\n\n[… cut by mozi: ")
	require.True(t, ok, "marker")
	assert.True(t, strings.HasPrefix(body, head))
	assert.Greater(t, len(head), MaxBodyBytes*3/4)
	assert.Contains(t, tail, fmt.Sprintf("%d bytes omitted; Gitea has the whole text", len(body)-len(head)))
	assert.True(t, strings.HasSuffix(tail, "lines of the part omitted:]\nDepends: #12, #13\n  - depends on: #14\nparental advice: none\n* Depends: #15"), tail)
	assert.Equal(t, got, CapBody(got), "idempotent")
}

// No line end near the cut: it falls on a rune boundary.
func TestCapBodyCutsBetweenRunes(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("é", MaxBodyBytes)
	got := CapBody(body)
	assert.True(t, utf8.ValidString(got))
	assert.LessOrEqual(t, len(got), MaxBodyBytes)
	assert.Contains(t, got, "bytes omitted; Gitea has the whole text]")
	assert.NotContains(t, got, "Parent:/Depends:")
}

// Written in pieces of any size, a body gives what a plain reading of the
// whole text gives.
func TestBodyWriterMatchesTheWholeText(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	lines := []string{"plain text", "", "Depends: #4", "- Parent: #9", "日本語のテキスト", "depends on: #5, #6",
		strings.Repeat("x", 3000), "Depends: " + strings.Repeat("#1 ", 2000), "\tparent: #2"}
	for round := range 60 {
		var b strings.Builder
		size := MaxBodyBytes - 2000 + r.IntN(2*MaxBodyBytes)
		if round%10 == 0 {
			size = 3 * MaxBodyBytes
		}
		for b.Len() < size {
			if round%7 == 0 && r.IntN(5) == 0 {
				b.WriteString(strings.Repeat("ü", r.IntN(20000))) // long lines
			}
			b.WriteString(lines[r.IntN(len(lines))])
			b.WriteByte('\n')
		}
		body := b.String()[:size]
		if !utf8.ValidString(body) {
			body = strings.ToValidUTF8(body, "")
		}
		var w BodyWriter
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(3*MaxBodyBytes/2))
			if r.IntN(3) == 0 {
				n = min(len(rest), 1+r.IntN(8))
			}
			_, _ = w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		require.Equal(t, len(body), w.Len())
		want := referenceCap(body)
		require.Equal(t, want, w.String(), "round %d, %d bytes", round, len(body))
		require.LessOrEqual(t, len(want), MaxBodyBytes)
	}
}

// referenceCap is BodyWriter's rule applied to the whole text at once.
func referenceCap(s string) string {
	if len(s) <= MaxBodyBytes {
		return s
	}
	cut := bodyKeep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl >= cut*3/4 {
		cut = nl
	}
	var kept []string
	keptBytes := 0
	for i := cut; i < len(s); {
		nl := strings.IndexByte(s[i:], '\n')
		line := s[i:]
		if nl >= 0 {
			line = s[i : i+nl]
		}
		lineStart := i == 0 || s[i-1] == '\n'
		if lineStart && keptBytes+len(line)+1 <= maxKeptLines && conventionLine([]byte(line)) {
			kept = append(kept, line)
			keptBytes += len(line) + 1
		}
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	out := s[:cut] + fmt.Sprintf("\n\n[… cut by mozi: %d bytes omitted; Gitea has the whole text", len(s)-cut)
	if len(kept) > 0 {
		return out + ". The Parent:/Depends: lines of the part omitted:]\n" + strings.Join(kept, "\n")
	}
	return out + "]"
}

func BenchmarkCapBody(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 9_000_000; i++ {
		fmt.Fprintf(&sb, "%07d the quick brown fox jumps over the lazy dog, and the log goes on and on\n", i)
	}
	body := sb.String()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		_ = CapBody(body)
	}
}
