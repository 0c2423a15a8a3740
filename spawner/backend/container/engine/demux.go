package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Stream kinds of the multiplexed format.
const (
	frameStdin  = 0
	frameStdout = 1
	frameStderr = 2
	frameSystem = 3 // the engine's own error
)

// Demux copies a multiplexed stream (a container attached without a TTY,
// or its logs) to stdout and stderr until the stream ends. Each frame is
// an 8-byte header — the stream kind, three zero bytes, the payload's
// length as a big-endian uint32 — and the payload. A frame of the
// engine's own error stream ends the copy with that error.
func Demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read the container's output: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case frameStdout:
			w = stdout
		case frameStderr:
			w = stderr
		case frameStdin:
			w = io.Discard
		case frameSystem:
			msg, _ := io.ReadAll(io.LimitReader(r, min(n, 4096)))
			return fmt.Errorf("the engine's stream said: %s", msg)
		default:
			return fmt.Errorf("read the container's output: not a multiplexed stream (frame kind %d)", hdr[0])
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return fmt.Errorf("read the container's output: %w", err)
		}
	}
}
