package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moziplus/mozi/webhook/recording"
)

const (
	dashboardPath = "../../deploy/grafana/mozi-dashboard.json"
	alertsPath    = "../../deploy/prometheus/alerts.yml"
)

// corePanels must show data once mozi has handled the recorded webhooks.
var corePanels = []string{
	"Ticker leader", "Live tasks", "Deliveries by outcome", "Ack latency", "Inbox backlog",
	"Queue depth by status", "Live tasks by action type", "Tasks created", "Transitions",
	"Dispatch latency (task created → agent started)", "Agent runs by outcome", "Active runs",
	"Requests by endpoint and status", "Latency p99 by endpoint", "Memory",
}

// promBinary finds Prometheus's tools; CI sets MOZI_REQUIRE_PROMETHEUS so
// that a missing install fails instead of skipping.
func promBinary(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("MOZI_REQUIRE_PROMETHEUS") != "" {
			t.Fatalf("%s not found on PATH (apt-get install prometheus)", name)
		}
		t.Skipf("%s not found on PATH: install Debian's prometheus package to run this test", name)
	}
	return path
}

func TestAlertRulesPassPromtool(t *testing.T) {
	out, err := exec.Command(promBinary(t, "promtool"), "check", "rules", alertsPath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "SUCCESS")
}

type dashboardQuery struct {
	panel, expr string
}

func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	var out []dashboardQuery
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			out = append(out, dashboardQuery{panel: p.Title, expr: target.Expr})
		}
	}
	require.NotEmpty(t, out)
	return out
}

func alertQueries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(alertsPath)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(data, &rules))
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	require.NotEmpty(t, out)
	return out
}

// grafanaVars stands in for what Grafana substitutes before it queries.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$agent", ".*", "$job", ".*")

// A real Prometheus scrapes a running mozi while it handles the recorded
// webhooks; every query of the dashboard and of the alerts then runs
// through Prometheus's API without error, and the core panels have data.
func TestPrometheusEvaluatesDashboardAndAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mozi serve and Prometheus")
	}
	prom := promBinary(t, "prometheus")
	w := startWorld(t)
	dir := t.TempDir()
	alerts, err := filepath.Abs(alertsPath)
	require.NoError(t, err)
	target := strings.TrimPrefix(w.url, "http://")
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: mozi
    static_configs: [{targets: [%q]}]
`, alerts, target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))
	addr := freeAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	api := "http://" + addr
	w.eventually("Prometheus to scrape mozi", 60*time.Second, func() bool {
		res, err := promQuery(api, `up{job="mozi"}`)
		return err == nil && len(res) == 1 && res[0] == 1
	})

	// Work for every panel: the recorded sequence (issues, comments, a PR,
	// reviews, statuses, merges) with agents running, and a forged delivery.
	// An assignment first, until Prometheus has seen the histograms its
	// run creates: a series whose first scrape already holds all of its
	// observations has no rate.
	w.replay("007", "009") // #3 opened and assigned to coder2, who reports
	w.eventually("the first run's series to be scraped", 30*time.Second, func() bool {
		res, err := promQuery(api, `count(mozi_gitea_request_seconds_count) and count(mozi_dispatch_latency_seconds_count) and count(mozi_agent_run_seconds_count)`)
		return err == nil && len(res) == 1
	})
	for _, f := range w.fixtures {
		w.post(f, "prom-"+f.Name)
	}
	forged := recording.Find(w.fixtures, "002")
	req, err := forged.Request(w.url+"/webhooks/gitea", map[string]string{"X-Gitea-Signature": strings.Repeat("0", 64),
		"X-Gitea-Delivery": "forged"})
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	w.eventually("agents to have run", 30*time.Second, func() bool {
		res, err := promQuery(api, `sum(mozi_agent_runs_total)`)
		return err == nil && len(res) == 1 && res[0] >= 3
	})
	w.eventually("rates over the window to have two points", 30*time.Second, func() bool {
		res, err := promQuery(api, `sum(rate(mozi_agent_runs_total[1m])) > 0`)
		return err == nil && len(res) == 1
	})

	core := map[string]bool{}
	for _, p := range corePanels {
		core[p] = true
	}
	seen := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		expr := grafanaVars.Replace(q.expr)
		res, err := promQuery(api, expr)
		if !assert.NoError(t, err, "panel %q: %s", q.panel, expr) {
			continue
		}
		if core[q.panel] && slices.ContainsFunc(res, func(v float64) bool { return !math.IsNaN(v) }) {
			seen[q.panel] = true
		}
	}
	for _, p := range corePanels {
		assert.True(t, seen[p], "core panel %q has no data", p)
	}
	res, err := promQuery(api, `sum(mozi_webhook_deliveries_total{outcome="rejected_signature"})`)
	require.NoError(t, err)
	assert.Equal(t, []float64{1}, res, "the forged delivery is counted")

	for name, expr := range alertQueries(t) {
		_, err := promQuery(api, expr)
		assert.NoError(t, err, "alert %s: %s", name, expr)
	}
	w.eventually("every alert rule evaluated healthy", 30*time.Second, func() bool {
		health, err := ruleHealth(api)
		if err != nil || len(health) != len(alertQueries(t)) {
			return false
		}
		for _, h := range health {
			if h != "ok" {
				return false
			}
		}
		return true
	})
	// With mozi healthy, the alerts about mozi itself stay quiet.
	firing, err := promQuery(api, `count(ALERTS{alertstate="firing", alertname=~"MoziDown|MoziNoTickerLeader|MoziGiteaDown"})`)
	require.NoError(t, err)
	assert.Empty(t, firing)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// promQuery runs an instant query and returns the sample values (vector or
// scalar); an API or PromQL error is returned as such.
func promQuery(api, expr string) ([]float64, error) {
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("%s", out.Error)
	}
	var values [][2]any
	switch out.Data.ResultType {
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(out.Data.Result, &vec); err != nil {
			return nil, err
		}
		for _, v := range vec {
			values = append(values, v.Value)
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(out.Data.Result, &v); err != nil {
			return nil, err
		}
		values = append(values, v)
	default:
		return nil, fmt.Errorf("unexpected result type %q", out.Data.ResultType)
	}
	var floats []float64
	for _, v := range values {
		s, _ := v[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %v: %w", v[1], err)
		}
		floats = append(floats, f)
	}
	return floats, nil
}

// ruleHealth returns each loaded rule's health ("ok" once evaluated without
// error).
func ruleHealth(api string) (map[string]string, error) {
	resp, err := http.Get(api + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name   string `json:"name"`
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	health := map[string]string{}
	for _, g := range out.Data.Groups {
		for _, r := range g.Rules {
			health[r.Name] = r.Health
		}
	}
	return health, nil
}
