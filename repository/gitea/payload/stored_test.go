package payload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/webhook/recording"
)

// What the intake stores of a parsed delivery comes back as the same
// event, with the same semantic key, for every recorded delivery.
func TestEncodedEventsComeBackTheSame(t *testing.T) {
	t.Parallel()
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
			enc, err := ev.Encode()
			require.NoError(t, err, f.Name)
			got, err := DecodeEvent(enc)
			require.NoError(t, err, f.Name)
			assert.Equal(t, ev, got, f.Name)
			assert.Equal(t, ev.SemanticKey(), got.SemanticKey(), f.Name)
		}
	}
}

// An event with a huge issue body encodes in about what mozi keeps of the
// body, and keeps the key of the whole body.
func TestEncodedHugeIssueKeepsItsKey(t *testing.T) {
	t.Parallel()
	ev, err := Parse(KindIssue, bigIssue(t, strings.Repeat("the log goes on\n", 9_000_000/16)))
	require.NoError(t, err)
	require.NotNil(t, ev.issueBodyDigest)
	enc, err := ev.Encode()
	require.NoError(t, err)
	assert.Less(t, len(enc), 80<<10)
	got, err := DecodeEvent(enc)
	require.NoError(t, err)
	assert.Equal(t, ev, got)
	assert.Equal(t, ev.SemanticKey(), got.SemanticKey())
}

func TestDecodeRefusesOtherVersions(t *testing.T) {
	t.Parallel()
	ev, err := Parse(KindIssue, recording.Find(recording.MustLoad(), "002").Body)
	require.NoError(t, err)
	enc, err := ev.Encode()
	require.NoError(t, err)
	enc[0]++
	_, err = DecodeEvent(enc)
	require.ErrorIs(t, err, ErrStaleEvent)
	_, err = DecodeEvent(nil)
	require.ErrorIs(t, err, ErrStaleEvent)
	_, err = DecodeEvent([]byte{storedEventVersion, '{'})
	require.Error(t, err)
}
