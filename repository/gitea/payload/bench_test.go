package payload

import (
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
