package prompts

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/moziplus/mozi/templates"
)

// Layer orders the kinds of sections: L0 iron rules, L1 role, L2 engine
// sections, L3 skills.
type Layer int

// Layers.
const (
	L0 Layer = iota
	L1
	L2
	L3
)

func (l Layer) String() string { return "L" + strconv.Itoa(int(l)) }

// Section is one part of a prompt.
type Section interface {
	Name() string
	Layer() Layer
	// Priority orders sections within the prompt (lower first).
	Priority() int
	// Budget is the section's own size limit in bytes.
	Budget() int
	// Render writes the section within budget bytes ("" leaves it out).
	Render(r *Renderer, budget int) string
}

// Renderer gives sections what they render from.
type Renderer struct {
	In   *Input
	Set  *templates.Set
	Vars templates.Vars
}

// Text renders a template text with the input's placeholders and extra ones.
func (r *Renderer) Text(text string, extra ...string) string {
	if len(extra) == 0 {
		return templates.Render(text, r.Vars)
	}
	vars := make(templates.Vars, len(r.Vars)+len(extra)/2)
	for k, v := range r.Vars {
		vars[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	return templates.Render(text, vars)
}

// Section renders one of the template set's section texts.
func (r *Renderer) Section(name string, extra ...string) string {
	return strings.TrimRight(r.Text(r.Set.Section(name), extra...), "\n")
}

// Label renders one of the template set's labels.
func (r *Renderer) Label(name string, extra ...string) string {
	return r.Text(r.Set.Label(name), extra...)
}

// Cut shortens text to at most budget bytes, marking the cut, at a line
// end when one is near, and never inside a UTF-8 sequence.
func (r *Renderer) Cut(text string, budget int) string {
	if len(text) <= budget {
		return text
	}
	if budget <= 0 {
		return ""
	}
	marker := "\n" + r.Label("cut", "bytes", strconv.Itoa(len(text)-budget))
	keep := budget - len(marker) - 8 // room for the omitted count's digits growing
	if keep <= 0 {
		return cutRunes(text, budget)
	}
	keep = runeStart(text, keep)
	if nl := strings.LastIndexByte(text[:keep], '\n'); nl >= keep*3/4 {
		keep = nl
	}
	return text[:keep] + "\n" + r.Label("cut", "bytes", strconv.Itoa(len(text)-keep))
}

// runeStart moves i back to the start of the UTF-8 sequence it falls in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

func cutRunes(s string, n int) string { return s[:runeStart(s, n)] }
