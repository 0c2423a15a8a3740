package task

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxBodyBytes bounds what mozi keeps of an issue's body: in memory, in
// the issues table and in a task's copy (issue_body_cache). A prompt shows
// at most its toolchain section's budget of the body (28 KiB of a 64 KiB
// prompt, prompts.DefaultSections), so keeping more would only cost
// memory, copies and disk; Gitea keeps the whole text, and the cut says
// so. A longer body keeps its beginning and, after the marker, the
// Parent: and Depends: lines of the part cut off, which mozi reads.
const MaxBodyBytes = 64 << 10

// maxKeptLines bounds the Parent:/Depends: lines kept from the part of a
// body that is cut off; bodyKeep is what is kept of its beginning, so the
// beginning, the marker and those lines fit in MaxBodyBytes.
const (
	maxKeptLines = 4 << 10
	bodyKeep     = MaxBodyBytes - maxKeptLines - 256
)

// CapBody returns body when it is at most MaxBodyBytes long; otherwise
// what mozi keeps of it (see BodyWriter), in at most MaxBodyBytes that
// share no memory with body, so the long text can be collected.
// CapBody(CapBody(s)) == CapBody(s).
func CapBody(body string) string {
	if len(body) <= MaxBodyBytes {
		return body
	}
	var w BodyWriter
	_, _ = w.WriteString(body)
	return w.String()
}

// BodyWriter keeps what mozi keeps of a body written to it in pieces,
// without ever holding more than MaxBodyBytes of it: the whole body when
// it fits, else its beginning (cut at a line end when one is near, never
// inside a UTF-8 sequence), a marker saying how many bytes were cut off,
// and the Parent: and Depends: lines found in the part cut off (up to
// 4 KiB of them). Writing a body and reading String gives CapBody(body).
type BodyWriter struct {
	head []byte // the first MaxBodyBytes bytes
	n    int    // bytes written
	cut  int    // where the kept beginning ends, once head is full

	// The line being written beyond head: where it starts, how long it
	// is so far, and its first maxKeptLines+1 bytes.
	lineStart, lineLen int
	line               []byte

	kept []byte // Parent:/Depends: lines of the part cut off, each ending in \n
}

// Len is the number of bytes written.
func (w *BodyWriter) Len() int { return w.n }

// Write never fails.
func (w *BodyWriter) Write(p []byte) (int, error) {
	n := len(p)
	if room := MaxBodyBytes - len(w.head); room > 0 {
		take := min(room, len(p))
		if w.head == nil {
			w.head = make([]byte, 0, min(MaxBodyBytes, max(len(p), 512)))
		}
		w.head = append(w.head, p[:take]...)
		w.n += take
		p = p[take:]
		if len(w.head) < MaxBodyBytes {
			return n, nil
		}
		w.headFull()
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.extendLine(p)
			w.n += len(p)
			return n, nil
		}
		w.extendLine(p[:i])
		w.n += i + 1
		w.endLine()
		w.lineStart, w.lineLen, w.line = w.n, 0, w.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

// WriteString is Write for a string, without converting it.
func (w *BodyWriter) WriteString(s string) (int, error) {
	n := len(s)
	// Through one small buffer, so s is never copied whole.
	buf := make([]byte, min(len(s), 32<<10))
	for len(s) > 0 {
		k := copy(buf, s)
		_, _ = w.Write(buf[:k])
		s = s[k:]
	}
	return n, nil
}

// headFull decides the cut, once the beginning is known, and reads the
// whole lines of head that are cut off.
func (w *BodyWriter) headFull() {
	w.cut = runeStart(w.head, bodyKeep)
	if nl := bytes.LastIndexByte(w.head[:w.cut], '\n'); nl >= w.cut*3/4 {
		w.cut = nl
	}
	start := w.cut
	if start > 0 && w.head[start-1] != '\n' {
		// Cut inside a line: the next line is the first one cut off.
		nl := bytes.IndexByte(w.head[start:], '\n')
		if nl < 0 {
			// That line goes on beyond head: none of it is kept.
			w.lineStart, w.lineLen, w.line = -1, 0, make([]byte, 0, 64)
			return
		}
		start += nl + 1
	}
	for start < len(w.head) {
		nl := bytes.IndexByte(w.head[start:], '\n')
		if nl < 0 {
			break
		}
		w.keepLine(w.head[start:start+nl], nl)
		start += nl + 1
	}
	// The last line of head goes on beyond it.
	w.lineStart, w.lineLen = start, 0
	w.line = make([]byte, 0, 64)
	w.extendLine(w.head[start:])
}

func (w *BodyWriter) extendLine(p []byte) {
	if room := maxKeptLines + 1 - len(w.line); room > 0 {
		w.line = append(w.line, p[:min(room, len(p))]...)
	}
	w.lineLen += len(p)
}

func (w *BodyWriter) endLine() {
	if w.lineStart >= w.cut {
		w.keepLine(w.line, w.lineLen)
	}
}

// keepLine keeps a line of the part cut off that mozi reads, when it fits.
func (w *BodyWriter) keepLine(line []byte, length int) {
	if length != len(line) || len(w.kept)+length+1 > maxKeptLines || !conventionLine(line) {
		return
	}
	w.kept = append(append(w.kept, line...), '\n')
}

// conventionLine is a line that may be a Parent: or Depends: line
// (webhook/rules/conventions reads them exactly).
func conventionLine(line []byte) bool {
	line = bytes.TrimLeft(line, " \t")
	if len(line) > 0 && (line[0] == '-' || line[0] == '*') {
		line = bytes.TrimLeft(line[1:], " \t")
	}
	return hasPrefixFold(line, "parent") || hasPrefixFold(line, "depends")
}

// hasPrefixFold reports whether b starts with the lower-case ASCII prefix,
// in any case.
func hasPrefixFold(b []byte, prefix string) bool {
	if len(b) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		if b[i]|0x20 != prefix[i] {
			return false
		}
	}
	return true
}

// String returns what is kept of the body written.
func (w *BodyWriter) String() string {
	if w.n <= MaxBodyBytes {
		return string(w.head)
	}
	var b strings.Builder
	b.Grow(w.cut + 200 + len(w.kept))
	b.Write(w.head[:w.cut])
	b.WriteString("\n\n[… cut by mozi: ")
	b.WriteString(strconv.Itoa(w.n - w.cut))
	b.WriteString(" bytes omitted; Gitea has the whole text")
	kept := w.kept
	if w.lineStart >= w.cut && w.lineLen == len(w.line) && len(kept)+w.lineLen+1 <= maxKeptLines && conventionLine(w.line) {
		kept = append(append(kept[:len(kept):len(kept)], w.line...), '\n')
	}
	if len(kept) > 0 {
		b.WriteString(". The Parent:/Depends: lines of the part omitted:]\n")
		b.Write(bytes.TrimSuffix(kept, []byte("\n")))
	} else {
		b.WriteString("]")
	}
	return b.String()
}

// runeStart moves i back to the start of the UTF-8 sequence it falls in.
func runeStart(b []byte, i int) int {
	for i > 0 && i < len(b) && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}
