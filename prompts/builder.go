package prompts

import (
	"fmt"
	"sort"
	"strings"

	"github.com/moziplus/mozi/templates"
)

// DefaultTotalBudget bounds a whole prompt (bytes).
const DefaultTotalBudget = 64 << 10

// minFlexible is the least a shrinking section keeps.
const minFlexible = 1 << 10

// DefaultSections are the sections of every prompt, with their budgets.
func DefaultSections() []Section {
	return []Section{
		textSection{"iron_rules", L0, 0, 4 << 10},
		roleSection{textSection{"role", L1, 5, 12 << 10}},
		toolchainSection{textSection{"toolchain_context", L2, 10, 28 << 10}},
		priorSection{textSection{"prior_context", L2, 20, 12 << 10}},
		roleSkillSection{textSection{"role_skill", L2, 30, 2 << 10}},
		gitSection{textSection{"git_operation", L2, 35, 3 << 10}},
		giteaAPISection{textSection{"gitea_api", L2, 40, 6 << 10}},
		textSection{"constraints", L2, 50, 3 << 10},
		textSection{"gitea_convention", L2, 55, 2 << 10},
		wikiSection{textSection{"wiki_guide", L2, 60, 2 << 10}},
		deliverySection{textSection{"delivery_checklist", L2, 65, 6 << 10}},
		skillsSection{textSection{"skills", L3, 70, 2 << 10}},
	}
}

// flexible sections give way when the prompt exceeds its total budget.
var flexible = map[string]bool{"toolchain_context": true, "prior_context": true, "role": true}

// Builder renders prompts from a template set.
type Builder struct {
	set      *templates.Set
	sections []Section
	total    int
}

// NewBuilder builds prompts from set with the given sections (nil: the
// defaults) and total budget (0: DefaultTotalBudget).
func NewBuilder(set *templates.Set, sections []Section, total int) *Builder {
	if sections == nil {
		sections = DefaultSections()
	}
	if total <= 0 {
		total = DefaultTotalBudget
	}
	sorted := append([]Section(nil), sections...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Layer() != sorted[j].Layer() {
			return sorted[i].Layer() < sorted[j].Layer()
		}
		return sorted[i].Priority() < sorted[j].Priority()
	})
	return &Builder{set: set, sections: sorted, total: total}
}

// Prompt is a rendered prompt.
type Prompt struct {
	Text     string
	Sections []RenderedSection
}

// RenderedSection says what one section became.
type RenderedSection struct {
	Name     string
	Layer    Layer
	Priority int
	Bytes    int
	Budget   int
}

// Build renders the prompt for in.
func (b *Builder) Build(in *Input) (*Prompt, error) {
	if in == nil || in.Task.Repo == "" {
		return nil, fmt.Errorf("build prompt: no task")
	}
	if _, err := b.set.Resolve(in.Task.ActionType, in.Task.BusinessType); err != nil {
		return nil, fmt.Errorf("build prompt for task %d: %w", in.Task.ID, err)
	}
	r := &Renderer{In: in, Set: b.set, Vars: in.vars()}
	budgets := make([]int, len(b.sections))
	texts := make([]string, len(b.sections))
	total := 0
	for i, s := range b.sections {
		budgets[i] = s.Budget()
		texts[i] = s.Render(r, budgets[i])
		total += len(texts[i]) + 2
	}
	// Over the total: shrink the largest flexible section, repeatedly.
	for total > b.total {
		i := b.largestFlexible(texts)
		if i < 0 {
			break
		}
		over := total - b.total
		budgets[i] = max(minFlexible, len(texts[i])-over)
		before := len(texts[i])
		texts[i] = b.sections[i].Render(r, budgets[i])
		total += len(texts[i]) - before
	}
	p := &Prompt{}
	var sb strings.Builder
	for i, s := range b.sections {
		if texts[i] == "" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteString("\n\n")
		}
		sb.WriteString(texts[i])
		p.Sections = append(p.Sections, RenderedSection{Name: s.Name(), Layer: s.Layer(),
			Priority: s.Priority(), Bytes: len(texts[i]), Budget: budgets[i]})
	}
	sb.WriteString("\n")
	p.Text = r.Cut(sb.String(), b.total) // last resort: the fixed sections alone are too big
	return p, nil
}

func (b *Builder) largestFlexible(texts []string) int {
	best := -1
	for i, s := range b.sections {
		if !flexible[s.Name()] || len(texts[i]) <= minFlexible {
			continue
		}
		if best < 0 || len(texts[i]) > len(texts[best]) {
			best = i
		}
	}
	return best
}
