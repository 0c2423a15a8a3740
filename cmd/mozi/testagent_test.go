package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// The test binary doubles as the agent the e2e tests spawn: with
// TEST_AGENT_MODE set, TestMain runs testAgent instead of the tests. It
// behaves as an agent must, through what mozi gives it: the prompt file,
// GITEA_TOKEN and the curl lines of the prompt's Gitea API section.

var commentURLRE = regexp.MustCompile(`curl -sS -X POST "([^"]+/issues/\d+/comments)"`)

func testAgent() int {
	mode := os.Getenv("TEST_AGENT_MODE")
	journal(fmt.Sprintf("start task=%s action=%s agent=%s pid=%d", os.Getenv("MOZI_TASK_ID"),
		os.Getenv("MOZI_ACTION"), os.Getenv("MOZI_AGENT"), os.Getpid()))
	prompt, err := os.ReadFile(os.Getenv("MOZI_PROMPT_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "test agent: no prompt:", err)
		return 2
	}
	switch mode {
	case "slow-once":
		if os.Getenv("MOZI_ATTEMPT") == "1" {
			time.Sleep(time.Hour) // mozi is killed meanwhile
		}
	case "fail":
		fmt.Println("test agent: failing on purpose")
		return 1
	case "hang":
		time.Sleep(time.Hour)
		return 0
	case "slow":
		time.Sleep(20 * time.Second)
	}
	m := commentURLRE.FindSubmatch(prompt)
	if m == nil {
		fmt.Fprintln(os.Stderr, "test agent: the prompt has no comment curl line")
		return 3
	}
	body := "[Action Report]\n**Root cause**: found by the test agent\n**Fix**: done\n**Branch**: fix/test\n**PR**: #4\n**CI**: green"
	if target := os.Getenv("TEST_AGENT_MENTION"); target != "" {
		body = "[Action Report]\n**Asked**: to continue\n**Answer**: @" + target + " your turn."
	}
	payload, _ := json.Marshal(map[string]string{"body": body})
	req, _ := http.NewRequest(http.MethodPost, string(m[1]), bytes.NewReader(payload))
	req.Header.Set("Authorization", "token "+os.Getenv("GITEA_TOKEN"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test agent: post comment:", err)
		return 4
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		fmt.Fprintln(os.Stderr, "test agent: post comment: status", resp.StatusCode)
		return 5
	}
	journal("reported task=" + os.Getenv("MOZI_TASK_ID"))
	return 0
}

func journal(line string) {
	path := os.Getenv("TEST_AGENT_JOURNAL")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.TrimSpace(line))
}
