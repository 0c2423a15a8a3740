package payload

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/recording"
)

// Semantic keys are stored (webhook_effects) and compared with the keys
// of later deliveries of the same events: the recorded deliveries' keys,
// computed before the keys were streamed and long bodies cut, must not
// change.
func TestSemanticKeysOfRecordedDeliveriesAreStable(t *testing.T) {
	t.Parallel()
	golden, err := os.ReadFile("testdata/semantic-keys.txt")
	require.NoError(t, err)
	want := strings.Split(strings.TrimSpace(string(golden)), "\n")
	var got []string
	for _, dir := range []string{"gitea-1.25", "gitea-1.27.3", "forgejo-10.0.0-dev"} {
		fixtures, err := recording.LoadDir(recording.DirOf(dir))
		require.NoError(t, err)
		for _, f := range fixtures {
			hd := ReadHeaders(f.HTTPHeader())
			kind := Classify(hd.Event, hd.EventType)
			if kind == KindIgnored {
				continue
			}
			ev, err := Parse(kind, f.Body)
			require.NoError(t, err, f.Name)
			got = append(got, fmt.Sprintf("%s/%s %s", dir, f.Name, ev.SemanticKey()))
		}
	}
	assert.Equal(t, want, got)
}

// bigIssue is the recorded issue-opened delivery with the given body.
func bigIssue(t testing.TB, body string) []byte {
	t.Helper()
	f, err := recording.Find(recording.MustLoad(), "002").Edit(func(p map[string]any) {
		p["issue"].(map[string]any)["body"] = body
	})
	require.NoError(t, err)
	return f.Body
}

// A 9 MB issue body is kept as task.CapBody keeps it, and its semantic key
// still depends on the whole of it.
func TestParseKeepsWhatMoziKeepsOfAHugeBody(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("## Task\n\"Quoted\", tab\there, \\backslash\\, <html> & é ☃ 𝄞\n")
	for i := 0; b.Len() < 9_000_000; i++ {
		fmt.Fprintf(&b, "%07d the log goes on\n", i)
	}
	b.WriteString("Depends: #12\n")
	body := b.String()
	raw := bigIssue(t, body)

	ev, err := Parse(KindIssue, raw)
	require.NoError(t, err)
	assert.Equal(t, task.CapBody(body), ev.Issue.Body)
	assert.LessOrEqual(t, len(ev.Issue.Body), task.MaxBodyBytes)
	assert.True(t, strings.HasSuffix(ev.Issue.Body, "\nDepends: #12"), "the cut part's Depends: line is kept")
	sum := sha256.Sum256([]byte(body))
	assert.Equal(t, sum[:], ev.issueBodyDigest)

	again, err := Parse(KindIssue, raw)
	require.NoError(t, err)
	assert.Equal(t, ev.SemanticKey(), again.SemanticKey())
	// A change past the cut is another event.
	edited, err := Parse(KindIssue, bigIssue(t, body+"\nDepends: #13\n"))
	require.NoError(t, err)
	assert.NotEqual(t, ev.SemanticKey(), edited.SemanticKey())
	// The same text cut by mozi is not the whole body.
	cut, err := Parse(KindIssue, bigIssue(t, ev.Issue.Body))
	require.NoError(t, err)
	assert.Equal(t, ev.Issue.Body, cut.Issue.Body)
	assert.NotEqual(t, ev.SemanticKey(), cut.SemanticKey())
}

// Parsing a huge body allocates about what is kept of it, not copies of
// the whole.
func TestParseOfAHugeBodyAllocatesLittle(t *testing.T) {
	raw := bigIssue(t, strings.Repeat("the log goes on\n", 9_000_000/16))
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(KindIssue, raw); err != nil {
				b.Fatal(err)
			}
		}
	}).AllocedBytesPerOp()
	assert.Less(t, allocs, int64(512<<10), "bytes allocated to parse a %d-byte delivery", len(raw))
}

// Unquoted piece by piece, a string gives what jsontext.AppendUnquote and
// Clean give, whatever its escapes.
func TestLongTextUnquotesAsTheDecoderDoes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"plain", " ", "\n", "\t", `"`, `\`, "/", "é", "☃", "𝄞", "\x00", "\u2028", "\x1f", "<>&",
		"Depends: #3\n"}
	for round := range 30 {
		var b strings.Builder
		size := r.IntN(3 * task.MaxBodyBytes)
		if round < 3 {
			size = task.MaxBodyBytes - 1 + round // around the cut
		}
		for b.Len() < size {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		text := b.String()
		quoted, err := jsontext.AppendQuote(nil, text)
		require.NoError(t, err)
		if round%2 == 1 {
			// Other spellings of the same text: every character escaped
			// where JSON allows it.
			quoted = []byte(strings.NewReplacer("/", `\/`, "é", `\u00e9`, "𝄞", `\ud834\udd1e`, "p", `\u0070`).Replace(string(quoted)))
		}
		var got struct {
			Body wireText `json:"body"`
		}
		require.NoError(t, jsonv2.Unmarshal([]byte(`{"body":`+string(quoted)+`}`), &got))
		whole := Clean(text)
		assert.Equal(t, task.CapBody(whole), got.Body.text, "round %d", round)
		if len(whole) > task.MaxBodyBytes {
			sum := sha256.Sum256([]byte(whole))
			assert.Equal(t, sum[:], got.Body.digest, "round %d", round)
		} else {
			assert.Nil(t, got.Body.digest, "round %d", round)
		}
	}
}

func TestTextIsAStringOrNull(t *testing.T) {
	t.Parallel()
	var v struct {
		Body wireText `json:"body"`
	}
	require.NoError(t, jsonv2.Unmarshal([]byte(`{"body":null}`), &v))
	assert.Empty(t, v.Body.text)
	_, err := Parse(KindIssue, []byte(`{"repository":{"full_name":"acme/widget"},"issue":{"number":1,"body":5}}`))
	require.ErrorIs(t, err, ErrMalformed)
	assert.Contains(t, err.Error(), "/issue/body is a JSON number, want string")
	_, err = Parse(KindIssue, []byte("{\"repository\":{\"full_name\":\"acme/widget\"},\"issue\":{\"number\":1,\"body\":\"a\xffb\"}}"))
	require.ErrorIs(t, err, ErrMalformed)
}
