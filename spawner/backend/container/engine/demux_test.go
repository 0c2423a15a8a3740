package engine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func frame(kind byte, payload string) []byte {
	h := make([]byte, 8, 8+len(payload))
	h[0] = kind
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

func TestDemux(t *testing.T) {
	t.Parallel()
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	for _, tc := range []struct {
		name           string
		in             []byte
		stdout, stderr string
		err            string
	}{
		{name: "empty"},
		{name: "both streams", in: cat(frame(1, "out1\n"), frame(2, "err1\n"), frame(1, "out2\n")),
			stdout: "out1\nout2\n", stderr: "err1\n"},
		{name: "empty frame", in: cat(frame(1, ""), frame(1, "x")), stdout: "x"},
		{name: "stdin echo ignored", in: cat(frame(0, "typed"), frame(1, "x")), stdout: "x"},
		{name: "engine error", in: cat(frame(1, "x"), frame(3, "boom")), stdout: "x", err: "the engine's stream said: boom"},
		{name: "cut header", in: cat(frame(1, "x"), []byte{1, 0, 0}), stdout: "x", err: "unexpected EOF"},
		{name: "cut payload", in: cat(frame(1, "x"), frame(2, "abcdef")[:10]), stdout: "x", stderr: "ab", err: "EOF"},
		{name: "not multiplexed", in: []byte("hello world, a TTY stream"), err: "not a multiplexed stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			err := Demux(bytes.NewReader(tc.in), &out, &errb)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
			require.Equal(t, tc.stdout, out.String())
			require.Equal(t, tc.stderr, errb.String())
		})
	}
}

func TestNegotiate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max, min, want, err string
	}{
		{max: "1.41", min: "1.24", want: "1.41"},     // podman 4 and 5
		{max: "1.43", min: "1.12", want: "1.43"},     // Docker 24
		{max: "1.51", min: "1.44", want: MaxVersion}, // Docker 29
		{max: "1.40", min: "1.12", err: "older than 1.41"},
		{max: "1.52", min: "1.50", err: "needs at least 1.50"},
		{max: "", err: "does not say"},
	} {
		got, err := negotiate(tc.max, tc.min)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "engine %s..%s", tc.min, tc.max)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "engine %s..%s", tc.min, tc.max)
	}
}
