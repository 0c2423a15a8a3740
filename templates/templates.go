package templates

import (
	"embed"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates/yamlpos"
)

//go:embed defaults/*.yaml
var defaults embed.FS

// DefaultLocale is the embedded set used when the configuration names none.
const DefaultLocale = "en"

// Locales are the embedded default sets.
var Locales = []string{DefaultLocale, "zh"}

// file is the YAML shape of a template set (a default or an override).
type file struct {
	Locale   string                `yaml:"locale"`
	Actions  map[string]actionFile `yaml:"actions"`
	Labels   map[string]string     `yaml:"labels"`
	Sections map[string]string     `yaml:"sections"`
}

type actionFile struct {
	Hint           string                  `yaml:"hint"`
	Role           string                  `yaml:"role"`
	Steps          []string                `yaml:"steps"`
	OutputTemplate *string                 `yaml:"output_template"`
	Business       map[string]businessFile `yaml:"business"`
}

type businessFile struct {
	Hint           string   `yaml:"hint"`
	Role           string   `yaml:"role"`
	Steps          []string `yaml:"steps"`
	OutputTemplate *string  `yaml:"output_template"`
}

// Template is what one (action, business type) asks of the agent.
type Template struct {
	Hint           string
	Role           string
	Steps          []string
	OutputTemplate string
}

// Set is a loaded, validated template set.
type Set struct {
	Locale   string
	actions  map[task.ActionType]Template
	business map[task.BusinessType]Template // issue_assigned
	labels   map[string]string
	sections map[string]string
	// origin says where each text came from ("en.yaml:12"), for errors.
	origin map[string]string
}

// Load builds the set of a locale, with an optional override file merged
// over it, and validates it.
func Load(locale, overridePath string) (*Set, error) {
	if !slices.Contains(Locales, locale) {
		return nil, fmt.Errorf("templates: unknown locale %q (want one of %v)", locale, Locales)
	}
	name := "defaults/" + locale + ".yaml"
	data, err := defaults.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("templates: read embedded %s: %w", name, err)
	}
	s := &Set{Locale: locale, actions: map[task.ActionType]Template{},
		business: map[task.BusinessType]Template{}, labels: map[string]string{},
		sections: map[string]string{}, origin: map[string]string{}}
	if err := s.merge("templates/"+name, data); err != nil {
		return nil, err
	}
	if overridePath != "" {
		data, err := os.ReadFile(overridePath)
		if err != nil {
			return nil, fmt.Errorf("templates: read override: %w", err)
		}
		if err := s.merge(overridePath, data); err != nil {
			return nil, err
		}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// merge folds one file over the set: each text it names replaces the
// set's; what it leaves out stays.
func (s *Set) merge(source string, data []byte) error {
	var f file
	pos, err := yamlpos.Decode(source, data, &f)
	if err != nil {
		return fmt.Errorf("templates: %w", err)
	}
	at := func(key string) string { return fmt.Sprintf("%s:%d", source, pos.Line(key)) }
	fail := func(key, format string, args ...any) error {
		return fmt.Errorf("templates: %s: %s: %s", at(key), key, fmt.Sprintf(format, args...))
	}
	if f.Locale != "" && f.Locale != s.Locale {
		return fail("locale", "the file is for locale %q but the set is %q", f.Locale, s.Locale)
	}
	for _, name := range sortedKeys(f.Actions) {
		af := f.Actions[name]
		key := "actions." + name
		action, err := task.ParseActionType(name)
		if err != nil {
			return fail(key, "%v", err)
		}
		t := s.actions[action]
		mergeTemplate(&t, af.Hint, af.Role, af.Steps, af.OutputTemplate, key, at, s.origin)
		s.actions[action] = t
		if len(af.Business) > 0 && action != task.ActionIssueAssigned {
			return fail(key+".business", "only issue_assigned is refined by business type")
		}
		for _, bname := range sortedKeys(af.Business) {
			bf := af.Business[bname]
			bkey := key + ".business." + bname
			bt, err := task.ParseBusinessType(bname)
			if err != nil {
				return fail(bkey, "%v", err)
			}
			t := s.business[bt]
			mergeTemplate(&t, bf.Hint, bf.Role, bf.Steps, bf.OutputTemplate, bkey, at, s.origin)
			s.business[bt] = t
		}
	}
	for _, name := range sortedKeys(f.Labels) {
		if !slices.Contains(LabelNames, name) {
			return fail("labels."+name, "unknown label (want one of %s)", strings.Join(LabelNames, ", "))
		}
		s.labels[name] = f.Labels[name]
		s.origin["label."+name] = at("labels." + name)
	}
	for _, name := range sortedKeys(f.Sections) {
		if !slices.Contains(SectionNames, name) {
			return fail("sections."+name, "unknown section (want one of %s)", strings.Join(SectionNames, ", "))
		}
		s.sections[name] = f.Sections[name]
		s.origin["section."+name] = at("sections." + name)
	}
	return nil
}

func mergeTemplate(t *Template, hint, role string, steps []string, output *string, key string,
	at func(string) string, origin map[string]string) {
	if hint != "" {
		t.Hint, origin[key+".hint"] = hint, at(key+".hint")
	}
	if role != "" {
		t.Role, origin[key+".role"] = role, at(key+".role")
	}
	if steps != nil {
		t.Steps, origin[key+".steps"] = steps, at(key+".steps")
		for i := range steps {
			k := fmt.Sprintf("%s.steps[%d]", key, i)
			origin[k] = at(k)
		}
	}
	if output != nil {
		t.OutputTemplate, origin[key+".output_template"] = *output, at(key+".output_template")
	}
}

// validate checks the set is complete and every placeholder is known where
// it is used.
func (s *Set) validate() error {
	var problems []string
	bad := func(key, format string, args ...any) {
		where := s.where(key)
		problems = append(problems, fmt.Sprintf("%s: %s: %s", where, key, fmt.Sprintf(format, args...)))
	}
	check := func(key, text string, known map[string]bool) {
		for _, p := range Placeholders(text) {
			if !known[p] {
				bad(key, "unknown placeholder {%s}", p)
			}
		}
	}
	for _, a := range task.ActionTypes {
		key := "actions." + string(a)
		t, ok := s.actions[a]
		if !ok {
			bad(key, "missing: every action type needs a template")
			continue
		}
		known := allowed(actionVars[a])
		if a == task.ActionIssueAssigned {
			for _, b := range task.BusinessTypes {
				bkey := key + ".business." + string(b)
				bt, ok := s.business[b]
				if !ok {
					bad(bkey, "missing: every business type needs a template")
					continue
				}
				s.checkTemplate(merged(t, bt), bkey, a, known, check, bad)
			}
			continue
		}
		s.checkTemplate(t, key, a, known, check, bad)
	}
	for _, name := range LabelNames {
		if _, ok := s.labels[name]; !ok {
			bad("labels."+name, "missing")
		}
		check("label."+name, s.labels[name], allowed(sectionVars["label."+name]))
	}
	for _, name := range SectionNames {
		if strings.TrimSpace(s.sections[name]) == "" {
			bad("sections."+name, "missing or empty")
		}
		check("section."+name, s.sections[name], allowed(sectionVars["section."+name]))
	}
	if len(problems) > 0 {
		return fmt.Errorf("templates: %s", strings.Join(problems, "; "))
	}
	return nil
}

func (s *Set) checkTemplate(t Template, key string, a task.ActionType, known map[string]bool,
	check func(string, string, map[string]bool), bad func(string, string, ...any)) {
	if strings.TrimSpace(t.Hint) == "" {
		bad(key+".hint", "is empty")
	}
	if len(t.Steps) == 0 {
		bad(key+".steps", "is empty")
	}
	out := strings.TrimSpace(t.OutputTemplate)
	switch {
	case a.Notification() && out != "":
		bad(key+".output_template", "a notification has no report: leave it empty")
	case !a.Notification() && out == "":
		bad(key+".output_template", "is empty: the agent's [Action Report] needs a template")
	case !a.Notification() && !strings.HasPrefix(strings.ToLower(out), "[action report]"):
		bad(key+".output_template", "must start with [Action Report]")
	}
	check(key+".hint", t.Hint, known)
	check(key+".role", t.Role, known)
	for i, step := range t.Steps {
		check(fmt.Sprintf("%s.steps[%d]", key, i), step, known)
	}
	check(key+".output_template", t.OutputTemplate, known)
}

// where names the file and line a text came from: its own key's, or its
// closest ancestor's.
func (s *Set) where(key string) string {
	for k := key; k != ""; {
		if w, ok := s.origin[k]; ok {
			return w
		}
		i := strings.LastIndexAny(k, ".[")
		if i <= 0 {
			break
		}
		k = k[:i]
	}
	return "templates (" + s.Locale + ")"
}

// merged lays a business template over its action's.
func merged(base, over Template) Template {
	if over.Hint != "" {
		base.Hint = over.Hint
	}
	if over.Role != "" {
		base.Role = over.Role
	}
	if over.Steps != nil {
		base.Steps = over.Steps
	}
	if over.OutputTemplate != "" {
		base.OutputTemplate = over.OutputTemplate
	}
	return base
}

// Resolve returns the template of an action (and, for issue_assigned, its
// business type; feature when none is given).
func (s *Set) Resolve(a task.ActionType, b task.BusinessType) (Template, error) {
	t, ok := s.actions[a]
	if !ok {
		return Template{}, fmt.Errorf("templates: no template for action %q", a)
	}
	if a != task.ActionIssueAssigned {
		return t, nil
	}
	if b == "" {
		b = task.BusinessFeature
	}
	bt, ok := s.business[b]
	if !ok {
		return Template{}, fmt.Errorf("templates: no template for business type %q", b)
	}
	return merged(t, bt), nil
}

// Section returns a section's text.
func (s *Set) Section(name string) string { return s.sections[name] }

// Label returns a label's text.
func (s *Set) Label(name string) string { return s.labels[name] }

var reportFieldRE = regexp.MustCompile(`(?m)^\s*\*\*([^*\n]+?)\s*(?:[:：]\s*)?\*\*`)

// ReportFields lists the "**Field**" names of an action's output template:
// what its [Action Report] must contain.
func (s *Set) ReportFields(a task.ActionType, b task.BusinessType) []string {
	t, err := s.Resolve(a, b)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range reportFieldRE.FindAllStringSubmatch(t.OutputTemplate, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
