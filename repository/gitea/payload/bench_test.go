package payload

import (
	"strings"
	"testing"

	"github.com/moziplus/mozi/webhook/recording"
)

func BenchmarkParsePullRequest(b *testing.B) {
	var body []byte
	for _, f := range recording.MustLoad() {
		if f.Name[:3] == "019" {
			body = f.Body
		}
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(KindPullRequest, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHugeIssue parses an issues delivery whose body is 9 MB.
func BenchmarkParseHugeIssue(b *testing.B) {
	body := bigIssue(b, strings.Repeat("the log goes on and on and on, line after line\n", 9_000_000/48))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(KindIssue, body); err != nil {
			b.Fatal(err)
		}
	}
}
