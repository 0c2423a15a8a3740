package payload

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"reflect"
	"unicode/utf16"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/moziplus/mozi/repository/task"
)

// wireText is an issue body as mozi keeps it: cleaned (Clean) and capped
// (task.CapBody). A body longer than that is unquoted piece by piece
// straight from the payload into what is kept and a SHA-256 of the whole,
// so reading a 9 MB body allocates about 64 KiB, where a plain string
// field costs two copies of it (the JSON decoder unquotes into a buffer,
// then copies that into the string).
type wireText struct {
	text string
	// digest is the SHA-256 of the whole cleaned text when text is cut,
	// for the semantic key.
	digest []byte
}

var _ jsonv2.UnmarshalerFrom = (*wireText)(nil)

// UnmarshalJSONFrom reads a JSON string (null: empty).
func (t *wireText) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue() // validated, UTF-8 included; valid until the next read
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		*t = wireText{}
		return nil
	case '"':
	default:
		return &jsonv2.SemanticError{JSONKind: v.Kind(), GoType: reflect.TypeFor[string]()}
	}
	// The quoted form is never shorter than the text: a short one fits.
	if len(v) <= task.MaxBodyBytes+2 {
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return err
		}
		*t = wireText{text: Clean(string(s))}
		return nil
	}
	sink := textSink{sum: sha256.New()}
	if err := unquoteTo(&sink, v); err != nil {
		return err
	}
	*t = wireText{text: sink.kept.String()}
	if sink.kept.Len() > task.MaxBodyBytes {
		t.digest = sink.sum.Sum(nil)
	}
	return nil
}

// textSink feeds unquoted text to the kept copy and the digest, in
// blocks rather than escape by escape.
type textSink struct {
	buf  []byte
	kept task.BodyWriter
	sum  hash.Hash
}

const textBlock = 32 << 10

func (s *textSink) write(p []byte) {
	for len(p) > 0 {
		if s.buf == nil {
			s.buf = make([]byte, 0, textBlock)
		}
		n := min(len(p), textBlock-len(s.buf))
		s.buf = append(s.buf, p[:n]...)
		p = p[n:]
		if len(s.buf) == textBlock {
			s.flush()
		}
	}
}

func (s *textSink) writeRune(r rune) {
	if len(s.buf)+utf8.UTFMax > textBlock {
		s.flush()
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, textBlock)
	}
	s.buf = utf8.AppendRune(s.buf, r)
}

func (s *textSink) flush() {
	s.sum.Write(s.buf)
	_, _ = s.kept.Write(s.buf)
	s.buf = s.buf[:0]
}

var errBadEscape = errors.New("invalid escape sequence in JSON string")

// unquoteTo writes the text of the quoted JSON string v, as
// jsontext.AppendUnquote and Clean would make it: escapes decoded, NUL
// dropped. v comes validated from the decoder (escapes well formed,
// UTF-8 valid, surrogates paired), so plain runs pass through as they are.
func unquoteTo(s *textSink, v []byte) error {
	in := v[1 : len(v)-1]
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\\')
		if i < 0 {
			s.write(in)
			break
		}
		s.write(in[:i])
		r, n := unescape(in[i:])
		if n == 0 {
			return errBadEscape
		}
		if r != 0 {
			s.writeRune(r)
		}
		in = in[i+n:]
	}
	s.flush()
	return nil
}

// unescape decodes the escape sequence esc starts with; n is its length (0:
// malformed). A lone surrogate becomes U+FFFD, as jsontext does when it
// lets one through.
func unescape(esc []byte) (r rune, n int) {
	if len(esc) < 2 {
		return 0, 0
	}
	switch esc[1] {
	case '"', '\\', '/':
		return rune(esc[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r1, ok := hex4(esc[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r1) {
			return r1, 6
		}
		if len(esc) >= 12 && esc[6] == '\\' && esc[7] == 'u' {
			if r2, ok := hex4(esc[8:]); ok {
				if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
					return r, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
