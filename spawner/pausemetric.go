package spawner

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// pausedUntil is mozi_agent_paused_until_seconds: when each agent paused at
// a usage limit (by a run of this process) resumes, in unix seconds; 0
// once that time passed.
type pausedUntil struct {
	desc *prometheus.Desc
	now  func() time.Time

	mu    sync.Mutex
	until map[string]time.Time
}

func newPausedUntil() *pausedUntil {
	return &pausedUntil{now: time.Now, until: map[string]time.Time{},
		desc: prometheus.NewDesc("mozi_agent_paused_until_seconds",
			"When an agent paused at its account's usage limit resumes (unix seconds; 0: not paused). A far future: it waits for a person.",
			[]string{"agent"}, nil)}
}

func (p *pausedUntil) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *pausedUntil) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for agent, until := range p.until {
		v := 0.0
		if until.After(now) {
			v = float64(until.Unix())
		}
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, v, agent)
	}
}

// paused records that agents wait until then (a later pause wins).
func (m *Metrics) paused(agents []string, until time.Time) {
	m.pausedUntil.mu.Lock()
	defer m.pausedUntil.mu.Unlock()
	for _, a := range agents {
		if cur, ok := m.pausedUntil.until[a]; !ok || until.After(cur) || !cur.After(m.pausedUntil.now()) {
			m.pausedUntil.until[a] = until
		}
	}
}
